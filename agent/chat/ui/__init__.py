"""The chat front end's input/output layer: ``base.UI`` and its two implementations.

``make_ui`` picks one by the terminal; ``terminal`` (the only importer of rich and
prompt_toolkit) is imported only when a terminal UI is built. The implementations
import ``base``, never this package's ``__init__``, so there is no import cycle.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from memagent.agent.chat.ui.base import UI, PromptInfo

__all__ = ["UI", "PromptInfo", "make_ui"]


def make_ui(*, commands: Mapping[str, str], history_path: Path | None,
            stdin: TextIO | None = None, stdout: TextIO | None = None) -> UI:
    """The terminal UI when both ends are a terminal, the plain one otherwise."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    if stdin.isatty() and stdout.isatty():
        from memagent.agent.chat.ui.terminal import TerminalUI

        return TerminalUI(commands=commands, history_path=history_path)
    from memagent.agent.chat.ui.plain import PlainUI

    return PlainUI(stdin, stdout, sys.stderr)
