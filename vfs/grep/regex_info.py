"""What a grep pattern guarantees about its matches, read from Python's own parse tree.

Used only to *skip work*, never to decide a match: the fast paths may drop a file
or a line only when the facts below prove that ``engine.scan_plain`` (one regex
search per line) could not match there. Every rule is conservative; anything the
walker does not recognise turns the corresponding guarantee off.

Facts, for a pattern compiled by ``engine.compile_pattern`` (MULTILINE always on):

- ``required``: substrings every match must contain (an AND/OR tree of
  ``Needle``). Each needle lies inside the matched text, hence inside one line,
  hence inside the file; so a file without it cannot match. Under IGNORECASE a
  needle is matched case-insensitively, and the characters whose Python case
  partners include non-ASCII ones (``i``: U+0130/U+0131, ``k``: U+212A, ``s``:
  U+017F) or that are non-ASCII themselves are *unsafe*: an index folding case
  by other rules could miss them, so the renderers treat them as "any one
  character" (``needle_runs``/``like_pattern``).
- ``whole_text_ok``: "no match in the whole text" implies "no line matches". It
  holds unless the pattern can look past a line's end: ``\\A``, ``\\Z``,
  lookarounds, ``^``/``$`` with MULTILINE turned off in a group, or atomic groups
  and possessive repeats (which commit to the longest run and can fail in the
  whole text where the shorter line succeeds).
- ``line_local``: additionally, no part of the pattern can consume ``\\n``. Then a
  match found in the whole text lies within one line and is a match of that
  line, so the whole text can stand in for the list of lines (``engine.scan``).
"""

from __future__ import annotations

import re
import re._constants as C  # noqa: N812 - the opcodes read like the C engine's names
import re._parser as sre_parse
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

# Python IGNORECASE treats these ASCII letters as equal to non-ASCII characters
# (checked over every code point by tests/test_fastpaths.py).
CI_UNSAFE_ASCII = frozenset("iIkKsS")
MIN_RUN = 3  # trigram indexes cannot use anything shorter


@dataclass(frozen=True)
class Needle:
    text: str
    ci: bool  # matched case-insensitively (the pattern had IGNORECASE here)


@dataclass(frozen=True)
class AllOf:
    parts: tuple[Req, ...]


@dataclass(frozen=True)
class AnyOf:
    parts: tuple[Req, ...]


Req = Needle | AllOf | AnyOf


@dataclass(frozen=True)
class PatternInfo:
    required: Req | None
    whole_text_ok: bool
    line_local: bool


def safe_char(ch: str, ci: bool) -> bool:
    """True if an index may compare ``ch`` by itself (exactly, or by ASCII case).

    NUL and lone surrogates never occur in stored text (the validators refuse them)
    and cannot be sent to every driver, so they are never compared either.
    """
    if ch == "\x00" or "\ud800" <= ch <= "\udfff":
        return False
    if not ci:
        return True
    return ch.isascii() and ch not in CI_UNSAFE_ASCII


def needle_runs(needle: Needle) -> list[str]:
    """The pieces of ``needle`` made of safe characters (``None`` gaps removed)."""
    runs, cur = [], []
    for ch in needle.text:
        if safe_char(ch, needle.ci):
            cur.append(ch)
        else:
            runs.append("".join(cur))
            cur = []
    runs.append("".join(cur))
    return [r for r in runs if r]


def usable(needle: Needle) -> bool:
    return any(len(r) >= MIN_RUN for r in needle_runs(needle))


def prune(req: Req | None) -> Req | None:
    """Drop needles no trigram index can use; ``None`` = no filter at all."""
    if req is None:
        return None
    if isinstance(req, Needle):
        return req if usable(req) else None
    if isinstance(req, AllOf):
        kept = [p for p in (prune(x) for x in req.parts) if p is not None]
        if not kept:
            return None
        return kept[0] if len(kept) == 1 else AllOf(tuple(kept))
    alts = [prune(x) for x in req.parts]
    if any(a is None for a in alts):
        return None  # one alternative is unconstrained, so the whole OR is
    kept_alts = [a for a in alts if a is not None]
    return kept_alts[0] if len(kept_alts) == 1 else AnyOf(tuple(kept_alts))


class _Unknown(Exception):
    """A node the walker does not understand: give up that guarantee."""


