r"""A pre-filter for grep patterns that no trigram index can narrow.

``regexinfo`` finds the literals every match must contain; a pattern such as
``[0-9]{3}-[0-9]{4}`` has none, so without this module every file's text went
through Python's ``re``. Here a *safe subset* of Python patterns is translated to
an equal-or-looser pattern for a faster engine, and that pattern is used only as a
necessary condition on a file's whole text:

- RE2 (the ``google-re2`` package) in Python, for any database;
- Postgres' own regex, ``content ~ '(?n)...'`` (newline-sensitive mode), when
  ``pg_trgm``'s index can narrow it (Postgres extracts trigrams from the regex
  itself; it re-checks every row it returns, so the index never decides a match).

Invariant (soundness): if ``search.scan_plain`` finds a match of the Python pattern
in some line of a file, the translation matches somewhere in that file's text. A
file the filter rejects therefore has no matching line; the exact answer still
comes from ``search.scan`` on the files that pass. Why a match in a line is a match
of the translation in the text:

- Character sets are exact, computed from Python's own ``re`` over every code point
  (``\d``, ``\w``, ``\s`` with their Unicode meaning, the case partners of ASCII
  letters under IGNORECASE), then written as explicit code point ranges, so no
  engine's own classes or case folding is trusted. Sets drop ``\n`` (no line
  contains one) and the surrogates (no stored text does: Postgres refuses them and
  RE2 is not asked about a text that does not encode to UTF-8).
- Hence the translation cannot match ``\n`` either, and a line is the text between
  two ``\n`` (or its ends): Python's MULTILINE ``^``/``$`` at a line's edges sit
  exactly where RE2's ``(?m)^``/``$`` and Postgres' ``(?n)`` anchors match.
- Every other change only loosens: ``\b``/``\B`` are dropped (no condition is
  weaker than any), lazy repeats become greedy (the same strings match), and
  repeat bounds above ``REPEAT_CAP`` are lowered to it or made unbounded.

Refused (no filter; grep scans as before): lookarounds, back references and
conditionals, atomic groups and possessive repeats, ``\A``/``\Z``, ``^``/``$``
with MULTILINE turned off, non-ASCII characters under IGNORECASE, classes mixing
``\d``/``\w``/``\s`` with letters under IGNORECASE, a literal ``\n``, patterns
that can match the empty string (they match every line: nothing to skip), and
translations over ``MAX_SIZE`` or that the engine will not compile.
"""

from __future__ import annotations

import array
import json
import re
import re._constants as C  # noqa: N812 - the opcodes read like the C engine's names
import re._parser as sre_parse
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import ColumnElement, Connection, Select, bindparam, literal_column, select
from sqlalchemy.exc import DBAPIError

from .fts import Features
from .models import files


@lru_cache(maxsize=1)
def _re2() -> Any:
    """The ``re2`` module (None if missing), imported on first use: it takes ~15 ms to
    load, which commands that never grep or glob should not pay for."""
    try:
        import re2
    except ImportError:  # pragma: no cover - a declared dependency; without it, no RE2 filter
        return None
    return re2


@lru_cache(maxsize=1)
def _unanchored() -> Any:
    """RE2's own "search anywhere" mode, for Linear.find (None: use the wrapper's search)."""
    return getattr(getattr(getattr(getattr(_re2(), "_re2", None), "RE2", None), "Anchor", None), "UNANCHORED", None)

# Postgres allows repeat counts up to 255 (RE_DUP_MAX); RE2 up to 1,000 in all.
# Lowering a bound keeps the translation looser, and long runs narrow as well.
REPEAT_CAP = 100
RE2_MAX_REPEAT = 1000  # RE2 refuses larger counts; an exact translation cannot lower them
# Ranges the engines would expand (a repeat copies its body): beyond this the
# pattern is refused rather than risk a slow compile or "too complex" errors.
MAX_SIZE = 50_000
# Exact translations keep every bound and set, so they get a larger budget; RE2
# itself refuses what does not fit in its memory limit below.
MAX_EXACT_SIZE = 200_000
RE2_MAX_MEM = 64 << 20
MAX_CODE = 0x10FFFF

