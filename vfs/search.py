"""Grep over file contents: the exact matcher every search path agrees with.

Invariant: whatever narrows the candidate files first (a glob, a database index),
the final answer comes from ``scan`` on the real contents, so fast paths can only
drop files that could not match, never change what a match is. Lines are split
like ``str.splitlines`` on ``\\n`` only; a match is a regex search within one line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memagent.vfs.errors import InvalidPattern
from memagent.vfs.types import GrepMode, GrepResult

DEFAULT_LIMIT = 200
MODES = ("files_with_matches", "content", "count")


def compile_pattern(pattern: str, *, case_insensitive: bool, fixed_strings: bool) -> re.Pattern[str]:
    if pattern == "":
        raise InvalidPattern("the grep pattern is empty; give a word or a regular expression")
    flags = re.MULTILINE | (re.IGNORECASE if case_insensitive else 0)
    try:
        return re.compile(re.escape(pattern) if fixed_strings else pattern, flags)
    except re.error as exc:
        raise InvalidPattern(
            f"grep pattern {pattern!r} is not a valid Python regular expression ({exc}); "
            "fix it or pass fixed_strings=true to search for the literal text"
        ) from None


def check_mode(mode: str) -> GrepMode:
    if mode not in MODES:
        raise InvalidPattern(
            f"output_mode {mode!r} is unknown; use one of {', '.join(MODES)}"
        )
    return mode  # type: ignore[return-value]


_LINE_SENSITIVE = re.compile(r"\\[AZ]|\(\?<?[=!]")


def whole_text_prefilter_ok(pattern: str) -> bool:
    """True when "no match in the whole text" implies "no match in any line".

    With MULTILINE, ``^``/``$`` agree between the two; ``\\A``, ``\\Z`` and lookarounds
    can see past a line's end, so patterns using them are checked line by line only.
    """
    return _LINE_SENSITIVE.search(pattern) is None


def scan(
    rows: Iterable[tuple[str, str]],
    regex: re.Pattern[str],
    mode: GrepMode,
    limit: int = DEFAULT_LIMIT,
) -> GrepResult:
    """Match ``regex`` against each (path, content), rows sorted by path."""
    result = GrepResult(mode=mode, limit=limit)
    whole_text_ok = whole_text_prefilter_ok(regex.pattern)
    for path, content in rows:
        # One whole-text search first: most files do not match and skip the split.
        if whole_text_ok and regex.search(content) is None:
            continue
        lines = content.split("\n")
        if content.endswith("\n"):
            lines.pop()
        if mode == "files_with_matches":
            if not any(regex.search(line) for line in lines):
                continue
            if len(result.files) >= limit:
                result.truncated = True
                break
            result.files.append(path)
            continue
        if mode == "count":
            n = sum(1 for line in lines if regex.search(line))
            if n:
                if len(result.counts) >= limit:
                    result.truncated = True
                    break
                result.counts.append((path, n))
            continue
        for no, line in enumerate(lines, 1):
            if regex.search(line):
                if len(result.lines) >= limit:
                    result.truncated = True
                    return result
                result.lines.append((path, no, line))
    return result


def render(result: GrepResult) -> str:
    """The text the tools and the CLI print: one result a line, a note when cut."""
    if result.mode == "files_with_matches":
        out = list(result.files)
    elif result.mode == "count":
        out = [f"{p}:{n}" for p, n in result.counts]
    else:
        out = [f"{p}:{n}:{t}" for p, n, t in result.lines]
    if not out:
        return "No matches found."
    if result.truncated:
        out.append(
            f"(results cut at {result.limit}; narrow the pattern, the path or the glob to see the rest)"
        )
    return "\n".join(out)
