"""Generic text rules that every memory file obeys.

Invariants:
- Content must encode to UTF-8 (a ``str`` can still hold lone surrogates, e.g.
  from ``surrogateescape`` decoding, and those cannot be stored as text).
- No NUL characters: memory files are text read by a model and by grep.
- The size cap is measured in UTF-8 bytes, never in characters.
"""

from __future__ import annotations

from .base import LineIndex, Problem, human_bytes

KIND = "text"


def utf8_size(content: str) -> int:
    """Bytes the content takes as UTF-8; lone surrogates count as 3 bytes each."""
    return len(content.encode("utf-8", "surrogatepass"))


def check_encoding(content: str, kind: str = KIND) -> list[Problem]:
    """Refuse lone surrogates and NUL characters, naming the first line of each."""
    problems: list[Problem] = []
    index = LineIndex(content)
    try:
        content.encode("utf-8")
    except UnicodeEncodeError as exc:
        problems.append(
            Problem(
                f"line {index.line_of(exc.start)}",
                "contains characters that are not valid UTF-8 (an unpaired surrogate). "
                "Memory files must be UTF-8 text: remove or replace those characters.",
                kind,
            )
        )
    nul = content.find("\x00")
    if nul != -1:
        count = content.count("\x00")
        problems.append(
            Problem(
                f"line {index.line_of(nul)}",
                f"contains {count} NUL character{'s' if count != 1 else ''} (\\x00). "
                "Memory files must be plain text: remove the NUL characters; "
                "binary data cannot be stored in memory.",
                kind,
            )
        )
    return problems


def check_size(content: str, cap: int, kind: str = KIND, advice: str | None = None) -> list[Problem]:
    """Refuse content over ``cap`` UTF-8 bytes, with advice on what to do instead."""
    size = utf8_size(content)
    if size <= cap:
        return []
    advice = advice or ("Split it into several smaller files, or keep only what is worth remembering.")
    return [
        Problem(
            "file",
            f"is {size} bytes, over the limit of {cap} bytes ({human_bytes(cap)}). {advice}",
            kind,
        )
    ]


def validate_text(content: str, cap: int) -> list[Problem]:
    """All generic rules for a file with no more specific format."""
    return check_encoding(content) + check_size(content, cap)