Ranges = tuple[tuple[int, int], ...]  # sorted, disjoint, not touching, non-empty


@dataclass(frozen=True)
class Chars:
    """One character out of ``ranges`` (never ``\\n`` nor a surrogate)."""

    ranges: Ranges


@dataclass(frozen=True)
class Cat:
    parts: tuple[Node, ...]  # () matches the empty string


@dataclass(frozen=True)
class Alt:
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Rep:
    node: Node
    lo: int
    hi: int | None  # None = unbounded


@dataclass(frozen=True)
class Anchor:
    line_start: bool  # True: ^ (start of a line), False: $ (end of a line)


@dataclass(frozen=True)
class Boundary:
    """``\\b`` (exact translations only): a word boundary, by ASCII ``\\w`` if ``ascii``."""

    ascii: bool


Node = Chars | Cat | Alt | Rep | Anchor | Boundary
EMPTY = Cat(())


class _Refuse(Exception):
    """Not provably safe to translate: no filter (the message names the construct)."""


# -- character sets ----------------------------------------------------------------

# Never in a line (\n) or in stored text (surrogates): dropped from every set.
_NEVER: Ranges = ((10, 10), (0xD800, 0xDFFF))


def _norm(ranges: list[tuple[int, int]]) -> Ranges:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def _complement(ranges: Ranges) -> Ranges:
    out, nxt = [], 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODE:
        out.append((nxt, MAX_CODE))
    return tuple(out)


