"""Subagents: ``/subagents/<name>.md`` run as a nested agent loop through the ``task`` tool.

Invariants:
- A subagent sees the same memory through the same approval gate; its writes are
  recorded with author ``subagent``. Its tools are those its frontmatter lists
  (default: the read-only file tools), never ``task`` itself, so nesting stops at one.
- Its system prompt is the file's body; its conversation is not kept in the thread,
  only its final answer (as the ``task`` tool result) and the tool calls it made.
- Failures (no such subagent, unreadable file) come back as ``is_error`` results.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memagent.agent.prompt import SystemPrompt, frontmatter_fields
from memagent.agent.tools import DEFINITIONS, READ_ONLY, ToolBox, ToolResult
from memagent.vfs.errors import NotFound

if TYPE_CHECKING:
    from memagent.agent.loop import Agent
    from memagent.agent.model import Model

ModelFactory = Callable[[str], "Model"]
SUBAGENT_MAX_STEPS = 15


class FixedPrompt:
    """A system prompt that does not follow memory (a subagent's own instructions)."""

    def __init__(self, text: str) -> None:
        self._prompt = SystemPrompt(text, None)

    def build(self, *, check: bool = True) -> SystemPrompt:
        return self._prompt


def _body(content: str) -> str:
    end = content.find("\n---", 3)
    return content[end + 4 :].lstrip("\n") if content.startswith("---") and end != -1 else content


def run_subagent(parent: Agent, name: str, description: str) -> ToolResult:
    from memagent.agent.loop import Agent

    view = parent.tools.view
    path = f"/subagents/{name}.md"
    try:
        content = view.read(path).content
    except NotFound:
        known = [p.rsplit("/", 1)[-1][:-3] for p in view.glob("subagents/*.md", "/")]
        return ToolResult(f"no subagent named {name!r}; the subagents are: "
                          f"{', '.join(known) if known else 'none yet (create /subagents/<name>.md)'}", True)
    meta: dict[str, Any] = frontmatter_fields(content) or {}
    body = _body(content).strip()
    if not body:
        return ToolResult(f"{path} has no instructions (its body is empty); write them first", True)
    listed = meta.get("tools")
    known_tools = {d["name"] for d in DEFINITIONS}
    allowed = frozenset(t for t in listed if t in known_tools) if isinstance(listed, list) else READ_ONLY
    model = parent.model
    wanted = meta.get("model")
    if isinstance(wanted, str) and wanted and wanted != model.name and parent.model_factory:
        model = parent.model_factory(wanted)
    tools = ToolBox(view, parent.tools.gate, author="subagent", allowed=allowed)
    child = Agent(tools, model, hooks=parent.hooks, max_steps=SUBAGENT_MAX_STEPS,
                  prompt=FixedPrompt(f"You are the subagent '{name}'.\n\n{body}"))
    result = child.turn(description)
    parent.tools.changes.extend(tools.changes)
    answer = result.text or "(the subagent gave no answer)"
    if result.stopped not in ("end_turn", "max_tokens"):
        return ToolResult(f"{answer}\n[the subagent stopped early: {result.stopped}]", True)
    return ToolResult(answer)
