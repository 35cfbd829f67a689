"""The terminal UI: prompt_toolkit for input, rich for output.

Invariants:
- At most one live element (the "thinking" spinner) is on screen at a time, and it is
  stopped before anything else writes to the terminal or asks a question, so output
  never interleaves with a redraw.
- Model text is shown as it streams, rendered as Markdown: finished blocks are printed
  once for good and only the block being written is redrawn (``MarkdownStream``), so
  redraws stay small and never reach above the top of the screen. The rest (tool
  lines, diff panels, notes) is printed between model calls.
- Between prompts the terminal neither echoes keys nor edits lines: text typed ahead
  during a turn (Ctrl-D included) stays buffered, byte for byte, for the next prompt
  instead of being printed into the live region, which would break its redraws.
  Ctrl-C still interrupts. The original terminal mode is restored at exit.
- Text from the model, memory, tools or names is passed through
  ``terminal_text.shown`` before rich sees it (ESC, C1 and bidi controls made
  visible), and only ever as ``Text``, Markdown or an escaped title, never as
  console markup, so neither escape sequences nor ``[bold]`` in content act.
- Input history lives in a file in the data directory; if that file cannot be used
  the session still runs, with in-memory history.
"""

from __future__ import annotations

import atexit
import contextlib
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape as xml_escape

from prompt_toolkit import PromptSession
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import HTML
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.live import Live
from rich.markup import escape
from rich.measure import Measurement
from rich.panel import Panel
from rich.segment import Segment
from rich.status import Status
from rich.text import Text

from memagent.agent.chat.ui.base import (
    APPROVAL_HELP,
    UI,
    InputClosed,
    PromptInfo,
    result_summary,
    subagent_answer,
)
from memagent.agent.gate import Decision
from memagent.agent.tools import ApprovalRequest, ToolResult, describe_call
from memagent.vfs import shown

# Slash commands whose argument is a memory path (completed with Tab).
PATH_COMMANDS = ("/memory", "/history", "/edit", "/diff", "/blame")
_PATH_ARG = re.compile(r"^(" + "|".join(re.escape(c) for c in PATH_COMMANDS) + r")\s+(\S*)$")


class SlashCompleter(Completer):
    """Completes a slash command while it is the only word typed, and a memory path
    after ``/memory``, ``/history``, ``/edit``, ``/diff`` and after ``@`` anywhere."""

    def __init__(self, commands: Mapping[str, str], paths: Callable[[], list[str]] | None = None) -> None:
        self.commands = dict(commands)
        self.paths = paths
        self._cache: tuple[float, list[str]] = (0.0, [])

    def _memory(self) -> list[str]:
        # Read at most every 2 s: completion runs on every key press.
        at, cached = self._cache
        if self.paths is None or time.monotonic() - at < 2.0:
            return cached
        try:
            found = sorted(self.paths())
        except Exception:  # a completion must never break the prompt
            found = cached
        self._cache = (time.monotonic(), found)
        return found

    def complete_path(self, typed: str) -> Iterator[tuple[str, str]]:
        """(completion, kind) for a typed path prefix: files, and folders one level down."""
        prefix = "/" + typed.lstrip("/")
        offered: set[str] = set()
        for path in self._memory():
            if not path.startswith(prefix):
                continue
            rest = path[len(prefix):]
            cut = rest.find("/")
            shown, kind = (prefix + rest[: cut + 1], "folder") if cut != -1 else (path, "file")
            if shown not in offered:
                offered.add(shown)
                yield shown, kind

    def get_completions(self, document: Document, complete_event: CompleteEvent
                        ) -> Iterator[Completion]:
        text = document.text_before_cursor
        arg = _PATH_ARG.match(text)
        if arg:
            typed = arg.group(2)
            for shown, kind in self.complete_path(typed):
                yield Completion(shown, start_position=-len(typed), display_meta=kind)
            return
        if text.startswith("/") and " " not in text:
            for name, help_text in self.commands.items():
                if name.startswith(text):
                    yield Completion(name, start_position=-len(text), display_meta=help_text)
            return
        word = document.get_word_before_cursor(WORD=True)
        if word.startswith("@") and (len(word) == len(text) or text[-len(word) - 1].isspace()):
            for shown, kind in self.complete_path(word[1:]):
                yield Completion("@" + shown, start_position=-len(word), display_meta=kind)


