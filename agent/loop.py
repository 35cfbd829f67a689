"""The agent loop: model call -> tool calls -> results, until the model ends its turn.

Invariants:
- The system prompt is rebuilt from memory before every model request (cheaply: the
  builder re-reads only after a change), so a memory edit made in this turn applies
  to the very next request.
- The message history always alternates user/assistant and every ``tool_use`` gets a
  ``tool_result`` before the next model call. After an interruption or the step cap,
  the history may end on a user message; the next user turn is folded into it.
- Every message is persisted as it is added (when a thread store is given), so an
  interrupted or crashed session loses at most the reply in flight.
- Presentation happens only through ``Hooks``; the loop never prints or prompts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from memagent.agent.model import Model, ModelRequest, ModelResponse, Usage
from memagent.agent.pricing import cost_usd
from memagent.agent.prompt import PromptBuilder, SystemPrompt
from memagent.agent.tools import MUTATING, MemoryTools, ToolBox, ToolResult
from memagent.vfs.threads import ThreadStore

log = logging.getLogger("memagent.agent")

DEFAULT_MAX_STEPS = 25
MAX_TOKENS = 8192


def _noop(*_: Any) -> None:
    return None


@dataclass
class Hooks:
    """What the front end wants to hear about while a turn runs."""

    on_text: Callable[[str], None] = _noop
    on_model_start: Callable[[], None] = _noop
    on_model_end: Callable[[], None] = _noop
    on_tool_call: Callable[[str, dict[str, Any]], None] = _noop
    on_tool_result: Callable[[str, ToolResult], None] = _noop
    on_retry: Callable[[str], None] = _noop


class PromptSource(Protocol):
    def build(self, *, check: bool = True) -> SystemPrompt: ...


@dataclass
class TurnResult:
    text: str
    steps: int
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    # "step_limit" or "interrupted" (ours), else the model's own stop reason
    # ("end_turn", "max_tokens", ...), an open set that the API may extend.
    stopped: str = "end_turn"


class Agent:
    """One conversation with a model over one agent's memory.

    ``tools`` is what the model may call; ``memory`` is the file-tool provider among
    them, whose view, ``seen`` versions and change log the loop keeps in step with
    the system prompt. Build one with ``memagent.agent.builder.build_agent``.
    """

    def __init__(self, tools: ToolBox, model: Model, *, memory: MemoryTools,
                 threads: ThreadStore | None = None, thread_id: str | None = None,
                 hooks: Hooks | None = None, max_steps: int = DEFAULT_MAX_STEPS,
                 prompt: PromptSource | None = None,
                 model_factory: Callable[[str], Model] | None = None) -> None:
        self.tools = tools
        self.memory = memory
        self.model = model
        self.model_factory = model_factory
        self.threads = threads
        self.thread_id = thread_id
        self.hooks = hooks or Hooks()
        self.max_steps = max_steps
        self.prompt: PromptSource = prompt or PromptBuilder(memory.view)
        self.messages: list[dict[str, Any]] = []
        self._changes_at_build = 0
        if threads is not None and thread_id is not None:
            self.messages = threads.load(thread_id)

    # -- history ----------------------------------------------------------------

    def _ensure_thread(self) -> None:
        if self.threads is not None and self.thread_id is None:
            self.thread_id = self.threads.create(self.memory.view.agent, self.model.name)

    def _add(self, message: dict[str, Any], usage: Usage | None = None,
             cost: float | None = None) -> None:
        if self.messages and self.messages[-1]["role"] == message["role"] == "user":
            # Fold into the pending user message (after an interruption or step cap).
            merged = {"role": "user", "content": _blocks(self.messages[-1]["content"])
                      + _blocks(message["content"])}
            self.messages[-1] = merged
            if self.threads is not None and self.thread_id is not None:
                self.threads.replace_last(self.thread_id, merged)
            return
        self.messages.append(message)
        if self.threads is not None and self.thread_id is not None:
            self.threads.append(self.thread_id, message,
                                usage=usage.to_dict() if usage else None, cost_usd=cost)

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        if self.threads is not None and self.thread_id is not None:
            self.threads.event(self.thread_id, kind, data)

    # -- the turn -----------------------------------------------------------------

    def _call_model(self, *, first: bool) -> ModelResponse:
        # Memory is re-checked at the start of a turn (others may have changed it) and
        # after this agent's own edits, so an edit applies to the very next request.
        # The change log is shared with subagents, so their edits count too.
        edited = len(self.memory.log) != self._changes_at_build
        system = self.prompt.build(check=first or edited)
        self._changes_at_build = len(self.memory.log)
        if system.agents_md_version is not None:
            # The model has seen AGENTS.md in full: it may edit or overwrite that version.
            self.memory.seen["/AGENTS.md"] = system.agents_md_version
        request = ModelRequest(system=system.blocks(), messages=self.messages,
                               tools=self.tools.definitions(), max_tokens=MAX_TOKENS)
        self.hooks.on_model_start()
        started = time.perf_counter()
        try:
            return self.model.respond(request, on_text=self.hooks.on_text, on_retry=self.hooks.on_retry)
        finally:
            log.debug("model %s: %d messages, %d tools, %.0f ms", self.model.name, len(self.messages),
                      len(request.tools), (time.perf_counter() - started) * 1000)
            self.hooks.on_model_end()

    def turn(self, user_text: str) -> TurnResult:
        """Run one user turn to completion (or interruption / the step cap)."""
        self._ensure_thread()
        self._add({"role": "user", "content": [{"type": "text", "text": user_text}]})
        total = Usage()
        costs: list[float | None] = []
        texts: list[str] = []
        steps = 0
        try:
            while True:
                response = self._call_model(first=steps == 0)
                total.add(response.usage)
                # Priced per request: long-context rates apply per request, not per turn.
                cost = cost_usd(response.model, response.usage)
                costs.append(cost)
                self._add({"role": "assistant", "content": response.content},
                          usage=response.usage, cost=cost)
                if response.text:
                    texts.append(response.text)
                uses = response.tool_uses
                if not uses:
                    return self._result(texts, steps, total, costs, response.stop_reason)
                results = self._run_tools(uses)
                self._add({"role": "user", "content": results})
                steps += 1
                if steps >= self.max_steps:
                    texts.append(
                        f"[stopped after {steps} tool steps in one turn; say 'continue' to let "
                        "the agent go on]")
                    return self._result(texts, steps, total, costs, "step_limit")
        except KeyboardInterrupt:
            self._close_dangling()
            return self._result(texts, steps, total, costs, "interrupted")

    def _run_tools(self, uses: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results: list[dict[str, Any]] = []
        try:
            for use in uses:
                name, args = use["name"], use.get("input") or {}
                self.hooks.on_tool_call(name, args)
                result = self.tools.run(name, args if isinstance(args, dict) else {})
                self.hooks.on_tool_result(name, result)
                event = {"name": name, "input": args, "is_error": result.is_error,
                         "result": result.content[:500]}
                self._event("tool_call", event)
                if name in MUTATING:
                    self._event("approval", {"name": name, "path": args.get("file_path"),
                                             "approved": not result.is_error,
                                             "result": result.content[:500]})
                block: dict[str, Any] = {"type": "tool_result", "tool_use_id": use["id"],
                                         "content": result.model_content()}
                if result.is_error:
                    block["is_error"] = True
                results.append(block)
        except KeyboardInterrupt:
            done = {r["tool_use_id"] for r in results}
            results += _interrupted([u for u in uses if u["id"] not in done])
            self._add({"role": "user", "content": results})
            raise
        return results

    def _close_dangling(self) -> None:
        """After Ctrl-C, make sure no tool_use is left without a result."""
        if not self.messages or self.messages[-1]["role"] != "assistant":
            return
        uses = [b for b in _blocks(self.messages[-1]["content"]) if b.get("type") == "tool_use"]
        if uses:
            self._add({"role": "user", "content": _interrupted(uses)})

    def _result(self, texts: list[str], steps: int, usage: Usage, costs: list[float | None],
                stop: str) -> TurnResult:
        known = [c for c in costs if c is not None]
        cost = sum(known) if known else None
        return TurnResult("\n\n".join(t for t in texts if t), steps, usage, cost, stop)

    def new_thread(self) -> None:
        self.messages = []
        self.thread_id = None


def _interrupted(uses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Error results for tool calls that Ctrl-C stopped before they ran."""
    return [{"type": "tool_result", "tool_use_id": u["id"], "is_error": True,
             "content": "interrupted by the user before this ran"} for u in uses]


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)
