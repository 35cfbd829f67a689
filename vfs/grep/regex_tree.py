r"""The translation of a Python pattern into a node tree, and of the tree into RE2 and Postgres syntax.

``prefilter`` uses it (grep's pre-filter, glob's and grep's exact RE2 form); nothing
else in vfs does. A Python pattern is parsed by Python's own ``re._parser`` and each
construct becomes a node (``Chars``, ``Cat``, ``Alt``, ``Rep``, ``Anchor``,
``Boundary``), which ``re2_syntax`` and ``pg_syntax`` write out. Two translations:

- ``build`` (loose): matches wherever Python's pattern matches within a line, maybe
  elsewhere too. ``\b``/``\B`` are dropped (no condition is weaker than any), lazy
  repeats become greedy (the same strings match), and repeat bounds above
  ``REPEAT_CAP`` are lowered to it or made unbounded.
- ``build_exact``: matches within a line exactly where Python's does; every bound
  and set is kept, and what cannot be kept is refused (``Refuse``, naming it).

Invariants of both:

- Character sets are exact, computed from Python's own ``re`` over every code point
  (``\d``, ``\w``, ``\s`` with their Unicode meaning, the case partners of ASCII
  letters under IGNORECASE), then written as explicit code point ranges, so no
  engine's own classes or case folding is trusted. Sets drop ``\n`` (no line
  contains one) and the surrogates (no stored text does: Postgres refuses them and
  RE2 is not asked about a text that does not encode to UTF-8).
- Hence a translation cannot match ``\n`` either, and a line is the text between
  two ``\n`` (or its ends): Python's MULTILINE ``^``/``$`` at a line's edges sit
  exactly where RE2's ``(?m)^``/``$`` and Postgres' ``(?n)`` anchors match.

``build`` refuses (None): lookarounds, back references and conditionals, atomic
groups and possessive repeats, ``\A``/``\Z``, ``^``/``$`` with MULTILINE turned off,
non-ASCII characters under IGNORECASE, classes mixing ``\d``/``\w``/``\s`` with
letters under IGNORECASE, a literal ``\n``, patterns that can match the empty string
(they match every line: nothing to skip), and trees over ``MAX_SIZE``.
"""

from __future__ import annotations

import array
import re
import re._constants as C  # noqa: N812 - the opcodes read like the C engine's names
import re._parser as sre_parse
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

# Postgres allows repeat counts up to 255 (RE_DUP_MAX); RE2 up to 1,000 in all.
# Lowering a bound keeps the translation looser, and long runs narrow as well.
REPEAT_CAP = 100
RE2_MAX_REPEAT = 1000  # RE2 refuses larger counts; an exact translation cannot lower them
# Ranges the engines would expand (a repeat copies its body): beyond this the
# pattern is refused rather than risk a slow compile or "too complex" errors.
MAX_SIZE = 50_000
# Exact translations keep every bound and set, so they get a larger budget; RE2
# itself refuses what does not fit in its memory limit (prefilter.RE2_MAX_MEM).
MAX_EXACT_SIZE = 200_000
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


class Refuse(Exception):
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
            raise Refuse(f"class item {op}")
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
        raise Refuse("non-ASCII character under IGNORECASE")
    return ci_partners(_ascii_only(flags))[code]


def _charset(items: Any, flags: int, exact: bool = False) -> Ranges:
    if exact and flags & re.IGNORECASE:
        try:
            return _charset(items, flags)
        except Refuse:
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
                    raise Refuse("non-ASCII range under IGNORECASE")
                for code in range(lo, hi + 1):
                    got += _literal(code, flags)
            else:
                got.append((lo, hi))
        elif op is C.CATEGORY and av in _CATEGORY_RE:
            has_category = True
            got += category_set(av, _ascii_only(flags))
        else:
            raise Refuse(f"class item {op}")
    if ci and has_category and has_char:
        # Python then tests the lower-cased character against the category too.
        raise Refuse("category and characters in one class under IGNORECASE")
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
                raise Refuse("a literal newline")
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
                raise Refuse(f"anchor {av}")
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
            raise Refuse(_UNTRANSLATABLE.get(op, f"the operator {op}"))
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
    raise Refuse("\\B" if av is C.AT_NON_BOUNDARY else f"the anchor {av}")


def _zero_width(node: Node) -> bool:
    if isinstance(node, Anchor | Boundary):
        return True
    if isinstance(node, Cat | Alt):
        return all(_zero_width(p) for p in node.parts)
    return False


def _exact_repeat(inner: Node | None, lo: int, hi: int | None) -> Node | None:
    if lo > RE2_MAX_REPEAT or (hi is not None and hi > RE2_MAX_REPEAT):
        raise Refuse(f"a repeat count over {RE2_MAX_REPEAT}")
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
    except (Refuse, re.error, ValueError, RecursionError):
        return None
    if node is None or nullable(node) or size(node) > MAX_SIZE:
        return None
    return node


def has_unicode_boundary(node: Node) -> bool:
    """Does the tree test a Unicode ``\\b`` (RE2's own is ASCII-only)?"""
    if isinstance(node, Boundary):
        return not node.ascii
    if isinstance(node, Cat | Alt):
        return any(has_unicode_boundary(p) for p in node.parts)
    if isinstance(node, Rep):
        return has_unicode_boundary(node.node)
    return False


def build_exact(pattern: str, flags: int) -> Node | None:
    """The exact node tree (None: matches no line), or ``Refuse`` naming why not."""
    try:
        with warnings.catch_warnings():
            # re.compile already warned about this pattern (e.g. a nested set) once.
            warnings.simplefilter("ignore")
            parsed = sre_parse.parse(pattern, flags)
        if parsed.state.flags & re.LOCALE:
            raise Refuse("locale-dependent matching")
        node = _seq(parsed, parsed.state.flags, exact=True)
    except (re.error, ValueError):
        raise Refuse("a pattern the translator cannot read") from None
    except RecursionError:
        raise Refuse("nesting too deep to translate") from None
    if node is not None and size(node) > MAX_EXACT_SIZE:
        raise Refuse("a pattern too large for the linear-time engine")
    return node


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
