"""Grep over file contents: the exact matcher every search path agrees with.

Invariant: whatever narrows the candidate files first (a glob, a database index,
the RE2 or Postgres regex of ``prefilter``), the final answer comes from
``scan`` on the real contents, so fast paths can only drop files that could not
match, never change what a match is. ``scan_plain`` defines the answer: lines are
split on ``\\n`` only (a final ``\\n`` ends the last line, it does not start an
empty one) and a match is a Python ``re`` search within one line. ``scan``
returns exactly the same, and never runs unbounded:

- Patterns Python's backtracking ``re`` provably runs in linear time
  (``regex_info.backtracking_is_linear``: no unbounded repeat, a few paths: literals,
  ``[0-9]{3}-[0-9]{4}``, ``\\bword\\b``) are matched by ``re`` itself, the fastest
  engine for them, over the whole text where ``regex_info`` proves that exact.
- Other patterns RE2 can express exactly (``prefilter.linear``: all but
  backreferences, lookarounds, conditionals, atomic groups, possessive repeats,
  ``\\B`` and counts over 1,000; ``\\b`` on ASCII text only) are matched by RE2,
  in time linear in the text, over the whole text at once.
- The rest runs on Python's own ``re`` in a worker process (``_Worker``), the
  only way to stop a backtracking search, which holds the interpreter until it
  ends. Each ``scan`` has a deadline (``GREP_DEADLINE`` from its start); when it
  passes, the worker is killed and the result says where it stopped and why in
  ``GrepResult.cut``. Before that point the answer is exactly ``scan_plain``'s.
"""

from __future__ import annotations

import atexit
import os
import re
import select
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import paths
from ..errors import InvalidPattern
from ..types import GrepMode, GrepResult
from . import regex_sets
from .globbing import compile_glob, glob_matcher

if TYPE_CHECKING:
    from . import prefilter, regex_info

DEFAULT_LIMIT = 200
# Hits located in the whole text before the rest of a file is split into lines.
SPARSE_HITS = 8
MODES = ("files_with_matches", "content", "count")
# Seconds one grep may take in all, database pre-filters included; a search still
# running then stops and says so. Generous for the linear-time paths (a scope of
# 10,000 memory files takes well under a second), a bound for the backtracking
# matcher that patterns RE2 cannot run fall back to.
GREP_DEADLINE = 5.0
# Why RE2 cannot decide a text, when only the text is to blame.
UNICODE_BOUNDARY = "\\b (a word boundary) in non-ASCII text"


def compile_pattern(pattern: str, *, case_insensitive: bool, fixed_strings: bool) -> re.Pattern[str]:
    if pattern == "":
        raise InvalidPattern("the grep pattern is empty; give a word or a regular expression")
    flags = re.MULTILINE | (re.IGNORECASE if case_insensitive else 0)
    if not fixed_strings and (posix := regex_sets.posix_class(pattern)) is not None:
        raise InvalidPattern(
            f"grep pattern {pattern!r} uses the POSIX class [:{posix}:], which Python regular expressions "
            f"do not have; write {regex_sets.POSIX_CLASSES[posix]} instead")
    try:
        # Spelled so re does not print a FutureWarning for "[[" and the like (same meaning).
        return re.compile(re.escape(pattern) if fixed_strings else regex_sets.unambiguous(pattern, flags), flags)
    except re.error as exc:
        raise InvalidPattern(
            f"grep pattern {pattern!r} is not a valid Python regular expression ({exc}); "
            "fix it or pass fixed_strings=true to search for the literal text"
        ) from None
    except RecursionError:
        raise InvalidPattern(
            f"grep pattern {pattern[:40]!r}... nests too deeply; simplify it") from None


def check_mode(mode: str) -> GrepMode:
    if mode not in MODES:
        raise InvalidPattern(
            f"output_mode {mode!r} is unknown; use one of {', '.join(MODES)}"
        )
    return mode  # type: ignore[return-value]


