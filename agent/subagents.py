"""Subagents: ``/subagents/<name>.md`` run as a nested agent loop through the ``task`` tool.

Invariants:
- Only a file at ``/subagents/<name>.md`` whose name passes the skill-name rules and
  whose content passes the subagent validator runs; anything else (``../notes/x``,
  a file that became invalid) is an ``is_error`` result naming the problem.
- A subagent sees the same memory through the same approval gate; its writes are
  recorded with author ``subagent`` in the session's one change log (so ``/history``
  shows them and ``/undo`` takes them back). Its tools are those its frontmatter
  lists (default: the read-only file tools), never ``task`` itself, so nesting
  stops at one. MCP tools (``mcp__<server>__<tool>``) it lists come from the
  parent's connections, and only while ``/tools.json`` allows them.
- A subagent's context is its description and its own calls, so it starts with
  no ``seen`` versions of its own and never inherits the parent's: it must read a
  file before overwriting it, and its writes are checked against its own reads.
  It shares the parent's change log, so a parent's write after the subagent
  changed a file the parent had read is refused (the parent saw an older version),
  and a parent's versionless write issued in the same batch as the ``task`` call
  is refused if the subagent changed that file.
- Its ``model:`` frontmatter is a model id made through the registry (the front end's
  ``model_factory``); one that cannot be made is an ``is_error`` result, the parent's
  model is used when there is no factory or the same model is named.
- Its system prompt is the file's body; its conversation is not kept in the thread,
  only its final answer (as the ``task`` tool result) and the tool calls it made.
- Its words are not streamed through the parent's ``on_text`` (they would read as
  the main agent's answer): the front end shows its answer once, as the ``task``
  result, saying whose it is. Its tool calls, approvals and changes are shown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from memagent.agent.model import ModelError
from memagent.agent.profiles import profile_of
from memagent.agent.prompt import SystemPrompt
from memagent.agent.tools import READ_ONLY, MemoryTools, ToolResult
from memagent.agent.tools.mcp import McpTools
from memagent.agent.tools.memory import DEFINITIONS
from memagent.agent.tools.search import NAMES as SEARCH_NAMES
from memagent.agent.tools.toolset import tool_box
from memagent.validators import check_name, read_frontmatter, validate
from memagent.vfs import NotFound

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


def _known(parent: Agent) -> str:
    names = [p.rsplit("/", 1)[-1][:-3] for p in parent.memory.view.glob("subagents/*.md", "/")]
    return ", ".join(n for n in names if check_name(n) is None) or "none yet (create /subagents/<name>.md)"


def _quiet(_: str) -> None:
    return None


def run_subagent(parent: Agent, name: str, description: str) -> ToolResult:
    from memagent.agent.loop import Agent

    view = parent.memory.view
    problem = check_name(name)
    if problem is not None:
        return ToolResult(f"no subagent: {problem} The subagents are: {_known(parent)}.", True)
    path = f"/subagents/{name}.md"
    try:
        content = view.read(path).content
    except NotFound:
        return ToolResult(f"no subagent named {name!r}; the subagents are: {_known(parent)}", True)
    problems = validate(path, content)
    if problems:
        first = problems[0]
        return ToolResult(f"{path} cannot run: it breaks the subagent rules ({first.location}: "
                          f"{first.message}); fix it first (`memagent validate` lists every problem)", True)
    doc = read_frontmatter(content)
    meta: dict[str, Any] = doc.meta or {}
    body = doc.body.strip()
    if not body:
        return ToolResult(f"{path} has no instructions (its body is empty); write them first", True)
    listed = meta.get("tools")
    known_tools = {d["name"] for d in DEFINITIONS} | SEARCH_NAMES
    allowed = (frozenset(t for t in listed if isinstance(t, str) and (t in known_tools or t.startswith("mcp__")))
               if isinstance(listed, list) else READ_ONLY)
    model = parent.model
    wanted = meta.get("model")
    if isinstance(wanted, str) and wanted and wanted != model.name and parent.model_factory:
        # The factory is the registry's (``provider/model``, a bare name is Claude); a model
        # that cannot be made is this call's error, not the parent's turn's.
        try:
            model = parent.model_factory(wanted)
        except ModelError as err:
            return ToolResult(f"{path} asks for model {wanted!r}, which cannot be used: {err} "
                              "(fix its `model:` line or remove it to use the chat's model)", True)
    # A fresh ``seen``: the subagent has read nothing yet, whatever the parent has (it must
    # not write over a version it never saw). The shared log lets each side's version
    # checks see the other's changes.
    # The subagent's own model decides its tool definitions, as the parent's decides the parent's.
    compact = profile_of(model) == "compact"
    memory = MemoryTools(view, parent.memory.gate, author="subagent", log=parent.memory.log,
                         check_tools_json=parent.memory.check_tools_json, rules=parent.memory.rules,
                         compact=compact)
    # Its edits come from the parent's conversation and turn, through this subagent.
    memory.origin = replace(parent.memory.origin, kind="subagent", detail=name)
    mcp = [p for p in parent.tools.providers if isinstance(p, McpTools)]
    hooks = replace(parent.hooks, on_text=_quiet)  # its answer is shown once, as the task result
    child = Agent(tool_box("subagent", view, memory=memory, compact=compact, mcp=mcp, allowed=allowed), model,
                  memory=memory, hooks=hooks, max_steps=SUBAGENT_MAX_STEPS,
                  prompt=FixedPrompt(f"You are the subagent '{name}'.\n\n{body}"))
    result = child.turn(description)
    answer = result.text or "(the subagent gave no answer)"
    if result.stopped not in ("end_turn", "max_tokens"):
        return ToolResult(f"{answer}\n[the subagent stopped early: {result.stopped}]", True)
    return ToolResult(answer)