class _Walker:
    def __init__(self) -> None:
        self.whole_text_ok = True
        self.line_local = True

    def seq(self, items: Any, flags: int) -> list[Req]:
        """Required parts (all of them) of a sequence of nodes."""
        reqs: list[Req] = []
        run: list[str] = []
        run_ci = False

        def flush() -> None:
            if run:
                reqs.append(Needle("".join(run), run_ci))
                run.clear()

        for op, av in items:
            ci = bool(flags & re.IGNORECASE)
            if op is C.LITERAL:
                if run and run_ci != ci:
                    flush()
                if av == 10:
                    self.line_local = False
                run.append(chr(av))
                run_ci = ci
                continue
            if op is C.AT:
                # Zero-width: the literals around it are still contiguous in the match.
                string_edge = av in (C.AT_BEGINNING_STRING, C.AT_END_STRING)
                single_line = av in (C.AT_BEGINNING, C.AT_END) and not flags & re.MULTILINE
                if string_edge or single_line:
                    self.whole_text_ok = False
                continue
            flush()
            if op is C.SUBPATTERN:
                _group, add, remove, sub = av
                reqs += self.seq(sub, (flags | add) & ~remove)
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
                lo, _hi, sub = av
                if op is C.POSSESSIVE_REPEAT:
                    self.whole_text_ok = False
                inner = self.seq(sub, flags)
                if lo >= 1:
                    reqs += inner
            elif op is C.ATOMIC_GROUP:
                self.whole_text_ok = False
                reqs += self.seq(av, flags)
            elif op is C.BRANCH:
                alts = [self.seq(alt, flags) for alt in av[1]]
                if all(alts):
                    reqs.append(AnyOf(tuple(_all(a) for a in alts)))
            elif op in (C.ASSERT, C.ASSERT_NOT):
                self.whole_text_ok = False
                self.seq(av[1], flags)  # still walked, for line_local
            elif op is C.ANY:
                if flags & re.DOTALL:
                    self.line_local = False
            elif op is C.NOT_LITERAL:
                if av != 10:
                    self.line_local = False
            elif op is C.IN:
                self.charset(av)
            elif op is C.GROUPREF:
                pass  # matches what a group matched: covered by walking that group
            elif op is C.GROUPREF_EXISTS:
                self.whole_text_ok = False
                _group, yes, no = av
                self.seq(yes, flags)
                if no is not None:
                    self.seq(no, flags)
            else:
                raise _Unknown(op)
        flush()
        return reqs

    def charset(self, items: Any) -> None:
        for op, av in items:
            if op is C.NEGATE:
                self.line_local = False
            elif op is C.LITERAL:
                if av == 10:
                    self.line_local = False
            elif op is C.RANGE:
                if av[0] <= 10 <= av[1]:
                    self.line_local = False
            elif op is C.CATEGORY:
                if av not in (C.CATEGORY_DIGIT, C.CATEGORY_WORD, C.CATEGORY_NOT_SPACE):
                    self.line_local = False
            else:
                self.line_local = False


def _all(reqs: list[Req]) -> Req:
    return reqs[0] if len(reqs) == 1 else AllOf(tuple(reqs))


@lru_cache(maxsize=512)
def analyze(pattern: str, flags: int) -> PatternInfo:
    """Facts about ``re.compile(pattern, flags)``; see the module docstring."""
    try:
        parsed = sre_parse.parse(pattern, flags)
        walker = _Walker()
        reqs = walker.seq(parsed, parsed.state.flags)
    except (_Unknown, re.error, RecursionError):
        return PatternInfo(None, False, False)
    required = prune(_all(reqs)) if reqs else None
    whole = walker.whole_text_ok
    return PatternInfo(required, whole, whole and walker.line_local)


def info(regex: re.Pattern[str]) -> PatternInfo:
    return analyze(regex.pattern, regex.flags)


# -- patterns Python's backtracking matches in linear time -----------------------------

# A backtracking search tries, at each start position, at most every path through
# the pattern, each no longer than the longest match; with no unbounded repeat that
# is a fixed amount of work per position, so the search is linear in the text.
MAX_BACKTRACK_WORK = 256  # paths x longest path, per start position


def _shape(items: Any) -> tuple[int, int]:
    """(paths, longest path) of a sequence; ``_Unknown`` if unbounded or not plain."""
    paths, longest = 1, 0
    for op, av in items:
        if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
            n, length = 1, 1
        elif op is C.AT:
            n, length = 1, 0
        elif op is C.SUBPATTERN:
            n, length = _shape(av[3])
        elif op is C.BRANCH:
            shapes = [_shape(alt) for alt in av[1]]
            n, length = sum(x for x, _ in shapes), max(y for _, y in shapes)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, sub = av
            if hi >= C.MAXREPEAT or hi > MAX_BACKTRACK_WORK:
                raise _Unknown("unbounded repeat")
            p, sub_len = _shape(sub)
            n = sum(p ** k for k in range(lo, hi + 1)) if p > 1 else hi - lo + 1
            length = hi * sub_len
        else:
            raise _Unknown(op)  # lookarounds, back references...: not this kind
        paths, longest = paths * n, longest + length
        if paths * max(longest, 1) > MAX_BACKTRACK_WORK:
            raise _Unknown("too much work per position")
    return paths, longest


@lru_cache(maxsize=512)
def backtracking_is_linear(pattern: str, flags: int) -> bool:
    """True if Python's ``re`` searches ``re.compile(pattern, flags)`` in linear time:
    no unbounded repeat, no lookaround or back reference, and at most
    ``MAX_BACKTRACK_WORK`` steps per start position (literals, ``[0-9]{3}-[0-9]{4}``,
    ``\\bword\\b``, ``colou?r``). ``engine`` runs those on ``re`` directly."""
    try:
        _shape(sre_parse.parse(pattern, flags))
    except (_Unknown, re.error, RecursionError, OverflowError):
        return False
    return True
