"""Driving a program in a pseudo-terminal: its raw output, and waits on its visible text.

Waits use ``Screen.text`` (the terminal's own sequences stripped); checks that nothing
hostile reached the terminal use ``Screen.raw``, where a stripped sequence would still
show. Waits are on text appearing or the process ending, bounded by a generous limit
that only a hung process reaches.
"""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path
from typing import Any

import pexpect
import pytest

# The terminal's own sequences (rich, prompt_toolkit): CSI, OSC, charset selection, CR, BS.
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()=>][0-9A-Za-z]?|[\r\x08]")


# What a developer's shell may set that would change what memagent draws or which
# model server it reaches.
TERMINAL_VARIABLES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_PROFILE",
                      "ANTHROPIC_CONFIG_DIR", "NO_COLOR", "MEMAGENT_STREAM", "MEMAGENT_MCP_CALL_TIMEOUT",
                      "EDITOR", "VISUAL")


def terminal_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The environment of a pty test: a 256-colour terminal, a throwaway home, none of the above."""
    for var in TERMINAL_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "userhome"))
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("PROMPT_TOOLKIT_NO_CPR", "1")  # pexpect does not answer cursor-position queries


class Screen:
    """A terminal session: raw output so far, and waits on its visible text."""

    def __init__(self, child: Any) -> None:
        self.child = child
        self.raw = ""

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw)

    def _pump(self, timeout: float) -> None:
        with contextlib.suppress(pexpect.TIMEOUT):
            self.raw += self.child.read_nonblocking(65536, timeout=timeout)

    def _tail(self) -> str:
        return f"it shows:\n{self.text[-2000:]}\nraw tail: {self.raw[-600:]!r}"

    def wait_for(self, needle: str, *, after: int = 0, timeout: float = 30) -> int:
        """Wait until ``needle`` shows (past text offset ``after``); its end offset."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.text.find(needle, after)
            if found != -1:
                return found + len(needle)
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} not on screen; {self._tail()}")
            try:
                self._pump(0.05)
            except pexpect.EOF:
                if needle not in self.text[after:]:
                    raise AssertionError(f"process ended without showing {needle!r}; {self._tail()}") from None

    def type(self, line: str) -> None:
        self.child.send(line + "\r")

    def finish(self, timeout: float = 30) -> int:
        """Wait for the process to end; its exit status."""
        deadline = time.monotonic() + timeout
        while self.child.isalive() and time.monotonic() < deadline:
            try:
                self._pump(0.1)
            except pexpect.EOF:
                break
        if self.child.isalive():
            self.child.terminate(force=True)
            raise AssertionError(f"still running after {timeout}s; {self._tail()}")
        self.child.wait()
        return int(self.child.exitstatus)
