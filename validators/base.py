"""Shared types of the validators: the Problem record, size Limits, small helpers.

Invariants:
- A Problem is immutable and self-contained: ``location`` says where (a line, a
  frontmatter key, a JSON pointer, or "file"), ``message`` says what is wrong
  *and* how to fix it, in plain sentences a model can act on.
- A message never quotes content that could be a credential; validators that
  handle secrets build their messages from fixed text only.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a write, and how to fix it."""

    location: str
    message: str
    kind: str
    # How the path is to be shown when it must not be repeated (it holds a secret); not compared.
    shown_path: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"


@dataclass(frozen=True)
class Limits:
    """Byte caps, measured on the UTF-8 encoding of the content."""

    agents_md_bytes: int = 32 * 1024
    file_bytes: int = 1024 * 1024


def plural(n: int, word: str) -> str:
    """'1 problem', '2 problems' (regular English plurals only)."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def format_problems(path: str, problems: list[Problem]) -> str:
    """A one-line summary, then one '- location: message' line per problem."""
    if not problems:
        return f"{path} is valid."
    # A path refused for holding a credential is shown as its problem says (segment withheld).
    path = next((p.shown_path for p in problems if p.shown_path is not None), path)
    lines = [f"{path} was not saved: {plural(len(problems), 'problem')}."]
    lines.extend(f"- {p}" for p in problems)
    return "\n".join(lines)


def human_bytes(n: int) -> str:
    """Render a cap such as 32768 as '32 KiB' for messages."""
    if n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


class LineIndex:
    """Maps character offsets of a text to 1-based line numbers in O(log n)."""

    def __init__(self, text: str) -> None:
        self._starts = [0]
        pos = text.find("\n")
        while pos != -1:
            self._starts.append(pos + 1)
            pos = text.find("\n", pos + 1)

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset)
