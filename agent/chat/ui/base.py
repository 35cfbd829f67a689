"""The chat front end's input/output layer: one interface, two implementations.

``TerminalUI`` (``terminal``: prompt_toolkit input, rich output) serves a person at
a terminal; ``PlainUI`` (``plain``) serves scripts and pipes: no colour codes, no
spinner, user turns and approval answers read line by line.

Invariants:
- Everything a person sees or types in ``memagent chat`` goes through a ``UI``; the
  agent core reaches it only through ``Hooks`` and the gate's approver (``approver``,
  which calls ``confirm``).
- Nothing is applied out of sight: every revision a file tool commits reaches
  ``on_change``; one the person did not approve after seeing its diff (yolo, after
  ``a``) is shown as a compact diff (``compact_diff``: changed lines, folded).
- ``confirm`` is the one place a memory edit is approved: it returns a ``Decision``,
  re-asks on an unclear answer, and at end of input rejects the edit and ends the
  session: it sets ``closed`` and raises ``KeyboardInterrupt``, which the loop already
  turns into a clean end of the turn (every tool call answered, nothing written,
  no further model call).
- While a subagent works (between the ``task`` call and its result) ``subagent``
  names it: its tool calls are shown indented under ``task(name)`` and an approval
  it asks for says who asked.
- rich and prompt_toolkit are imported by ``terminal`` only, and only when a
  terminal UI is built (``make_ui`` in this package's ``__init__``), so scripted
  runs never pay for them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from memagent.agent.gate import Decision
from memagent.agent.loop import Hooks
from memagent.agent.tools import ApprovalRequest, ToolResult
from memagent.vfs import Change, unified_diff

APPROVAL_QUESTION = "Approve? [y]es / [n]o / n: feedback / [a]lways"
APPROVAL_HELP = "Please answer y, n, n: <feedback>, or a."


@dataclass(frozen=True)
class PromptInfo:
    """What the input prompt shows: the agent, and whether edits are applied without
    asking (``yolo``: approvals off; ``auto``: the person answered ``a`` always)."""

    agent: str
    yolo: bool
    auto: bool = False

    @property
    def mode(self) -> str:
        return "yolo" if self.yolo else "auto" if self.auto else ""

    @property
    def text(self) -> str:
        return f"{self.agent} ({self.mode})> " if self.mode else f"{self.agent}> "


# A change applied without a question shows at most this many changed lines.
COMPACT_LINES = 12


def compact_diff(change: Change, limit: int = COMPACT_LINES) -> tuple[str, list[str]]:
    """A one-line title and the changed lines (``+``/``-``, no context) of ``change``,
    folded past ``limit`` lines with a count of the rest."""
    diff = unified_diff(change.before, change.after, change.path, change.path)
    changed = [line for line in diff.splitlines()
               if line.startswith(("+", "-")) and not line.startswith(("+++ ", "--- "))]
    added = sum(1 for line in changed if line.startswith("+"))
    removed = len(changed) - added
    verb = "created" if change.before is None else "deleted" if change.after is None else "changed"
    title = f"{verb} {change.path} (version {change.version}, +{added} -{removed}), applied without asking"
    if len(changed) > limit:
        rest = len(changed) - limit
        changed = changed[:limit] + [f"… {rest} more changed line{'s' if rest != 1 else ''} "
                                     f"(/diff {change.path} shows them all)"]
    return title, changed


class InputClosed(KeyboardInterrupt):
    """End of input while an approval was pending: reject, end the turn, end the session.

    A ``KeyboardInterrupt`` on purpose: the loop closes an interrupted turn cleanly
    (dangling tool calls answered), which no other exception gets.
    """


class UI(ABC):
    """The REPL's view of a person: read a turn, show what happens, ask for approval."""

    def __init__(self) -> None:
        self.closed = False  # input has ended; the session must stop after this turn
        self.subagent: str | None = None  # the subagent at work, if any
        # The path of the change the person just approved after seeing its diff: its
        # revision is not shown again (``on_change``).
        self._asked: str | None = None
        # Memory paths for completion (``@path``, ``/memory PATH``); set by the session.
        self.memory_paths: Callable[[], list[str]] | None = None
        # Work to start once the first prompt is up (loading the model client while
        # the person types); run once, by ``prompting``.
        self.on_first_prompt: Callable[[], None] | None = None
        # More such work (starting MCP servers), each run once by ``prompting``.
        self.when_prompt_up: list[Callable[[], None]] = []

    def prompting(self) -> None:
        """Called when a prompt waits for the person (at a terminal: once it is drawn)."""
        task, self.on_first_prompt = self.on_first_prompt, None
        tasks, self.when_prompt_up = self.when_prompt_up, []
        for each in [task, *tasks]:
            if each is not None:
                each()

    # A person at a terminal: the prompt comes at once and MCP servers start behind it.
    # Scripts and pipes wait for the servers, so the same input sees the same tools.
    interactive = False

    def above_prompt(self, show: Callable[[], None]) -> bool:
        """Run ``show`` (which prints) above the prompt that is waiting for the person,
        from any thread; False when there is no such prompt (the caller shows it later)."""
        return False

    # The hint under the header; the terminal UI adds its keys.
    input_hint = "Type a message (@path attaches a memory file); /help for commands; Ctrl-D quits."

    def approver(self, request: ApprovalRequest) -> Decision:
        """The gate's approver: ``confirm``, remembering what the person saw and approved."""
        decision = self.confirm(request)
        self._asked = request.path if decision.kind != "reject" else None
        return decision

    def on_change(self, change: Change) -> None:
        """A revision a file tool committed: shown compactly unless the person approved it
        after seeing its diff, so nothing is applied out of sight (yolo, ``a``)."""
        if self._asked == change.path:
            self._asked = None
            return
        title, lines = compact_diff(change)
        self.show_applied(title, lines)

    def show_applied(self, title: str, lines: list[str]) -> None:
        """A change applied without a question: a title and its changed lines."""
        self.show_text("\n".join([title, *lines]))

    def show_diff(self, path: str, diff: str) -> None:
        """A unified diff of ``path`` (``/diff``)."""
        self.show_text(diff)

    @contextmanager
    def external(self) -> Iterator[None]:
        """Hand the terminal to another program (``$EDITOR``) for the duration."""
        yield

    @abstractmethod
    def read_text(self, question: str) -> str | None:
        """One answer to ``question`` (e.g. re-open or discard); None at end of input."""

    def track_call(self, name: str, args: dict[str, object]) -> str:
        """Note a tool call; the indent to show it with (a subagent's calls are nested)."""
        indent = "  " if self.subagent is not None else ""
        if name == "task" and self.subagent is None:
            self.subagent = str(args.get("subagent", "")) or "?"
        return indent

    def track_result(self, name: str) -> str:
        """Note a tool result; the indent to show it with."""
        if name == "task" and self.subagent is not None:
            self.subagent = None
            return ""
        return "  " if self.subagent is not None else ""

    def approval_title(self, request: ApprovalRequest) -> str:
        return request.title + (f" (asked by subagent {self.subagent})" if self.subagent else "")

    def hooks(self) -> Hooks:
        return Hooks(on_text=self.on_text, on_model_start=self.on_model_start,
                     on_model_end=self.on_model_end, on_tool_call=self.on_tool_call,
                     on_tool_result=self.on_tool_result, on_retry=self.on_retry,
                     on_change=self.on_change)

    # -- input ------------------------------------------------------------------

    @abstractmethod
    def read_input(self, prompt: PromptInfo) -> str | None:
        """One user line; None at end of input. Ctrl-C raises ``KeyboardInterrupt``."""

    @abstractmethod
    def confirm(self, request: ApprovalRequest) -> Decision:
        """Show the change and ask; the gate's approver."""

    # -- output -----------------------------------------------------------------

    @abstractmethod
    def header(self, lines: list[str]) -> None: ...

    @abstractmethod
    def info(self, text: str) -> None: ...

    @abstractmethod
    def note(self, text: str) -> None:
        """Secondary information (token usage, state changes): dim on a terminal."""

    @abstractmethod
    def error(self, text: str) -> None: ...

    @abstractmethod
    def show_text(self, text: str) -> None:
        """Preformatted text (a tree, a log, a table) as is."""

    @abstractmethod
    def show_file(self, path: str, content: str) -> None: ...

    # -- hooks --------------------------------------------------------------------

    @abstractmethod
    def on_text(self, chunk: str) -> None: ...

    @abstractmethod
    def on_model_start(self) -> None: ...

    @abstractmethod
    def on_model_end(self) -> None: ...

    @abstractmethod
    def on_tool_call(self, name: str, args: dict[str, object]) -> None: ...

    @abstractmethod
    def on_tool_result(self, name: str, result: ToolResult) -> None: ...

    @abstractmethod
    def on_retry(self, note: str) -> None: ...


