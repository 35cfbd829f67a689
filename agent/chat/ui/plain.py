"""The plain UI: for pipes and scripts (stdin is not a terminal).

Invariants:
- Output is plain text without colour or cursor codes, written and flushed as it
  happens, so a transcript reads in order. Errors and retry notes go to stderr,
  everything else to stdout.
- Input is read line by line from one stream, user turns and approval answers
  alike (``y``, ``n``, ``n: feedback``, ``a``); each line read is echoed after its
  prompt so the transcript shows who said what.
- Everything written passes through ``terminal_text.shown`` (control, C1 and bidi
  characters from the model, memory or names made visible, ``\x1b``): a transcript
  may well be read on a terminal.
- End of input at the prompt ends the session; during an approval it rejects the
  change and ends the session (``InputClosed``).
"""

from __future__ import annotations

from typing import TextIO

from memagent.agent.chat.ui.base import (
    APPROVAL_HELP,
    APPROVAL_QUESTION,
    UI,
    InputClosed,
    PromptInfo,
    result_summary,
    subagent_answer,
)
from memagent.agent.gate import Decision
from memagent.agent.tools import ApprovalRequest, ToolResult, describe_call
from memagent.vfs import shown


class PlainUI(UI):
    def __init__(self, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> None:
        super().__init__()
        self._in = stdin
        self._out = stdout
        self._err = stderr
        self._mid_line = False  # the last thing written to stdout did not end a line

    # -- writing ------------------------------------------------------------------

    def _write(self, text: str) -> None:
        if not text:
            return
        text = shown(text)
        self._out.write(text)
        self._out.flush()
        self._mid_line = not text.endswith("\n")

    def _line(self, text: str) -> None:
        """Write ``text`` on a line of its own."""
        self._end_line()
        self._write(text + "\n")

    def _end_line(self) -> None:
        if self._mid_line:
            self._write("\n")

    def _stderr(self, text: str) -> None:
        self._end_line()
        self._err.write(shown(text) + "\n")
        self._err.flush()

    def _readline(self, prompt: str) -> str | None:
        self._end_line()
        self._write(prompt)
        self.prompting()
        try:
            line = self._in.readline()
        except UnicodeDecodeError:
            # Treat undecodable input like an unclear answer rather than crash the session.
            line = "\ufffd\n"
        if line == "":
            self._write("\n")
            return None
        line = line.rstrip("\r\n")
        self._write(line + "\n")
        return line

    # -- UI ---------------------------------------------------------------------------

    def read_input(self, prompt: PromptInfo) -> str | None:
        return self._readline(prompt.text)

    def confirm(self, request: ApprovalRequest) -> Decision:
        self._line(f"--- {self.approval_title(request)} ---")
        if request.reason:
            self._line(f"reason: {request.reason}")
        self._write(request.diff if request.diff.endswith("\n") else request.diff + "\n")
        if request.note:
            for line in request.note.splitlines():
                self._line(f"note: {line}")
        self._line("---")
        while True:
            answer = self._readline(APPROVAL_QUESTION + " ")
            if answer is None:
                self.closed = True
                self._line("(end of input: the change is not applied and the session ends)")
                raise InputClosed
            decision = Decision.parse(answer)
            if decision is not None:
                return decision
            self._line(APPROVAL_HELP)

    def show_applied(self, title: str, lines: list[str]) -> None:
        indent = "  " if self.subagent is not None else ""
        self._line(f"{indent}  ~ {title}")
        for line in lines:
            self._line(f"{indent}    {line}")

    def read_text(self, question: str) -> str | None:
        return self._readline(question.rstrip() + " ")

    def header(self, lines: list[str]) -> None:
        for line in lines:
            self._line(line)

    def info(self, text: str) -> None:
        self._line(text)

    def note(self, text: str) -> None:
        self._line(f"[{text}]")

    def error(self, text: str) -> None:
        self._stderr(f"memagent: {text}")

    def show_text(self, text: str) -> None:
        self._line(text.rstrip("\n"))

    def show_file(self, path: str, content: str) -> None:
        self._line(f"--- {path} ---")
        self._write(content if content.endswith("\n") or not content else content + "\n")
        self._line("---")

    # -- hooks ------------------------------------------------------------------------

    def on_text(self, chunk: str) -> None:
        self._write(chunk)

    def on_model_start(self) -> None:
        return None

    def on_model_end(self) -> None:
        self._end_line()

    def on_tool_call(self, name: str, args: dict[str, object]) -> None:
        indent = self.track_call(name, args)
        self._line(f"{indent}* {describe_call(name, dict(args))}")

    def on_tool_result(self, name: str, result: ToolResult) -> None:
        who = self.subagent
        indent = self.track_result(name)
        if name == "task" and not result.is_error:
            title, lines = subagent_answer(who, result.content)
            self._line(f"{indent}  -> {title}")
            for line in lines:
                self._line(f"{indent}     {line}")
        elif result.is_error:
            lines = result.content.splitlines() or [""]
            self._line(f"{indent}  -> error: {lines[0]}")
            for extra in lines[1:]:
                self._line(f"{indent}     {extra}")
        else:
            self._line(f"{indent}  -> {result_summary(name, result)}")

    def on_retry(self, note: str) -> None:
        self._stderr(f"memagent: {note}")
