r"""A pre-filter for grep patterns that no trigram index can narrow, and the exact RE2 form of a pattern.

``regex_info`` finds the literals every match must contain; a pattern such as
``[0-9]{3}-[0-9]{4}`` has none, so without this module every file's text went
through Python's ``re``. Here a *safe subset* of Python patterns is translated
(``regex_tree``: the node tree, its invariants and what it refuses) to an
equal-or-looser pattern for a faster engine, and that pattern is used only as a
necessary condition on a file's whole text:

- RE2 (the ``google-re2`` package) in Python, for any database;
- Postgres' own regex, ``content ~ '(?n)...'`` (newline-sensitive mode), when
  ``pg_trgm``'s index can narrow it (Postgres extracts trigrams from the regex
  itself; it re-checks every row it returns, so the index never decides a match).

Invariant (soundness): if ``engine.scan_plain`` finds a match of the Python pattern
in some line of a file, the translation matches somewhere in that file's text. A
file the filter rejects therefore has no matching line; the exact answer still
comes from ``engine.scan`` on the files that pass. Why a match in a line is a match
of the translation in the text: character sets are Python's own, without ``\n``, so
a line's edges are where the engines' multi-line anchors match, and every other
change only loosens (``regex_tree``'s docstring). Besides what ``regex_tree.build``
refuses, a translation the engine will not compile gets no filter (grep scans as
before).

``linear`` is the other use of the tree: an exact RE2 form (``Linear``) that glob
and grep run instead of Python's backtracking ``re`` where one exists.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import ColumnElement, Connection

from ..backends import backend_for
from .fts import Features
from .regex_tree import Refuse, build, build_exact, has_unicode_boundary, pg_syntax, re2_syntax


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


# RE2 refuses to compile what does not fit in this much memory (exact translations).
RE2_MAX_MEM = 64 << 20


@dataclass(frozen=True)
class Linear:
    """An exact RE2 form of a Python pattern, for searching text made of whole lines.

    Invariant: for a text holding no lone surrogate, and, when ``unicode_boundary``,
    only ASCII characters, ``compiled`` finds a match in ``text`` exactly when
    Python's ``re.search`` of the pattern finds one in some line of it (a line as
    ``engine.scan_plain`` splits them), and every match RE2 reports lies within one
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
        node = build_exact(pattern, flags)
        if node is None:
            return Linear("", None, False)
        re2_pattern = re2_syntax(node)
    except Refuse as exc:
        return str(exc)
    except RecursionError:
        return "nesting too deep to translate"
    re2 = _re2()
    try:
        compiled = re2.compile(re2_pattern, _re2_options())
    except re2.error:
        return "a pattern too large for the linear-time engine"
    return Linear(re2_pattern, compiled, has_unicode_boundary(node))


def linear(pattern: str, flags: int) -> Linear | str:
    """The exact RE2 form of ``re.compile(pattern, flags)``, or why there is none.

    The reason is a phrase for a person: "a backreference", "a lookaround"...
    """
    if _re2() is None:
        return "no linear-time engine (the google-re2 package is missing)"
    return _linear(pattern, flags)

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
    where = backend_for(conn).regex_prefilter(conn, features, found.pg_pattern)
    if where is not None:
        return where, None
    if found.compiled is None:
        return None, None
    return None, found.keep
