"""Grep over file contents: the exact matcher every search path agrees with.

Invariant: whatever narrows the candidate files first (a glob, a database index,
the RE2 or Postgres regex of ``regexfilter``), the final answer comes from
``scan`` on the real contents, so fast paths can only drop files that could not
match, never change what a match is. ``scan_plain`` defines the answer: lines are
split on ``\\n`` only (a final ``\\n`` ends the last line, it does not start an
empty one) and a match is a regex search within one line. ``scan`` returns
exactly the same, skipping work only where ``regexinfo`` proves it cannot change
the answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

from . import regexinfo
from .errors import InvalidPattern
from .types import GrepMode, GrepResult

DEFAULT_LIMIT = 200
# Hits located in the whole text before the rest of a file is split into lines.
SPARSE_HITS = 8
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


def scan_plain(
    rows: Iterable[tuple[str, str]],
    regex: re.Pattern[str],
    mode: GrepMode,
    limit: int = DEFAULT_LIMIT,
) -> GrepResult:
    """The reference matcher: one ``regex.search`` per line, nothing skipped.

    This *defines* grep's answer; ``scan`` and the database pre-filters must agree
    with it (tests/test_fastpaths.py checks that they do). Rows sorted by path.
    """
    result = GrepResult(mode=mode, limit=limit)
    for path, content in rows:
        lines = content.split("\n")
        if content.endswith("\n"):
            lines.pop()
        hits = [(no, line) for no, line in enumerate(lines, 1) if regex.search(line)]
        if not _take(result, path, hits, mode, limit):
            break
    return result


def _take(result: GrepResult, path: str, hits: Iterable[tuple[int, str]], mode: GrepMode,
          limit: int) -> bool:
    """Record one file's matching lines; False once the result is full (then truncated)."""
    if mode == "content":
        for no, line in hits:
            if len(result.lines) >= limit:
                result.truncated = True
                return False
            result.lines.append((path, no, line))
        return True
    if mode == "count":
        n = sum(1 for _ in hits)
        if not n:
            return True
        if len(result.counts) >= limit:
            result.truncated = True
            return False
        result.counts.append((path, n))
        return True
    if next(iter(hits), None) is None:
        return True
    if len(result.files) >= limit:
        result.truncated = True
        return False
    result.files.append(path)
    return True


def _hits_by_line(content: str, regex: re.Pattern[str]) -> Iterator[tuple[int, str]]:
    lines = content.split("\n")
    if content.endswith("\n"):
        lines.pop()
    search = regex.search
    for no, line in enumerate(lines, 1):
        if search(line):
            yield no, line


def _hits_whole_text(content: str, regex: re.Pattern[str]) -> Iterator[tuple[int, str]]:
    r"""Matching lines found by searching the whole text (``line_local`` patterns only).

    A match cannot cross a newline, so each match lies in one line and is that
    line's match; after one hit the search resumes at the next line. The empty
    position after a final ``\n`` is not a line (``scan_plain`` drops it), so an
    empty match there is ignored. Locating a hit costs a few calls more than
    searching one line, so a file that turns out to be dense with hits is
    finished line by line.
    """
    n = len(content)
    phantom = n if content.endswith("\n") else -1
    search = regex.search
    pos, lineno, counted_to = 0, 1, 0
    for _ in range(SPARSE_HITS):
        m = search(content, pos)
        if m is None:
            return
        s = m.start()
        if s == phantom:
            return
        start = content.rfind("\n", 0, s) + 1
        end = content.find("\n", s)
        if end == -1:
            end = n
        lineno += content.count("\n", counted_to, start)
        counted_to = start
        yield lineno, content[start:end]
        if end >= n:
            return
        pos = end + 1
    # pos is the start of line lineno + 1, and not the position after a final \n.
    rest = content[pos:].split("\n")
    if content.endswith("\n"):
        rest.pop()
    for no, line in enumerate(rest, lineno + 1):
        if search(line):
            yield no, line


def _has_hit_whole_text(content: str, regex: re.Pattern[str]) -> bool:
    m = regex.search(content)
    return m is not None and not (m.start() == len(content) and content.endswith("\n"))


def scan(
    rows: Iterable[tuple[str, str]],
    regex: re.Pattern[str],
    mode: GrepMode,
    limit: int = DEFAULT_LIMIT,
    keep: Callable[[str], bool] | None = None,
) -> GrepResult:
    """Same answer as ``scan_plain``, with less work where the pattern allows it.

    ``keep``, if given, is a necessary condition for a file to have a matching line
    (``regexfilter.LineFilter.keep``): a file it rejects is skipped unread.
    ``line_local`` patterns are searched in the whole text (no split into lines);
    other ``whole_text_ok`` patterns skip files with no match in the whole text;
    the rest go line by line (see ``regexinfo`` for why each shortcut is exact).
    """
    facts = regexinfo.info(regex)
    result = GrepResult(mode=mode, limit=limit)
    for path, content in rows:
        if keep is not None and not keep(content):
            continue
        hits: Iterable[tuple[int, str]]
        if facts.line_local:
            if mode == "files_with_matches":
                hits = ((0, ""),) if _has_hit_whole_text(content, regex) else ()
            else:
                hits = _hits_whole_text(content, regex)
        elif facts.whole_text_ok and regex.search(content) is None:
            continue
        else:
            hits = _hits_by_line(content, regex)
        if not _take(result, path, hits, mode, limit):
            break
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