def _minus(ranges: Ranges, drop: Ranges) -> Ranges:
    """``ranges`` without ``drop``: the intersection with ``drop``'s complement."""
    keep = _complement(drop)
    out, i, j = [], 0, 0
    while i < len(ranges) and j < len(keep):
        lo, hi = max(ranges[i][0], keep[j][0]), min(ranges[i][1], keep[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if ranges[i][1] < keep[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _every_char() -> str:
    """All code points, each at its own index (built in ~20 ms, not kept)."""
    block = bytearray(array.array("I", range(0x10000)).tobytes())
    planes = []
    for plane in range(0x11):
        block[2::4] = bytes([plane]) * 0x10000  # byte 2 of a UTF-32-LE unit is the plane
        planes.append(bytes(block))
    return b"".join(planes).decode("utf-32-le", "surrogatepass")


# The categories sre_parse emits inside IN, as a Python pattern with the same meaning.
_CATEGORY_RE = {
    C.CATEGORY_DIGIT: r"\d", C.CATEGORY_NOT_DIGIT: r"\D",
    C.CATEGORY_SPACE: r"\s", C.CATEGORY_NOT_SPACE: r"\S",
    C.CATEGORY_WORD: r"\w", C.CATEGORY_NOT_WORD: r"\W",
}


# The tables below are computed from Python's own ``re`` on first use (20-40 ms each,
# once per process) rather than written down: they are then right for whichever
# Unicode version this Python has.


@lru_cache(maxsize=16)
def category_set(category: Any, ascii_only: bool) -> Ranges:
    """Exactly the code points Python's ``\\d`` (etc.) matches, under these flags."""
    flags = re.ASCII if ascii_only else re.UNICODE
    text = _every_char()
    found = [(m.start(), m.end() - 1) for m in re.finditer(_CATEGORY_RE[category] + "+", text, flags)]
    return _norm(found)


@lru_cache(maxsize=2)
def ci_partners(ascii_only: bool) -> tuple[Ranges, ...]:
    """For each ASCII code, the code points Python's IGNORECASE matches it with.

    E.g. ``k`` -> k, K and U+212A KELVIN SIGN. Candidates are what an IGNORECASE
    class of all ASCII matches; tests/test_regex_prefilter.py checks the result
    against a search of every code point for every ASCII character.
    """
    flags = re.IGNORECASE | (re.ASCII if ascii_only else re.UNICODE)
    cands = "".join(sorted(set(re.findall(r"[\x00-\x7f]", _every_char(), flags))))
    return tuple(
        _norm([(ord(x), ord(x)) for x in re.findall(re.escape(chr(code)), cands, flags)])
        for code in range(128)
    )


@lru_cache(maxsize=1)
def _every_char_cached() -> str:
    return _every_char()


@lru_cache(maxsize=512)
def _python_set(item_pattern: str, flags: int) -> Ranges:
    """The code points a one-character Python pattern matches, found by Python's ``re``.

    Used by exact translations for what the tables above do not cover (non-ASCII
    characters and ranges under IGNORECASE, categories mixed with letters there):
    the answer is Python's own, whatever its case rules are.
    """
    found = re.finditer("(?:" + item_pattern + ")+", _every_char_cached(), flags)
    return _norm([(m.start(), m.end() - 1) for m in found])


def _class_pattern(items: Any) -> str:
    """A Python class with exactly the items of a parsed ``IN`` (code points escaped)."""
    out: list[str] = []
    for op, av in items:
        if op is C.NEGATE:
            out.insert(0, "^")
        elif op is C.LITERAL:
            out.append(f"\\U{av:08X}")
        elif op is C.RANGE:
            out.append(f"\\U{av[0]:08X}-\\U{av[1]:08X}")
        elif op is C.CATEGORY and av in _CATEGORY_RE:
            out.append(_CATEGORY_RE[av])
        else:
            raise _Refuse(f"class item {op}")
    return "[" + "".join(out) + "]"


def _ci_flags(flags: int) -> int:
    return re.IGNORECASE | (re.ASCII if _ascii_only(flags) else 0)


# -- Python parse tree -> the node tree ------------------------------------------------


def _ascii_only(flags: int) -> bool:
    return bool(flags & re.ASCII)


def _literal(code: int, flags: int, exact: bool = False) -> Ranges:
    if not flags & re.IGNORECASE:
        return ((code, code),)
    if code >= 128:
        if exact:
            return _python_set(f"\\U{code:08X}", _ci_flags(flags))
        raise _Refuse("non-ASCII character under IGNORECASE")
    return ci_partners(_ascii_only(flags))[code]


def _charset(items: Any, flags: int, exact: bool = False) -> Ranges:
    if exact and flags & re.IGNORECASE:
        try:
            return _charset(items, flags)
        except _Refuse:
            return _python_set(_class_pattern(items), _ci_flags(flags))
    ci = bool(flags & re.IGNORECASE)
    negate = False
    got: list[tuple[int, int]] = []
    has_category = has_char = False
    for op, av in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            has_char = True
            got += _literal(av, flags)
        elif op is C.RANGE:
            has_char = True
            lo, hi = av
            if ci:
                if hi >= 128:
                    raise _Refuse("non-ASCII range under IGNORECASE")
                for code in range(lo, hi + 1):
                    got += _literal(code, flags)
            else:
                got.append((lo, hi))
        elif op is C.CATEGORY and av in _CATEGORY_RE:
            has_category = True
            got += category_set(av, _ascii_only(flags))
        else:
            raise _Refuse(f"class item {op}")
    if ci and has_category and has_char:
        # Python then tests the lower-cased character against the category too.
        raise _Refuse("category and characters in one class under IGNORECASE")
    ranges = _norm(got)
    return _complement(ranges) if negate else ranges


def _chars(ranges: Ranges) -> Chars | None:
    kept = _minus(ranges, _NEVER)
    return Chars(kept) if kept else None  # None: no character of a line can match


def _combine_flags(flags: int, add: int, remove: int) -> int:
    # As re._compiler: a scoped (?a) or (?u) replaces the other type flag.
    type_flags = re.ASCII | re.UNICODE | re.LOCALE
    if add & type_flags:
        flags &= ~type_flags
    return (flags | add) & ~remove


# What an exact translation cannot express, named for the person reading grep's note.
_UNTRANSLATABLE = {
    C.GROUPREF: "a backreference", C.GROUPREF_EXISTS: "a conditional group (?(...)...)",
    C.ASSERT: "a lookaround", C.ASSERT_NOT: "a lookaround", C.ATOMIC_GROUP: "an atomic group (?>...)",
    C.POSSESSIVE_REPEAT: "a possessive repeat (*+, ++, ?+)",
}


def _seq(items: Any, flags: int, exact: bool = False) -> Node | None:
    """The node for a sequence; None = it can never match inside a line.

    ``exact``: the translation matches in a line exactly where Python's does
    (``build_exact``); otherwise it may be looser (``build``).
    """
    parts: list[Node] = []
    for op, av in items:
        node: Node | None
        if op is C.LITERAL:
            if av == 10 and not exact:
                raise _Refuse("a literal newline")
            node = _chars(_literal(av, flags, exact))  # exact: \n is in no line, so None
        elif op is C.NOT_LITERAL:
            if exact and flags & re.IGNORECASE and av >= 128:
                node = _chars(_python_set(_class_pattern([(C.NEGATE, None), (C.LITERAL, av)]),
                                          _ci_flags(flags)))
            else:
                node = _chars(_complement(_literal(av, flags)))
        elif op is C.ANY:
            node = _chars(((0, MAX_CODE),))  # DOTALL or not: a line has no \n anyway
        elif op is C.IN:
            node = _chars(_charset(av, flags, exact))
        elif op is C.AT:
            if exact:
                node = _exact_anchor(av, flags)
            elif av in (C.AT_BOUNDARY, C.AT_NON_BOUNDARY):
                continue  # dropped: a looser pattern
            elif not flags & re.MULTILINE or av not in (C.AT_BEGINNING, C.AT_END):
                raise _Refuse(f"anchor {av}")
            else:
                node = Anchor(av is C.AT_BEGINNING)
        elif op is C.SUBPATTERN:
            _group, add, remove, sub = av
            node = _seq(sub, _combine_flags(flags, add, remove), exact)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, sub = av
            inner = _seq(sub, flags, exact)
            if exact:
                node = _exact_repeat(inner, int(lo), None if hi >= C.MAXREPEAT else int(hi))
            else:
                bounded = None if hi >= C.MAXREPEAT or hi > REPEAT_CAP else int(hi)
                lo = min(int(lo), REPEAT_CAP)
                if inner is None or bounded == 0:
                    node = EMPTY if lo == 0 else None
                elif inner == EMPTY:
                    node = EMPTY
                else:
                    node = Rep(inner, lo, bounded)
        elif op is C.BRANCH:
            alts = [n for n in (_seq(alt, flags, exact) for alt in av[1]) if n is not None]
            node = (alts[0] if len(alts) == 1 else Alt(tuple(alts))) if alts else None
        else:
            raise _Refuse(_UNTRANSLATABLE.get(op, f"the operator {op}"))
        if node is None:
            return None
        if node != EMPTY:
            parts.append(node)
    return parts[0] if len(parts) == 1 else Cat(tuple(parts))


def _exact_anchor(av: Any, flags: int) -> Node:
    """Python's anchors, searched within one line: every ``^``-like one is the line's
    start, every ``$``-like one its end (there is no ``\\n`` in a line for ``$`` to
    stand before, and the line is the whole string ``\\A``/``\\Z`` see)."""
    if av in (C.AT_BEGINNING, C.AT_BEGINNING_STRING):
        return Anchor(True)
    if av in (C.AT_END, C.AT_END_STRING):
        return Anchor(False)
    if av is C.AT_BOUNDARY:
        return Boundary(_ascii_only(flags))
    # Python's \B never matches an empty line, RE2's does: no exact form.
    raise _Refuse("\\B" if av is C.AT_NON_BOUNDARY else f"the anchor {av}")


def _zero_width(node: Node) -> bool:
    if isinstance(node, Anchor | Boundary):
        return True
    if isinstance(node, Cat | Alt):
        return all(_zero_width(p) for p in node.parts)
    return False


def _exact_repeat(inner: Node | None, lo: int, hi: int | None) -> Node | None:
    if lo > RE2_MAX_REPEAT or (hi is not None and hi > RE2_MAX_REPEAT):
        raise _Refuse(f"a repeat count over {RE2_MAX_REPEAT}")
    if inner is None or hi == 0:
        return EMPTY if lo == 0 else None
    if inner == EMPTY or _zero_width(inner):
        # Repeating a zero-width test tests it once (or not at all when lo is 0).
        return EMPTY if lo == 0 else inner
    return Rep(inner, lo, hi)


def nullable(node: Node) -> bool:
    """Can match the empty string (anchors count as empty)."""
    if isinstance(node, Chars):
        return False
    if isinstance(node, Anchor | Boundary):
        return True
    if isinstance(node, Cat):
        return all(nullable(p) for p in node.parts)
    if isinstance(node, Alt):
        return any(nullable(p) for p in node.parts)
    return node.lo == 0 or nullable(node.node)


def size(node: Node) -> int:
    """Roughly how big the engines' compiled forms get: ranges, times repeat copies."""
    if isinstance(node, Chars):
        return len(node.ranges)
    if isinstance(node, Anchor | Boundary):
        return 1
    if isinstance(node, Cat | Alt):
        return sum(size(p) for p in node.parts) + 1
    copies = max(node.lo, node.hi if node.hi is not None else node.lo + 1, 1)
    return size(node.node) * copies


def build(pattern: str, flags: int) -> Node | None:
    """The node tree for ``re.compile(pattern, flags)``, or None if refused."""
    try:
        parsed = sre_parse.parse(pattern, flags)
        if parsed.state.flags & re.LOCALE:
            return None
        node = _seq(parsed, parsed.state.flags)
    except (_Refuse, re.error, ValueError, RecursionError):
        return None
    if node is None or nullable(node) or size(node) > MAX_SIZE:
        return None
    return node


def _unicode_boundary(node: Node) -> bool:
    if isinstance(node, Boundary):
        return not node.ascii
    if isinstance(node, Cat | Alt):
        return any(_unicode_boundary(p) for p in node.parts)
    if isinstance(node, Rep):
        return _unicode_boundary(node.node)
    return False


def _build_exact(pattern: str, flags: int) -> Node | None:
    """The exact node tree (None: matches no line), or ``_Refuse`` naming why not."""
    try:
        with warnings.catch_warnings():
            # re.compile already warned about this pattern (e.g. a nested set) once.
            warnings.simplefilter("ignore")
            parsed = sre_parse.parse(pattern, flags)
        if parsed.state.flags & re.LOCALE:
            raise _Refuse("locale-dependent matching")
        node = _seq(parsed, parsed.state.flags, exact=True)
    except (re.error, ValueError):
        raise _Refuse("a pattern the translator cannot read") from None
    except RecursionError:
        raise _Refuse("nesting too deep to translate") from None
    if node is not None and size(node) > MAX_EXACT_SIZE:
        raise _Refuse("a pattern too large for the linear-time engine")
    return node


@dataclass(frozen=True)
class Linear:
    """An exact RE2 form of a Python pattern, for searching text made of whole lines.

    Invariant: for a text holding no lone surrogate, and, when ``unicode_boundary``,
    only ASCII characters, ``compiled`` finds a match in ``text`` exactly when
    Python's ``re.search`` of the pattern finds one in some line of it (a line as
    ``search.scan_plain`` splits them), and every match RE2 reports lies within one
    line. Why: every character set is Python's own (computed as for ``build``, and
    by Python's ``re`` itself where the tables stop), no set holds ``\\n``, every
    Python anchor searched within a line is that line's start or end, which RE2's
    multi-line ``^``/``$`` are, and the rest (concatenation, alternation, greedy or
    lazy repeats with their exact bounds) has the same set of matching strings in
    both engines; only *whether* a line matches matters to grep, never which match
    a backtracking engine would pick. RE2's ``\\b`` is ASCII-only, Python's
    follows Unicode ``\\w``: the two agree on ASCII text (and always under
    ``re.ASCII``, where ``ascii`` boundaries are made).
    """

    re2_pattern: str
    compiled: Any  # None: no line can match (e.g. the pattern needs a \n)
    unicode_boundary: bool

    def find(self, data: bytes, pos: int = 0) -> int:
        """Where the first match at or after ``pos`` in UTF-8 ``data`` starts; -1: none."""
        if self.compiled is None:
            return -1
        raw: Any = getattr(self.compiled, "_regexp", None)
        anchor = _unanchored() if raw is not None else None
        if raw is not None and anchor is not None:
            # The wrapper's search() costs several times the match itself on short
            # texts (it builds a match object in Python); RE2's object answers directly.
            return int(raw.Match(anchor, data, pos, len(data))[0][0])
        m = self.compiled.search(data, pos)
        return -1 if m is None else int(m.start())


def _re2_options() -> Any:
    options = _re2().Options()
    options.log_errors = False  # a refusal is an answer here, not a problem to log
    options.max_mem = RE2_MAX_MEM
    return options


@lru_cache(maxsize=256)
def _linear(pattern: str, flags: int) -> Linear | str:
    try:
        node = _build_exact(pattern, flags)
        if node is None:
            return Linear("", None, False)
        re2_pattern = re2_syntax(node)
    except _Refuse as exc:
        return str(exc)
    except RecursionError:
        return "nesting too deep to translate"
    re2 = _re2()
    try:
        compiled = re2.compile(re2_pattern, _re2_options())
    except re2.error:
        return "a pattern too large for the linear-time engine"
    return Linear(re2_pattern, compiled, _unicode_boundary(node))


def linear(pattern: str, flags: int) -> Linear | str:
    """The exact RE2 form of ``re.compile(pattern, flags)``, or why there is none.

    The reason is a phrase for a person: "a backreference", "a lookaround"...
    """
    if _re2() is None:
        return "no linear-time engine (the google-re2 package is missing)"
    return _linear(pattern, flags)


# -- rendering ---------------------------------------------------------------------


def _render(node: Node, char: Callable[[int], str]) -> str:
    if isinstance(node, Chars):
        if len(node.ranges) == 1 and node.ranges[0][0] == node.ranges[0][1]:
            return char(node.ranges[0][0])
        return "[" + "".join(char(lo) if lo == hi else f"{char(lo)}-{char(hi)}"
                             for lo, hi in node.ranges) + "]"
    if isinstance(node, Anchor):
        return "^" if node.line_start else "$"
    if isinstance(node, Boundary):
        return "\\b"
    if isinstance(node, Cat):
        return "".join(_render(p, char) for p in node.parts)
    if isinstance(node, Alt):
        return "(?:" + "|".join(_render(p, char) for p in node.parts) + ")"
    body = _render(node.node, char)
    if not isinstance(node.node, Chars | Alt):
        body = "(?:" + body + ")"
    lo, hi = node.lo, node.hi
    quant = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((lo, hi))
    if quant is None:
        quant = f"{{{lo},}}" if hi is None else f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"
    return body + quant


def re2_syntax(node: Node) -> str:
    """RE2, multi-line mode; every character as an ``\\x{..}`` escape."""
    return "(?m)" + _render(node, lambda c: f"\\x{{{c:X}}}")


def pg_syntax(node: Node) -> str:
    """A Postgres ARE in newline-sensitive mode; characters as ``\\U........``.

    Ranges inside brackets compare code points (no collation; case-sensitive).
    """
    return "(?n)" + _render(node, lambda c: f"\\U{c:08X}")


# -- the filter --------------------------------------------------------------------


@dataclass(frozen=True)
class LineFilter:
    """The translations of one pattern; ``keep`` is the RE2 check of a whole text."""

    re2_pattern: str
    pg_pattern: str
    compiled: Any  # an RE2 regexp, or None if RE2 is missing or refused the pattern

    def keep(self, content: str) -> bool:
        """False only if no line of ``content`` can match (see the module docstring)."""
        if self.compiled is None:
            return True
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:
            return True  # a lone surrogate: RE2 cannot see it, so let Python decide
        return self.compiled.search(data) is not None


@lru_cache(maxsize=256)
def translate(pattern: str, flags: int) -> LineFilter | None:
    """The filter for ``re.compile(pattern, flags)``, or None if it is refused."""
    node = build(pattern, flags)
    if node is None:
        return None
    re2_pattern, compiled = re2_syntax(node), None
    re2 = _re2()
    if re2 is not None:
        options = re2.Options()
        options.log_errors = False  # a refusal is an answer here, not a problem to log
        try:
            compiled = re2.compile(re2_pattern, options)
        except re2.error:
            compiled = None  # e.g. nested repeats past RE2's limit of 1,000
    return LineFilter(re2_pattern, pg_syntax(node), compiled)


def for_regex(regex: re.Pattern[str]) -> LineFilter | None:
    return translate(regex.pattern, regex.flags)


def pg_condition(pg_pattern: str) -> ColumnElement[bool]:
    # Inline (literal_execute), as fts.py does for LIKE: a generic plan with a bound
    # parameter could not let pg_trgm read the regex.
    return files.c.content.bool_op("~")(bindparam(None, pg_pattern, literal_execute=True))


# pg_trgm extracts no trigram from a pattern that can match the empty string: the
# plan of that is a full index scan, the yardstick for "the index does not narrow".
_FULL_SCAN = "(?n)"


def _bitmap_cost(conn: Connection, pg_pattern: str) -> float:
    query: Select[Any] = select(literal_column("1")).select_from(files).where(pg_condition(pg_pattern))
    sql = str(query.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
    plan = conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + sql).scalar_one()
    if isinstance(plan, str):
        plan = json.loads(plan)
    return float(plan[0]["Plan"]["Total Cost"])


def pg_index_narrows(conn: Connection, pg_pattern: str) -> bool:
    """True if pg_trgm's index can narrow ``content ~ pg_pattern``.

    pg_trgm reads trigrams out of many regexes (``[0-9]{3}-[0-9]{4}``: 14 ms instead
    of a 300 ms scan at 10,000 files) but not all (``[0-9]{5}``); forcing the index
    then costs a full index scan on top of reading every file. Ask the planner,
    in a savepoint so that neither the setting nor an error (Postgres refusing the
    pattern) outlives the question.
    """
    try:
        with conn.begin_nested() as probe:
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
            narrows = _bitmap_cost(conn, pg_pattern) < 0.5 * _bitmap_cost(conn, _FULL_SCAN)
            probe.rollback()
    except DBAPIError:
        return False
    return narrows


def choose(conn: Connection, features: Features, regex: re.Pattern[str]
           ) -> tuple[ColumnElement[bool] | None, Callable[[str], bool] | None]:
    """For a pattern no literal narrows: a WHERE condition, or a per-text check.

    Postgres filters itself when its index narrows the regex (no text leaves the
    server that cannot match); otherwise every text comes to Python, and RE2
    skips those that cannot match before Python's ``re`` looks at them.
    """
    found = for_regex(regex)
    if found is None:
        return None, None
    if features.pg_trgm and pg_index_narrows(conn, found.pg_pattern):
        return pg_condition(found.pg_pattern), None
    if found.compiled is None:
        return None, None
    return None, found.keep