@dataclass(frozen=True)
class GrepPlan:
    """A checked grep request: what every implementation of grep starts from."""

    mode: GrepMode
    regex: re.Pattern[str]
    base: str  # the normalised path searched (a directory or one file)
    prefix: str  # ``base`` as a directory prefix, ending in ``/``
    glob: Callable[[str], bool] | None  # matches a path relative to ``base``
    deadline: float  # time.monotonic() by which the answer is due

    def in_glob(self, path: str) -> bool:
        """Does ``path`` (absolute, under ``base``) pass the glob? A file searched by
        its own path is matched by its name."""
        return self.glob is None or self.glob(path[len(self.prefix):] or paths.basename(path))

    def seconds_left(self) -> float:
        return self.deadline - time.monotonic()


def plan(pattern: str, *, path: str, glob: str | None, output_mode: str, case_insensitive: bool,
         fixed_strings: bool, plain: bool = False) -> GrepPlan:
    """Check and compile a grep request (raises ``InvalidPattern``/``InvalidPath``).

    ``plain``: match the glob with the reference Python regex (``compile_glob``)
    rather than the linear-time matcher.
    """
    mode = check_mode(output_mode)
    regex = compile_pattern(pattern, case_insensitive=case_insensitive, fixed_strings=fixed_strings)
    base = paths.normalize(path)
    glob_fn: Callable[[str], bool] | None = None
    if glob and plain:
        reference = compile_glob(glob)
        glob_fn = lambda p: reference.match(p) is not None  # noqa: E731 - a one-line closure
    elif glob:
        glob_fn = glob_matcher(glob).match
    return GrepPlan(mode, regex, base, paths.dir_prefix(base), glob_fn, time.monotonic() + GREP_DEADLINE)


def exact_literal(regex: re.Pattern[str]) -> str | None:
    """The text ``regex`` matches if it is nothing but a case-sensitive literal, else None.

    Such a pattern (no newline in it) matches a line of a file exactly when the
    file's text contains it, so a database's substring test decides the file by
    itself (Postgres grep for file names needs no content; see ``SqlStore.grep``).
    """
    import re._parser as sre_parse

    try:
        parsed = sre_parse.parse(regex.pattern, regex.flags)
    except (re.error, OverflowError, RecursionError):
        return None
    if parsed.state.flags & re.IGNORECASE:
        return None
    chars = []
    for op, arg in parsed:
        if op is not sre_parse.LITERAL:
            return None
        chars.append(chr(arg))
    text = "".join(chars)
    return text if text and "\n" not in text else None


class Cut(Exception):
    """Raised by a row source (e.g. a database statement timeout): stop, say why."""


def scan_plain(
    rows: Iterable[tuple[str, str]],
    regex: re.Pattern[str],
    mode: GrepMode,
    limit: int = DEFAULT_LIMIT,
) -> GrepResult:
    """The reference matcher: one ``regex.search`` per line, nothing skipped, no bound.

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


# -- Python re, for patterns it runs in linear time ------------------------------------


def _hits_by_line(content: str, regex: re.Pattern[str]) -> Iterator[tuple[int, str]]:
    lines = content.split("\n")
    if content.endswith("\n"):
        lines.pop()
    search = regex.search
    for no, line in enumerate(lines, 1):
        if search(line):
            yield no, line


def _on_empty_line(content: str, pos: int) -> bool:
    """Whether position ``pos`` of ``content`` lies on an empty line."""
    return (pos == 0 or content[pos - 1] == "\n") and (pos == len(content) or content[pos] == "\n")


def _hits_whole_text(content: str, regex: re.Pattern[str],
                     empty_line_hits: bool = True) -> Iterator[tuple[int, str]]:
    r"""Matching lines found by searching the whole text (``line_local`` patterns only).

    A match cannot cross a newline, so each match lies in one line and is that
    line's match; after one hit the search resumes at the next line. The empty
    position after a final ``\n`` is not a line (``scan_plain`` drops it), so an
    empty match there is ignored. Locating a hit costs a few calls more than
    searching one line, so a file that turns out to be dense with hits is
    finished line by line.

    ``empty_line_hits`` is whether the pattern matches an empty line searched on its
    own (``regex.search("")``). A match found on an empty line inside a longer text
    is not always one: Python's ``\B`` never matches in an empty string, though it
    matches between two newlines. Such a hit counts only when the line alone matches.
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
        if start < end or empty_line_hits:
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