# A subagent's answer (the ``task`` result) shows at most this many lines.
ANSWER_LINES = 40


def subagent_answer(who: str | None, content: str, limit: int = ANSWER_LINES) -> tuple[str, list[str]]:
    """A subagent's answer as the screen shows it, once, under its ``task`` call: a
    label saying whose it is, and its lines (its words are not streamed as the main
    agent's), folded past ``limit`` lines."""
    lines = content.rstrip("\n").splitlines() or ["(no answer)"]
    if len(lines) > limit:
        rest = len(lines) - limit
        lines = lines[:limit] + [f"… {rest} more line{'s' if rest != 1 else ''}"]
    return f"subagent {who or '?'} answered:", lines


def result_summary(name: str, result: ToolResult, width: int = 100) -> str:
    """One short line about a tool result (errors are shown whole by the caller)."""
    lines = result.content.splitlines() or [""]
    if name.startswith("mcp__") and not result.is_error:
        summary = " ".join(result.content.split())  # often JSON over several lines: one line of it
    elif name == "read_file" and not result.is_error:
        shown = [ln for ln in lines if not ln.startswith("(")]
        summary = f"read {len(shown)} line{'s' if len(shown) != 1 else ''}"
    elif len(lines) == 1:
        summary = lines[0]
    else:
        summary = f"{lines[0]} … (+{len(lines) - 1} lines)"
    return summary if len(summary) <= width else summary[: width - 1] + "…"