def _key_bindings() -> KeyBindings:
    """Enter sends; Alt-Enter (which terminals send as Esc then Enter) adds a line."""
    keys = KeyBindings()

    @keys.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    return keys


def _history(path: Path | None) -> History:
    if path is None:
        return InMemoryHistory()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(exist_ok=True)
    except OSError:
        return InMemoryHistory()
    return FileHistory(str(path))


def _diff_style(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "bold"
    if line.startswith("@@"):
        return "cyan"
    if line.startswith("+"):
        return "green"
    if line.startswith("-"):
        return "red"
    return ""


class DiffText:
    """A unified diff, coloured line by line (control characters in it made visible).

    A line wider than the space it gets wraps with its ``+``/``-``/`` `` marker repeated
    at the start of every continuation, so under NO_COLOR too a wrapped part of an added
    line never reads as context, nor context as an addition.
    """

    def __init__(self, diff: str, *, changes_only: bool = False, indent: int = 0) -> None:
        self.lines = shown(diff).splitlines()
        # Only changed lines (the compact diff after "always"): no headers, the rest is a note.
        self.changes_only = changes_only
        self.indent = indent

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max((cell_len(line) for line in self.lines), default=1) + self.indent
        return Measurement(min(widest, 8), widest).clamp(max_width=options.max_width)

    def _style(self, line: str) -> str:
        if not self.changes_only:
            return _diff_style(line)
        return "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(options.max_width - self.indent, 2)
        pad = Text(" " * self.indent)
        for line in self.lines:
            style = self._style(line)
            header = line.startswith(("+++", "---")) and not self.changes_only
            marked = line[:1] in ("+", "-", " ") and not header
            marker, body = (line[:1], line[1:]) if marked else ("", line)
            parts = Text(body).wrap(console, width - len(marker), overflow="fold") if body else [Text()]
            for n, part in enumerate(parts):
                # The space a line was broken at is not shown; the line's own trailing space is.
                text = part.plain if n == len(parts) - 1 else part.plain.rstrip(" ")
                # One style for marker and text: one coloured run, as a terminal shows a diff line.
                yield Text.assemble(pad, Text(marker + text, style=style))


def diff_text(diff: str) -> DiffText:
    return DiffText(diff)


# A one-word label (the recap's "you: ", /tools' "  allowed: ") or a list bullet, then the
# first gap of two or more spaces after some text: where a listing's second column starts.
_LABEL = re.compile(r"^\s*(?:\w{1,16}:|[-*•]) (?=\S)")
_COLUMN = re.compile(r"^\s*\S.*?\s{2,}(?=\S)")


def listing_hang(line: str, width: int) -> int:
    """Where the continuations of a wrapped listing line start: after its label, or under
    its second column (``/help``'s descriptions, ``/threads``' dates), when that starts in
    the left half of the screen; else under its own indentation."""
    for pattern in (_LABEL, _COLUMN):
        found = pattern.match(line)
        if found is not None and cell_len(found.group()) <= width // 2:
            return len(found.group())
    return len(line) - len(line.lstrip(" "))


class Hanging:
    """Lines of text wrapped to the width with a hanging indent: each continuation starts
    under the column ``hang`` gives for its line, never at the left edge, so a wrapped
    description or tool result stays in its column instead of reading as a new entry."""

    def __init__(self, text: str, hang: Callable[[str, int], int], style: str = "") -> None:
        self.lines = text.split("\n")
        self.hang = hang
        self.style = style

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max((cell_len(line) for line in self.lines), default=1)
        return Measurement(min(widest, 8), widest).clamp(max_width=options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(options.max_width, 2)
        for line in self.lines:
            if cell_len(line) <= width:
                yield Text(line, style=self.style)
                continue
            cut = min(self.hang(line, width), len(line))
            head, pad = line[:cut], cell_len(line[:cut])
            if pad > width // 2:  # no room for a column: wrap as the terminal would
                head, pad = "", 0
            parts = Text(line[len(head):]).wrap(console, width - pad, overflow="fold")
            for n, part in enumerate(parts):
                text = part.plain if n == len(parts) - 1 else part.plain.rstrip(" ")  # no space at a break
                yield Text((head if n == 0 else " " * pad) + text, style=self.style)


def stable_prefix(text: str) -> int:
    """Length of the leading part of streamed Markdown that later text cannot change:
    up to the last blank line outside a code fence (0 if there is none)."""
    pos = len(text)
    while True:
        pos = text.rfind("\n\n", 0, pos)
        if pos == -1:
            return 0
        fences = sum(1 for line in text[:pos].split("\n")
                     if line.lstrip().startswith(("```", "~~~")))
        if fences % 2 == 0:
            return pos + 2


class TrimmedMarkdown:
    """Markdown without the blank lines rich puts around some blocks (a list starts
    with one), so blocks printed one at a time are spaced like one document."""

    def __init__(self, text: str) -> None:
        from rich.markdown import Markdown  # markdown-it: imported at the first answer, not at start

        self.markdown = Markdown(text)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(self.markdown, options, pad=False)
        while lines and not "".join(seg.text for seg in lines[0]).strip():
            lines.pop(0)
        while lines and not "".join(seg.text for seg in lines[-1]).strip():
            lines.pop()
        for line in lines:
            yield from line
            yield Segment.line()


class MarkdownStream:
    """Shows streamed Markdown: complete blocks are printed for good, the block still
    being written is a live region redrawn at most ``fps`` times a second."""

    def __init__(self, console: Console, fps: float = 20) -> None:
        self.console = console
        self._pending = ""
        self._live: Live | None = None
        self._interval = 1 / fps
        self._last = 0.0

    def feed(self, chunk: str) -> None:
        self._pending += chunk
        cut = stable_prefix(self._pending)
        if self._live is None:
            self._live = Live(console=self.console, auto_refresh=False,
                              vertical_overflow="ellipsis")
            self._live.start()
        if cut:
            done, self._pending = self._pending[:cut], self._pending[cut:]
            self._live.update(TrimmedMarkdown(self._pending), refresh=False)
            # Printed above the live region, which then redraws below it.
            self.console.print(TrimmedMarkdown(done))
            self.console.print()
        now = time.monotonic()
        if now - self._last >= self._interval:
            self._live.update(TrimmedMarkdown(self._pending), refresh=True)
            self._last = now

    def finish(self) -> None:
        if self._live is not None:
            self._live.update(TrimmedMarkdown(self._pending), refresh=False)
            self._live.stop()  # draws the final state in full
            self._live = None
        self._pending = ""


# A control character that no key sends (POSIX _POSIX_VDISABLE; 0 on Linux and the BSDs).
_VDISABLE = b"\x00"


class _TypeAhead:
    """Keeps keys typed during a turn for the next prompt (POSIX terminals only)."""

    def __init__(self) -> None:
        self.fd: int | None = None
        self.saved: list[Any] | None = None
        try:
            import termios

            fd = sys.stdin.fileno()
            self.saved = termios.tcgetattr(fd)
            self.fd = fd
        except (ImportError, OSError, ValueError):
            return
        atexit.register(self.restore)

    def set(self, prompting: bool) -> None:
        """Cooked mode while prompt_toolkit reads (it sets raw mode itself and
        restores this), no echo and no line editing while a turn runs.

        The EOF key is off meanwhile (``restore`` puts it back): in cooked mode the
        terminal turns a Ctrl-D typed in the moment before prompt_toolkit takes raw
        mode into an end-of-file mark that raw mode then reads as a NUL byte, so
        Ctrl-D pressed as a turn ended was lost and the prompt stayed. As a plain
        byte it reaches the prompt, which quits on it."""
        if self.fd is None:
            return
        import termios

        try:
            attrs = termios.tcgetattr(self.fd)
            flags = termios.ECHO | termios.ICANON
            attrs[3] = attrs[3] | flags if prompting else attrs[3] & ~flags
            attrs[6][termios.VEOF] = _VDISABLE
            termios.tcsetattr(self.fd, termios.TCSANOW, attrs)
        except (OSError, termios.error):
            self.fd = None

    def restore(self) -> None:
        if self.fd is not None and self.saved is not None:
            import termios

            with contextlib.suppress(OSError, termios.error):
                termios.tcsetattr(self.fd, termios.TCSANOW, self.saved)


def _continuation(width: int, line_number: int, soft_wrap: int) -> str:  # prompt_toolkit: an int flag
    """What stands left of an input line after the first: dots for a line the person
    started (Alt-Enter), blanks where a long line merely wraps, so a wrapped message
    does not look like two lines."""
    return " " * width if soft_wrap else "." * max(width - 1, 0) + " "


class TerminalUI(UI):
    input_hint = ("Enter sends, Alt-Enter (or Esc Enter) adds a line; @path attaches a memory file; "
                  "/help for commands; Ctrl-C stops a turn; Ctrl-D quits.")

    def __init__(self, *, commands: Mapping[str, str], history_path: Path | None,
                 console: Console | None = None) -> None:
        super().__init__()
        self.console = console or Console(highlight=False)
        # Pasted text (bracketed paste) keeps its newlines and stays one message.
        self._session: PromptSession[str] = PromptSession(
            history=_history(history_path),
            completer=SlashCompleter(commands, paths=lambda: self.memory_paths() if self.memory_paths else []),
            complete_while_typing=True, key_bindings=_key_bindings(),
            prompt_continuation=_continuation)
        # Approval answers are not worth recalling with the up arrow.
        self._confirm_session: PromptSession[str] = PromptSession(history=InMemoryHistory())
        self._status: Status | None = None
        self._stream: MarkdownStream | None = None
        self._keys = _TypeAhead()

    interactive = True

    def above_prompt(self, show: Callable[[], None]) -> bool:
        app = self._session.app
        loop = app.loop
        if not app.is_running or loop is None:
            return False

        def run() -> None:
            # On the prompt's own loop: prompt_toolkit hides the prompt, ``show``
            # prints, and the prompt is drawn again below it with what was typed.
            run_in_terminal(show)

        try:
            loop.call_soon_threadsafe(run)
        except RuntimeError:  # the prompt ended and its loop closed meanwhile
            return False
        return True

    # -- screen state ---------------------------------------------------------------

    def _stop_status(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _end_line(self) -> None:
        """Stop whatever is live so the next output starts on a clean line."""
        self._stop_status()
        if self._stream is not None:
            self._stream.finish()
            self._stream = None

    def _print(self, *objects: object, **kwargs: object) -> None:
        self._end_line()
        self.console.print(*objects, **kwargs)  # type: ignore[arg-type]

    # -- input ------------------------------------------------------------------------

    def read_input(self, prompt: PromptInfo) -> str | None:
        self._end_line()
        self.console.print()  # air between turns
        mode = f" <ansiyellow>({prompt.mode})</ansiyellow>" if prompt.mode else ""
        message = HTML(f"<b>{xml_escape(prompt.agent)}</b>{mode}<b>&gt;</b> ")
        self._keys.set(prompting=True)
        try:
            return self._session.prompt(message, pre_run=self._when_drawn)
        except EOFError:
            return None
        finally:
            self._keys.set(prompting=False)

    def _when_drawn(self) -> None:
        """``prompting`` once the prompt is on the screen, not before: the work it starts
        (importing an SDK) would otherwise hold the interpreter while it is drawn."""
        app = self._session.app

        def drawn(_: object) -> None:
            app.after_render -= drawn
            self.prompting()

        app.after_render += drawn

    def confirm(self, request: ApprovalRequest) -> Decision:
        self._end_line()
        subtitle = "new file" if request.new_file and request.op != "tool" else None
        body: DiffText | Text | Group = (diff_text(request.diff) if request.op != "tool"
                              else Text(shown(request.diff.rstrip("\n"))))
        if request.reason:
            body = Group(Text(f"reason: {shown(request.reason)}", style="bold"), body)
        if request.note:
            body = Group(body, Text(shown(request.note), style="yellow"))
        self.console.print(Panel(body, title=escape(shown(self.approval_title(request), one_line=True)),
                                 title_align="left", subtitle=subtitle,
                                 border_style="yellow", expand=False))
        question = HTML("Approve? <b>[y]</b>es / <b>[n]</b>o / <b>n: feedback</b> / "
                        "<b>[a]</b>lways ")
        while True:
            try:
                answer = self._confirm_session.prompt(question)
            except EOFError:
                self.closed = True
                self.console.print("[red]✗ rejected[/] (end of input; the session ends)")
                raise InputClosed from None
            decision = Decision.parse(answer)
            if decision is None:
                self.console.print(f"[yellow]{APPROVAL_HELP}[/]")
                continue
            if decision.kind == "reject":
                fb = f": {escape(shown(decision.feedback))}" if decision.feedback else ""
                self.console.print(f"[red]✗ rejected[/]{fb}")
            elif decision.kind == "always":
                self.console.print("[green]✓ approved[/] (and every further edit this session)")
            else:
                self.console.print("[green]✓ approved[/]")
            return decision

    # -- output -----------------------------------------------------------------------

    def show_applied(self, title: str, lines: list[str]) -> None:
        indent = "  " if self.subagent is not None else ""
        self._print(Text(f"{indent}  ~ {shown(title)}", style="yellow"))
        if lines:  # wrapped lines keep their +/- marker, as in the approval panel
            self._print(DiffText("\n".join(lines), changes_only=True, indent=len(indent) + 4))

    def show_diff(self, path: str, diff: str) -> None:
        self._print(Panel(diff_text(diff), title=escape(shown(path, one_line=True)), title_align="left",
                          border_style="dim",
                          expand=False))

    @contextlib.contextmanager
    def external(self) -> Iterator[None]:
        # The editor needs the terminal as a person left it: echo and line editing on.
        self._end_line()
        self._keys.set(prompting=True)
        try:
            yield
        finally:
            self._keys.set(prompting=False)

    def read_text(self, question: str) -> str | None:
        self._end_line()
        try:
            return self._confirm_session.prompt(question.rstrip() + " ")
        except EOFError:
            return None

    def header(self, lines: list[str]) -> None:
        if not lines:
            return
        self._print(Text(shown(lines[0]), style="bold"))
        for line in lines[1:]:
            self._print(Text(shown(line), style="dim"))

    def info(self, text: str) -> None:
        self._print(Text(shown(text)))

    def note(self, text: str) -> None:
        self._print(Text(shown(text), style="dim"))

    def error(self, text: str) -> None:
        self._print(Text(f"memagent: {shown(text)}", style="red"))

    def show_text(self, text: str) -> None:
        self._print(Hanging(shown(text.rstrip("\n")), listing_hang))

    def show_file(self, path: str, content: str) -> None:
        lexer = "json" if path.endswith(".json") else "markdown"
        from rich.syntax import Syntax  # pygments: imported when a file is first shown

        self._print(Panel(Syntax(shown(content.rstrip("\n")) or " ", lexer, word_wrap=True,
                                 background_color="default"),
                          title=escape(shown(path, one_line=True)), title_align="left", border_style="dim"))

    # -- hooks --------------------------------------------------------------------------

    def on_text(self, chunk: str) -> None:
        self._stop_status()
        if self._stream is None:
            self._stream = MarkdownStream(self.console)
        self._stream.feed(shown(chunk))  # the model's text: no raw ESC or bidi control

    def on_model_start(self) -> None:
        self._end_line()
        self._status = self.console.status("[dim]thinking…[/]", spinner="dots")
        self._status.start()

    def on_model_end(self) -> None:
        self._end_line()

    def on_tool_call(self, name: str, args: dict[str, object]) -> None:
        indent = self.track_call(name, args)
        call = shown(describe_call(name, dict(args)), one_line=True)
        self._print(Text.assemble(indent, ("⏺ ", "green"), (call, "bold")))

    def on_tool_result(self, name: str, result: ToolResult) -> None:
        who = self.subagent
        indent = self.track_result(name)
        if name == "task" and not result.is_error:
            title, lines = subagent_answer(who, result.content)
            body = Text(f"{indent}  ⎿  {shown(title)}", style="dim")
            for line in lines:
                body.append(f"\n{indent}     {shown(line)}")
            self._print(body)
        elif result.is_error:
            hang = len(indent) + 5  # under the text after "  ⎿  "
            self._print(Hanging(indent + "  ⎿  " + shown(result.content).replace("\n", "\n     " + indent),
                                lambda line, width: hang, style="red"))
        else:
            # A summary wider than the terminal wraps under its text, not at the left edge
            # where it would read as the agent's words.
            hang = len(indent) + 5
            self._print(Hanging(indent + "  ⎿  " + shown(result_summary(name, result)),
                                lambda line, width: hang, style="dim"))

    def on_retry(self, note: str) -> None:
        # Printed above the spinner, which keeps turning while the SDK waits.
        self.console.print(Text(f"  ↻ {shown(note)}", style="yellow"))