def _has_hit_whole_text(content: str, regex: re.Pattern[str], empty_line_hits: bool) -> bool:
    m = regex.search(content)
    if m is None or (m.start() == len(content) and content.endswith("\n")):
        return False
    if empty_line_hits or not _on_empty_line(content, m.start()):
        return True
    # A match on an empty line that the line alone would not have (see _hits_whole_text).
    return next(_hits_whole_text(content, regex, empty_line_hits), None) is not None


def _python_hits(content: str, regex: re.Pattern[str], facts: regex_info.PatternInfo,
                 mode: GrepMode, empty_line_hits: bool) -> Iterable[tuple[int, str]]:
    """``line_local`` patterns search the whole text (no split into lines); other
    ``whole_text_ok`` ones skip a text with no match in it; the rest go line by line
    (see ``regex_info`` for why each shortcut is exact). ``empty_line_hits``: whether
    the pattern matches an empty line on its own."""
    if facts.line_local:
        if mode == "files_with_matches":
            return ((0, ""),) if _has_hit_whole_text(content, regex, empty_line_hits) else ()
        return _hits_whole_text(content, regex, empty_line_hits)
    if facts.whole_text_ok and regex.search(content) is None:
        return ()
    return _hits_by_line(content, regex)


# -- RE2: linear time ----------------------------------------------------------------


def _linear_hits(found: prefilter.Linear, content: str,
                 empty_line_hits: bool = True) -> Iterator[tuple[int, str]] | None:
    r"""The matching lines of ``content`` by RE2, lazily; None if RE2 cannot decide it.

    A hit on an empty line counts only if ``empty_line_hits`` (the pattern matches an
    empty line on its own in Python's re, which decides grep's answer: RE2's ``\B``
    matches an empty text, Python's does not)."""
    if found.compiled is None:
        return iter(())
    if found.unicode_boundary and not content.isascii():
        return None
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        return None  # a lone surrogate (no stored text has one): RE2 cannot read it
    if data.endswith(b"\n"):
        data = data[:-1]  # the empty position after a final \n is not a line
    return _re2_lines(found, data, empty_line_hits)


def _re2_lines(found: prefilter.Linear, data: bytes, empty_line_hits: bool) -> Iterator[tuple[int, str]]:
    # Every match lies within one line (see prefilter.Linear): find one, report its
    # line, resume at the next line's start (RE2 still sees the text before it, so
    # ^ and \b there are judged as in the line on its own).
    find = found.find
    n = len(data)
    pos, lineno, counted_to = 0, 1, 0
    while pos <= n:
        s = find(data, pos)
        if s < 0:
            return
        start = data.rfind(b"\n", 0, s) + 1
        end = data.find(b"\n", s)
        if end == -1:
            end = n
        lineno += data.count(b"\n", counted_to, start)
        counted_to = start
        if start < end or empty_line_hits:
            yield lineno, data[start:end].decode("utf-8")
        pos = end + 1


# -- Python re in a worker process: exact, and stoppable ------------------------------

