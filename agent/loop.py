"""The agent loop: model call -> tool calls -> results, until the model ends its turn.

Invariants:
- The system prompt is rebuilt from memory before every model request (cheaply: the
  builder re-reads only after a change), so a memory edit made in this turn applies
  to the very next request.
- Every request goes through the context budget (``agent/context.py``): what is
  sent is the system prompt and tools unchanged, then a running summary of folded
  turns and the recent turns verbatim, under ``context.budget`` tokens. The loop's
  ``messages`` (and the thread in the database) keep every message.
- The message history always alternates user/assistant, starts with a user turn,
  and every ``tool_use`` gets a ``tool_result`` before the next model call. A turn
  that ends early still ends on an assistant message: an interruption keeps the
  partial answer marked ``[interrupted by the user]``, the step cap and a failed
  request mid-turn leave a marked note, so the next user turn is a message of its
  own (a Ctrl-C before any answer text only answers dangling tool calls: the next
  user turn then joins the last user message, which is well-formed). A request
  that fails before any answer takes the user's message back out of
  the conversation (kept in the database, marked failed); ``retry_text`` holds it
  for ``/retry``.
- Every message is persisted as it is added (when a thread store is given), so an
  interrupted or crashed session loses at most the reply in flight.
- The tool calls of one response run in order as one batch, each write checked
  against what the model had seen before the batch (``MemoryTools.based_on``): a
  read or write earlier in the batch never vouches for a later write of it.
- Presentation happens only through ``Hooks``; the loop never prints or prompts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from memagent.agent.context import (
    DEFAULT_BUDGET,
    ContextWindow,
    Folding,
    Shaped,
    SummaryMethod,
    compose,
    is_turn_start,
    split_stored,
)
from memagent.agent.model import Model, ModelError, ModelResponse, Usage
from memagent.agent.pricing import cost_usd
from memagent.agent.prompt import PromptBuilder, SystemPrompt, agents_md_note
from memagent.agent.tools import MUTATING, MemoryTools, ToolBox, ToolResult
from memagent.vfs import Change, ThreadStore, VfsError

log = logging.getLogger("memagent.agent")

DEFAULT_MAX_STEPS = 25
MAX_TOKENS = 8192
INTERRUPTED = "[interrupted by the user]"


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
    # One line about the conversation itself (turns folded into the summary, AGENTS.md
    # over its budget): secondary information for the person.
    on_notice: Callable[[str], None] = _noop
    # A memory revision a file tool of this loop just committed (after its tool call,
    # before its result); a subagent's come from its own loop. The front end shows
    # the changes no person was asked about (yolo, "always").
    on_change: Callable[[Change], None] = _noop


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
                 model_factory: Callable[[str], Model] | None = None,
                 context_budget: int = DEFAULT_BUDGET) -> None:
        self.tools = tools
        self.memory = memory
        self.model = model
        self.model_factory = model_factory
        self.threads = threads
        self.thread_id = thread_id
        self.hooks = hooks or Hooks()
        self.max_steps = max_steps
        self.prompt: PromptSource = prompt or PromptBuilder(memory.view)
        self.context = ContextWindow(model, budget=context_budget)
        self.messages: list[dict[str, Any]] = []
        # The thread seq of each message in ``messages`` (None without a thread store).
        self._seqs: list[int | None] = []
        # The text of the last user turn, for /retry (set when a turn starts).
        self.retry_text: str | None = None
        self._changes_at_build = 0
        self._agents_md_noted: int | None = None
        if threads is not None and thread_id is not None:
            self.load_thread(thread_id)

    # -- history ----------------------------------------------------------------

    def load_thread(self, thread_id: str) -> None:
        """Continue ``thread_id``: its messages and its running summary."""
        assert self.threads is not None
        self.thread_id = thread_id
        numbered = self.threads.load_numbered(thread_id)
        self.messages = [m for _, m in numbered]
        self._seqs = [seq for seq, _ in numbered]
        self.context.reset()
        self.context.conversation_path = None
        self.retry_text = next((_text(m) for m in reversed(self.messages) if is_turn_start(m)), None)
        summary = self.threads.summary(thread_id)
        if summary is not None:
            folded = sum(1 for seq in self._seqs if seq is not None and seq <= summary.upto_seq)
            # The kept part must open with a user turn (it did when it was folded).
            while folded < len(self.messages) and not is_turn_start(self.messages[folded]):
                folded += 1
            body, noted = split_stored(summary.text)
            method: SummaryMethod = "fallback" if summary.method == "fallback" else "model"
            self.context.reset(Folding(folded, body, noted, method))

    def _ensure_thread(self) -> None:
        if self.threads is not None and self.thread_id is None:
            self.thread_id = self.threads.create(self.memory.view.agent, self.model.name)

    def _add(self, message: dict[str, Any], usage: Usage | None = None,
             cost: float | None = None, title: str | None = None) -> None:
        if self.messages and self.messages[-1]["role"] == message["role"] == "user":
            # Fold into a pending user message. The loop no longer leaves one behind
            # (see the module docstring); this keeps an old thread that ends so valid.
            merged = {"role": "user", "content": _blocks(self.messages[-1]["content"])
                      + _blocks(message["content"])}
            self.messages[-1] = merged
            if self.threads is not None and self.thread_id is not None:
                self.threads.replace_last(self.thread_id, merged)
            return
        self.messages.append(message)
        seq: int | None = None
        if self.threads is not None and self.thread_id is not None:
            seq = self.threads.append(self.thread_id, message,
                                      usage=usage.to_dict() if usage else None, cost_usd=cost, title=title)
        self._seqs.append(seq)

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        if self.threads is not None and self.thread_id is not None:
            self.threads.event(self.thread_id, kind, data)

    # -- the turn -----------------------------------------------------------------

    def _system(self, *, check: bool) -> SystemPrompt:
        # Memory is re-checked at the start of a turn (others may have changed it) and
        # after this agent's own edits, so an edit applies to the very next request.
        # The change log is shared with subagents, so their edits count too.
        edited = len(self.memory.log) != self._changes_at_build
        system = self.prompt.build(check=check or edited)
        self._changes_at_build = len(self.memory.log)
        return system

    def shape(self) -> Shaped:
        """The request that would be sent now (for ``/context``); nothing is folded."""
        system = self._system(check=True)
        return self.context.report(system.blocks(), self.tools.definitions(), self.messages, MAX_TOKENS)

    def _on_fold(self, folding: Folding, before: int) -> None:
        if self.threads is None or self.thread_id is None or not folding.folded:
            return
        upto = self._seqs[folding.folded - 1]
        if upto is None:
            return
        self.threads.save_summary(self.thread_id, upto, compose(folding.text, folding.noted),
                                  folding.method or "fallback")
        self._event("summary", {"folded_messages": folding.folded - before, "upto_seq": upto,
                                "method": folding.method, "chars": len(folding.text)})

    def _call_model(self, *, first: bool, partial: list[str]) -> ModelResponse:
        system = self._system(check=first)
        if system.agents_md_version is not None:
            # The model has seen AGENTS.md in full: it may edit or overwrite that version.
            self.memory.seen["/AGENTS.md"] = system.agents_md_version
        if self.context.conversation_path is None and self.threads is not None and self.thread_id:
            path = self.threads.conversation_file(self.thread_id)
            self.context.conversation_path = f"/conversations{path}" if path else None
        shaped = self.context.prepare(system.blocks(), self.tools.definitions(), self.messages,
                                      max_tokens=MAX_TOKENS, on_fold=self._on_fold,
                                      notice=self.hooks.on_notice)
        request = shaped.request

        def on_text(chunk: str) -> None:
            partial.append(chunk)
            self.hooks.on_text(chunk)

        self.hooks.on_model_start()
        started = time.perf_counter()
        try:
            response = self.model.respond(request, on_text=on_text, on_retry=self.hooks.on_retry)
        finally:
            log.debug("model %s: %d of %d messages sent, ~%d tokens (%s), %d tools, %.0f ms", self.model.name,
                      len(request.messages), len(self.messages), shaped.tokens, shaped.counted,
                      len(request.tools), (time.perf_counter() - started) * 1000)
            self.hooks.on_model_end()
        self.context.counter.observe(request, response.usage)
        return response

    def turn(self, user_text: str, *, title: str | None = None) -> TurnResult:
        """Run one user turn to completion (or interruption / the step cap).

        ``title`` names a new thread (for a built-in prompt such as /remember; default:
        a short form of ``user_text``). A ``ModelError`` before any answer takes the
        user's message back out of the conversation and is raised; ``retry_text``
        keeps it.
        """
        self._ensure_thread()
        self.retry_text = user_text
        self._add({"role": "user", "content": [{"type": "text", "text": user_text}]}, title=title)
        if self.thread_id is not None:
            # Provenance of this turn's memory edits: the thread and the user turn (1 = first).
            self.memory.origin = replace(self.memory.origin, thread=self.thread_id,
                                         turn=sum(1 for m in self.messages if is_turn_start(m)))
        opened = len(self.messages)
        total = Usage()
        costs: list[float | None] = []
        texts: list[str] = []
        steps = 0
        partial: list[str] = []
        try:
            while True:
                partial.clear()
                try:
                    response = self._call_model(first=steps == 0, partial=partial)
                except ModelError as err:
                    self._failed(opened, err)
                    raise
                finally:
                    total.add(self.context.spent)
                    self.context.spent = Usage()
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
                    note = (f"[stopped after {steps} tool steps in one turn; say 'continue' to let "
                            "the agent go on]")
                    texts.append(note)
                    self._add({"role": "assistant", "content": [{"type": "text", "text": note}]})
                    return self._result(texts, steps, total, costs, "step_limit")
        except KeyboardInterrupt:
            shown = "".join(partial)
            if shown.strip():
                # Ctrl-C while the answer streamed: keep what was shown, marked.
                self._close_dangling(shown)
                texts.append(shown)
            else:
                # Nothing was answered: only answer dangling tool calls; the next user
                # turn joins this one's last user message, which is well-formed.
                self._answer_dangling()
            return self._result(texts, steps, total, costs, "interrupted")

    def _failed(self, opened: int, err: ModelError) -> None:
        """The model request failed: keep the conversation free of a dangling user turn."""
        if len(self.messages) == opened and self.messages and is_turn_start(self.messages[-1]):
            # Nothing was answered: the user's message leaves the conversation (the
            # database keeps it, marked failed) so the next turn is not glued to it.
            self.messages.pop()
            seq = self._seqs.pop() if self._seqs else None
            if self.threads is not None and self.thread_id is not None and seq is not None:
                self.threads.mark_failed(self.thread_id, seq)
            return
        # Tools already ran in this turn: their results stay; say the turn broke off.
        self._close_dangling("", note=f"[this turn stopped: the model request failed: {err}]")

    def _run_tools(self, uses: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results: list[dict[str, Any]] = []
        try:
            # The model issued these calls together, on what it had seen before any of them
            # ran: each write is checked against that, so a read or write earlier in the batch
            # never vouches for a later write (two writes to one file: the second is refused).
            with self.memory.based_on():
                self._run_batch(uses, results)
        except KeyboardInterrupt:
            done = {r["tool_use_id"] for r in results}
            results += _interrupted([u for u in uses if u["id"] not in done])
            self._add({"role": "user", "content": results})
            raise
        return results

    def _run_batch(self, uses: list[dict[str, Any]], results: list[dict[str, Any]]) -> None:
        """Run one batch of tool calls in order, appending each ``tool_result`` to ``results``."""
        for use in uses:
            name, args = use["name"], use.get("input") or {}
            self.hooks.on_tool_call(name, args)
            logged = len(self.memory.log)
            result = self.tools.run(name, args if isinstance(args, dict) else {})
            if name in MUTATING:
                for change in self.memory.log.made[logged:]:
                    self.hooks.on_change(change)
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
            elif name in MUTATING and isinstance(args, dict) and args.get("file_path") == "/AGENTS.md":
                self._note_agents_md(block)
            results.append(block)

    def _note_agents_md(self, block: dict[str, Any]) -> None:
        """After a write to AGENTS.md: over its budget, tell the model (in the result) and the person."""
        try:
            info = self.memory.view.stat("/AGENTS.md")
        except VfsError:
            return
        note = agents_md_note(info.size)
        if note is None or not isinstance(block.get("content"), str):
            return
        block["content"] = f"{block['content']}\n{note}"
        if self._agents_md_noted != info.version:
            self._agents_md_noted = info.version
            self.hooks.on_notice(note)

    def _answer_dangling(self) -> None:
        """Give every tool call of the last assistant message an (interrupted) result."""
        if self.messages and self.messages[-1]["role"] == "assistant":
            uses = [b for b in _blocks(self.messages[-1]["content"]) if b.get("type") == "tool_use"]
            if uses:
                self._add({"role": "user", "content": _interrupted(uses)})

    def _close_dangling(self, partial: str, *, note: str = INTERRUPTED) -> None:
        """End a turn that stopped early on an assistant message, marked with ``note``.

        Tool calls left without a result get an error result first; a partial answer
        (streamed before Ctrl-C) is kept, with the note after it.
        """
        if not self.messages:
            return
        if self.messages[-1]["role"] == "assistant":
            if not any(b.get("type") == "tool_use" for b in _blocks(self.messages[-1]["content"])):
                return
            self._answer_dangling()
        text = f"{partial.rstrip()}\n\n{note}" if partial.strip() else note
        self._add({"role": "assistant", "content": [{"type": "text", "text": text}]})

    def _result(self, texts: list[str], steps: int, usage: Usage, costs: list[float | None],
                stop: str) -> TurnResult:
        known = [c for c in costs if c is not None]
        cost = sum(known) if known else None
        return TurnResult("\n\n".join(t for t in texts if t), steps, usage, cost, stop)

    def new_thread(self) -> None:
        self.messages = []
        self._seqs = []
        self.thread_id = None
        self.retry_text = None
        self.context.reset()
        self.context.conversation_path = None


def _interrupted(uses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Error results for tool calls that Ctrl-C stopped before they ran."""
    return [{"type": "tool_result", "tool_use_id": u["id"], "is_error": True,
             "content": "interrupted by the user before this ran"} for u in uses]


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def _text(message: dict[str, Any]) -> str:
    return "\n".join(str(b.get("text", "")) for b in _blocks(message["content"]) if b.get("type") == "text")
