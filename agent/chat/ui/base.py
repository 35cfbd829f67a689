"""The chat front end's input/output layer: one interface, two implementations.

``TerminalUI`` (``terminal``: prompt_toolkit input, rich output) serves a person at
a terminal; ``PlainUI`` (``plain``) serves scripts and pipes: no colour codes, no
spinner, user turns and approval answers read line by line.

Invariants:
- Everything a person sees or types in ``memagent chat`` goes through a ``UI``; the
  agent core reaches it only through ``Hooks`` and the gate's approver (``confirm``).
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
from dataclasses import dataclass

from memagent.agent.gate import Decision
from memagent.agent.loop import Hooks
from memagent.agent.tools import ApprovalRequest, ToolResult

APPROVAL_QUESTION = "Approve? [y]es / [n]o / n: feedback / [a]lways"
APPROVAL_HELP = "Please answer y, n, n: <feedback>, or a."


@dataclass(frozen=True)
class PromptInfo:
    """What the input prompt shows: the agent, and whether approvals are off."""

    agent: str
    yolo: bool

    @property
    def text(self) -> str:
        return f"{self.agent} (yolo)> " if self.yolo else f"{self.agent}> "


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
                     on_tool_result=self.on_tool_result, on_retry=self.on_retry)

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


def result_summary(name: str, result: ToolResult, width: int = 100) -> str:
    """One short line about a tool result (errors are shown whole by the caller)."""
    lines = result.content.splitlines() or [""]
    if name == "read_file" and not result.is_error:
        shown = [ln for ln in lines if not ln.startswith("(")]
        summary = f"read {len(shown)} line{'s' if len(shown) != 1 else ''}"
    elif len(lines) == 1:
        summary = lines[0]
    else:
        summary = f"{lines[0]} … (+{len(lines) - 1} lines)"
    return summary if len(summary) <= width else summary[: width - 1] + "…"
