"""The chat session: read a line, run a turn or a slash command, repeat.

Invariants:
- A session never dies of a turn: a model error is one line and the session goes
  on (the failed message is kept in the thread but out of the conversation, and
  ``/retry`` sends it again);
  Ctrl-C during a turn ends that turn only (the loop keeps the thread consistent);
  Ctrl-C at the prompt clears the line.
- End of input ends the session with status 0, also when it comes during an
  approval (the UI rejects the edit and marks itself closed).
- Every memory revision this session makes (the agent's and its subagents' through
  the gate, and ``/undo``'s, ``/redo``'s and ``/edit``'s) is recorded in one
  ``ChangeLog`` (``Session.log``), in order: ``/history``, ``/diff``, ``/undo`` and
  ``/redo`` read it.
- A typed message's ``@path`` tokens attach those memory files (``attach``); the
  person is told what was attached, and the model may then edit those versions.
- The MCP servers of ``/tools.json`` are started when the session is built and
  stopped when ``run`` returns, however it returns (``/exit``, end of input, an
  exception), so no server process outlives the session; stopping one that hangs
  does not wait for it. At a terminal (``ui.interactive``) the prompt does not
  wait for them: one line names the servers still starting, and a line says when
  each is ready or has failed (above the waiting prompt, else before the next
  prompt or model request); a request goes with the tools of the servers ready by
  then and says which it went without (``tools.mcp``). A script or a pipe waits
  for them before its first request (a failure is a one-line warning).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from memagent.agent.builder import build_agent
from memagent.agent.chat import slash
from memagent.agent.chat.attach import attach
from memagent.agent.chat.attach import describe as describe_attached
from memagent.agent.chat.recap import recap
from memagent.agent.chat.ui.base import UI, PromptInfo
from memagent.agent.gate import Gate
from memagent.agent.loop import DEFAULT_MAX_STEPS, Agent, TurnResult
from memagent.agent.mcp.client import McpHub
from memagent.agent.model import Model, ModelError, ModelRequest, ModelResponse
from memagent.agent.model.base import TextCallback
from memagent.agent.tools import ChangeLog, MemoryTools
from memagent.agent.tools.mcp import McpTools
from memagent.agent.tools.memory import agent_rules
from memagent.vfs import AgentView, ThreadStore, memory_of


class ShownText:
    """A ``Model`` that passes its answer's text to ``on_text`` even when it did not
    stream (``MEMAGENT_STREAM=0``), so every answer reaches the screen the same way."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = inner.name

    def respond(self, request: ModelRequest, *, on_text: TextCallback | None = None,
                on_retry: TextCallback | None = None) -> ModelResponse:
        streamed = False

        def relay(chunk: str) -> None:
            nonlocal streamed
            streamed = True
            assert on_text is not None
            on_text(chunk)

        response = self.inner.respond(request, on_text=relay if on_text else None, on_retry=on_retry)
        if on_text is not None and not streamed and response.text:
            on_text(response.text)
        return response

    def count_tokens(self, request: ModelRequest) -> int | None:
        """The inner model's token counting, when it has one."""
        counter = getattr(self.inner, "count_tokens", None)
        return counter(request) if counter is not None else None