# The worker: reads a pattern, then texts, and answers each text with the numbers
# of its matching lines, exactly as scan_plain finds them. Framing: a kind byte and
# an 8-byte length, then the body. It imports nothing but the standard library
# (-I -S: no site-packages, no environment), so it starts in ~15 ms.
_WORKER_SOURCE = r"""
import re, struct, sys
inp, out = sys.stdin.buffer, sys.stdout.buffer
def read(n):
    b = inp.read(n)
    if len(b) < n:
        sys.exit(0)
    return b
regex = None
while True:
    kind, n = struct.unpack("<cQ", read(9))
    body = read(n)
    if kind == b"P":
        (flags,) = struct.unpack("<q", body[:8])
        regex = re.compile(body[8:].decode("utf-8", "surrogatepass"), flags)
        continue
    want, whole = struct.unpack("<QB", body[:9])
    text = body[9:].decode("utf-8", "surrogatepass")
    found = []
    if not (whole and regex.search(text) is None):
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        search = regex.search
        for no, line in enumerate(lines, 1):
            if search(line):
                found.append(no)
                if len(found) == want:
                    break
    out.write(struct.pack("<Q%dQ" % len(found), len(found), *found))
    out.flush()
"""


class _TimeUp(Exception):
    pass


class _Worker:
    def __init__(self) -> None:
        # A session of its own: Ctrl-C in the terminal is the parent's to handle.
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WORKER_SOURCE],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.pattern: tuple[str, int] | None = None

    def _send(self, kind: bytes, body: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(struct.pack("<cQ", kind, len(body)) + body)
        self.proc.stdin.flush()

    def _recv(self, n: int, deadline: float) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buf = b""
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise _TimeUp
            chunk = os.read(fd, n - len(buf))
            if not chunk:
                raise OSError("the grep worker exited")
            buf += chunk
        return buf

    def lines(self, regex: re.Pattern[str], content: str, want: int, whole: bool, deadline: float) -> list[int]:
        """Numbers of the first ``want`` (0: all) matching lines; ``_TimeUp`` at the deadline."""
        if self.pattern != (regex.pattern, regex.flags):
            self._send(b"P", struct.pack("<q", regex.flags) + regex.pattern.encode("utf-8", "surrogatepass"))
            self.pattern = (regex.pattern, regex.flags)
        self._send(b"T", struct.pack("<QB", want, whole) + content.encode("utf-8", "surrogatepass"))
        (count,) = struct.unpack("<Q", self._recv(8, deadline))
        return list(struct.unpack(f"<{count}Q", self._recv(8 * count, deadline)))

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


_idle: list[_Worker] = []
_idle_lock = threading.Lock()
MAX_IDLE_WORKERS = 2


def _acquire() -> _Worker:
    with _idle_lock:
        if _idle:
            return _idle.pop()
    return _Worker()


def _release(worker: _Worker) -> None:
    with _idle_lock:
        if len(_idle) < MAX_IDLE_WORKERS and worker.proc.poll() is None:
            _idle.append(worker)
            return
    worker.kill()


@atexit.register
def _stop_workers() -> None:
    with _idle_lock:
        while _idle:
            _idle.pop().kill()


class _Backtracking:
    """Python's ``re`` for the texts RE2 cannot decide, under the scan's deadline."""

    def __init__(self, regex: re.Pattern[str], deadline: float) -> None:
        from . import regex_info

        self.regex = regex
        self.deadline = deadline
        self.whole = regex_info.info(regex).whole_text_ok
        self.worker: _Worker | None = None

    def hits(self, content: str, want: int) -> list[tuple[int, str]]:
        if self.worker is None:
            self.worker = _acquire()
        try:
            numbers = self.worker.lines(self.regex, content, want, self.whole, self.deadline)
        except BaseException:
            # Stuck in a search, dead, or we are interrupted: never reuse it.
            self.worker.kill()
            self.worker = None
            raise
        if not numbers:
            return []
        lines = content.split("\n")
        return [(no, lines[no - 1]) for no in numbers]

    def close(self) -> None:
        if self.worker is not None:
            _release(self.worker)
            self.worker = None


def _want(result: GrepResult, mode: GrepMode, limit: int) -> int:
    """How many matching lines of the next file can change the result (0: all)."""
    if mode == "files_with_matches":
        return 1
    if mode == "content":
        return max(limit - len(result.lines), 0) + 1  # one more shows it was truncated
    return 0


def scan(
    rows: Iterable[tuple[str, str]],
    regex: re.Pattern[str],
    mode: GrepMode,
    limit: int = DEFAULT_LIMIT,
    keep: Callable[[str], bool] | None = None,
    deadline: float | None = None,
) -> GrepResult:
    """Same answer as ``scan_plain``, in bounded time (see the module docstring).

    ``keep``, if given, is a necessary condition for a file to have a matching line
    (``prefilter.LineFilter.keep``): a file it rejects is skipped before the
    backtracking matcher sees it. ``deadline`` is a ``time.monotonic()`` value
    (default: ``GREP_DEADLINE`` from now); a row source may raise ``Cut``.
    """
    # Imported here, not at the top: the regex analysis and RE2 cost ~30 ms to load,
    # which commands that never grep (fs cat, ls, log; chat start) should not pay.
    from . import prefilter, regex_info

    end = time.monotonic() + GREP_DEADLINE if deadline is None else deadline
    # Python's re where it is linear (and fastest: literals, fixed-width classes);
    # else RE2 where it can decide; else Python's re in the worker, under the deadline.
    python = regex_info.backtracking_is_linear(regex.pattern, regex.flags)
    facts = regex_info.info(regex)
    found = prefilter.linear(regex.pattern, regex.flags)
    # What an empty line alone gives (scan_plain's answer for every empty line): the
    # whole-text and RE2 searches can differ from it there, never elsewhere.
    empty_line_hits = regex.search("") is not None
    result = GrepResult(mode=mode, limit=limit)
    slow = _Backtracking(regex, end)
    path = ""
    try:
        for path, content in rows:
            if time.monotonic() > end:
                result.cut = (f"grep stopped after {GREP_DEADLINE:g} s, before {path}; the files from "
                              "there on were not searched: narrow the path or the glob")
                break
            hits: Iterable[tuple[int, str]] | None = None
            if python:
                if keep is not None and not keep(content):
                    continue
                hits = _python_hits(content, regex, facts, mode, empty_line_hits)
            elif isinstance(found, prefilter.Linear):
                hits = _linear_hits(found, content, empty_line_hits)  # exact: ``keep`` would only repeat it
            if hits is None:
                if keep is not None and not keep(content):
                    continue
                hits = slow.hits(content, _want(result, mode, limit))
            if not _take(result, path, hits, mode, limit):
                break
    except _TimeUp:
        why = found if isinstance(found, str) else UNICODE_BOUNDARY
        result.cut = (f"grep stopped after {GREP_DEADLINE:g} s in {path}; the files from there on were "
                      f"not searched: the pattern has {why}, which only a backtracking matcher runs, and "
                      "it took too long there. Rewrite the pattern without it, or narrow the path or glob")
    except OSError as exc:  # the worker could not start, or died (e.g. out of memory)
        result.cut = (f"grep stopped in {path}; the files from there on were not searched: the "
                      f"backtracking matcher failed ({exc}). Rewrite the pattern, or narrow the path or glob")
    except Cut as exc:
        result.cut = str(exc)
    finally:
        slow.close()
    return result


def render(result: GrepResult) -> str:
    """The text the tools and the CLI print: one result a line, a note when cut."""
    if result.mode == "files_with_matches":
        out = list(result.files)
    elif result.mode == "count":
        out = [f"{p}:{n}" for p, n in result.counts]
    else:
        out = [f"{p}:{n}:{t}" for p, n, t in result.lines]
    if not out and not result.cut:
        return "No matches found."
    if not out:
        out.append("No matches found in the part searched.")
    if result.truncated:
        out.append(
            f"(results cut at {result.limit}; narrow the pattern, the path or the glob to see the rest)"
        )
    if result.cut:
        out.append(f"(incomplete: {result.cut})")
    return "\n".join(out)