@dataclass
class Session:
    ui: UI
    agent: Agent
    threads: ThreadStore
    gate: Gate
    done: bool = False
    hub: McpHub = field(default_factory=McpHub)
    # Turns the model could not answer (a ModelError) and no /retry answered since: a
    # scripted chat (stdin not a terminal) then exits 1, so a pipe or CI sees the failure.
    failed_turns: int = 0
    last_turn_failed: bool = False

    @property
    def mcp(self) -> McpTools | None:
        return next((p for p in self.agent.tools.providers if isinstance(p, McpTools)), None)

    def close(self) -> None:
        """Stop the MCP servers this session started (bounded in time; idempotent)."""
        mcp = self.mcp
        if mcp is not None:
            mcp.on_event = None  # a server stopped now is not news
        self.hub.close()

    def show_mcp_events(self) -> None:
        """The lines about MCP servers that became ready or failed since last shown."""
        mcp = self.mcp
        for text, failed in mcp.events() if mcp is not None else []:
            if failed:
                self.ui.error(text)
            else:
                self.ui.note(text)

    @property
    def memory(self) -> MemoryTools:
        return self.agent.memory

    @property
    def log(self) -> ChangeLog:
        return self.agent.memory.log

    @property
    def view(self) -> AgentView:
        return self.agent.memory.view

    @property
    def model_name(self) -> str:
        return self.agent.model.name

    def prompt(self) -> PromptInfo:
        return PromptInfo(self.view.agent, self.gate.yolo, self.gate.always)

    def switch_thread(self, thread_id: str) -> None:
        """Continue ``thread_id`` in this session and show its last few turns."""
        self.agent.load_thread(thread_id)
        # What the model read belongs to the other conversation.
        self.memory.seen.clear()
        info = self.threads.get(self.view.agent, thread_id)
        self.ui.info(f"Resumed thread {thread_id[:8]}: {info.title or 'untitled'} "
                     f"({info.messages} message{'s' if info.messages != 1 else ''}).")
        self.show_recap()

    def show_recap(self) -> None:
        """The last few turns of the current thread, if it has any."""
        lines = recap(self.agent.messages, self.view.agent)
        if lines:
            self.ui.note("the last turns of this thread:")
            self.ui.show_text("\n".join(lines))

    def send(self, text: str) -> TurnResult | None:
        """A message the person typed: ``@path`` attaches memory files, then one turn."""
        found = attach(self.view, text)
        for token in found.missing:
            self.ui.note(f"{token}: no such memory file; sent without it")
        if found.skipped:
            self.ui.note(f"not attached (over {len(found.files)} files or 256 KiB): {', '.join(found.skipped)}")
        if found.files:
            self.ui.note(describe_attached(found.files))
            for f in found.files:
                # The model has the whole file now: it may edit that version.
                self.memory.seen[f.path] = f.version
        return self.run_turn(found.text)

    # -- the loop -----------------------------------------------------------------------

    def run(self) -> int:
        """The session; its exit status: 0, or 1 when a scripted session (not at a terminal)
        had a turn the model could not answer."""
        try:
            status = self._loop()
        finally:
            self.close()
        return 1 if status == 0 and self.failed_turns and not self.ui.interactive else status

    def _loop(self) -> int:
        while not self.done and not self.ui.closed:
            self.show_mcp_events()
            try:
                line = self.ui.read_input(self.prompt())
            except KeyboardInterrupt:
                continue  # Ctrl-C at the prompt: drop the line, ask again
            if line is None:
                break
            line = line.strip()
            if not line:
                continue
            try:
                if slash.is_command(line):
                    slash.dispatch(self, line)
                elif slash.is_note(line):
                    slash.note(self, line)
                else:
                    self.send(line)
            except KeyboardInterrupt:
                self.ui.note("interrupted")
        return 0

    def run_turn(self, text: str, *, title: str | None = None) -> TurnResult | None:
        """One agent turn with its error handling and the usage line after it.

        ``title`` names a new thread (built-in prompts pass one)."""
        try:
            result = self.agent.turn(text, title=title)
        except ModelError as exc:
            self.failed_turns += 1
            self.last_turn_failed = True
            # /retry is for a person at the prompt; a pipe cannot type it.
            self.ui.error(f"{exc} (/retry sends the message again)" if self.ui.interactive else str(exc))
            return None
        self.last_turn_failed = False
        if self.ui.closed:
            return result
        if result.stopped == "interrupted":
            self.ui.note("interrupted; the conversation is kept, type to go on")
        elif result.stopped == "step_limit":
            # The loop appends its note to the text, which was never streamed.
            self.ui.note(result.text.rsplit("\n\n", 1)[-1])
        elif result.stopped == "max_tokens":
            self.ui.note("the answer hit the length limit; say 'continue' for the rest")
        if result.usage.total_input_tokens or result.usage.output_tokens:
            self.ui.note(usage_line(result))
        return result


def usage_line(result: TurnResult) -> str:
    u = result.usage
    cached = u.cache_read_input_tokens
    parts = [f"{u.total_input_tokens:,} tokens in" + (f" ({cached:,} cached)" if cached else ""),
             f"{u.output_tokens:,} out"]
    parts.append(f"${result.cost_usd:.4f}" if result.cost_usd is not None else "cost unknown")
    return " · ".join(parts)


def build_session(view: AgentView, model: Model, ui: UI, *, threads: ThreadStore,
                  thread_id: str | None = None, yolo: bool = False,
                  max_steps: int = DEFAULT_MAX_STEPS,
                  model_factory: Callable[[str], Model] | None = None,
                  context_budget: int | None = None, start_mcp: bool = True) -> Session:
    """Wire the UI's approver into the gate and its hooks into the loop.

    ``model_factory`` builds the model a subagent's frontmatter asks for;
    ``context_budget`` (tokens) caps each request (default: ``context.DEFAULT_BUDGET``);
    ``start_mcp=False`` starts none of ``/tools.json``'s servers (``memagent eval --no-memory``).
    """
    gate = Gate(ui.approver, yolo=yolo)
    # The agent's approval rules decide before the gate; chat says which rule decided. A
    # store with no database (a double) has no review queue: its ``queue`` rules refuse.
    records = memory_of(view)
    rules = agent_rules(view, records.queue if records is not None else None, by="memagent chat", heard=ui.info)
    ui.memory_paths = lambda: view.glob("**", "/")
    shown: Callable[[str], Model] | None = (
        (lambda name: ShownText(model_factory(name))) if model_factory else None)
    hub = McpHub()
    if start_mcp and ui.interactive:
        # Servers start once the first prompt is on the screen: the SDK's import would
        # hold the interpreter for most of a second the prompt should have.
        hub.hold()
        ui.when_prompt_up.append(hub.release)
    try:
        agent = build_agent(view, ShownText(model), gate=gate, threads=threads, thread_id=thread_id,
                            hooks=ui.hooks(), max_steps=max_steps, model_factory=shown,
                            mcp_hub=hub if start_mcp else None,
                            warn=ui.error, rules=rules, mcp_background=ui.interactive)
    except BaseException:
        hub.close()
        raise
    if context_budget is not None:
        agent.context.budget = context_budget
    agent.hooks.on_notice = ui.note
    for warning in agent.prompt.build().warnings:
        ui.note(warning)
    session = Session(ui, agent, threads, gate, hub=hub)
    mcp = session.mcp
    if mcp is not None:
        _follow_mcp(session, mcp)
    return session


def _follow_mcp(session: Session, mcp: McpTools) -> None:
    """Say which servers are starting, and when each is ready or failed."""
    ui, hooks = session.ui, session.agent.hooks
    mcp.note = ui.note
    # From the hub's thread: shown above the waiting prompt, or queued until the
    # next prompt or model request (``show_mcp_events``).
    def wake() -> None:
        ui.above_prompt(session.show_mcp_events)  # False: shown at the next safe point

    mcp.on_event = wake
    model_start = hooks.on_model_start

    def on_model_start() -> None:
        session.show_mcp_events()
        model_start()

    hooks.on_model_start = on_model_start
    starting = mcp.starting()
    if starting:
        plural = "s" if len(starting) > 1 else ""
        ui.note(f"MCP server{plural} starting: {', '.join(starting)} (the prompt does not wait; "
                f"a line says when {'each is' if plural else 'it is'} ready; /tools shows the state)")
    session.show_mcp_events()
