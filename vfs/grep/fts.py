"""Database pre-filters for grep: the files that could possibly match.

Invariant: for a pattern's ``required`` tree (see ``regex_info``), the condition
built here is true for every live file that contains the required text, so the
candidate set is a superset of what ``engine.scan_plain`` would report; the exact
answer always comes from ``engine.scan`` on the candidates' real content.

- SQLite: the scope's trigram table (FTS5, trigram tokenizer, ``detail=none``, case
  folded by its own Unicode rules), read in the scope's own rowid range
  (``backends/sqlite_fts.py``). A needle becomes the AND of its trigrams: text that
  contains the needle contains each trigram, folded identically on both sides.
  Rows whose index entries are not merged yet (``fts_pending``, migration 0008)
  are always candidates: the index may still hold an older text for them.
  Case-sensitive needles may use any character (equal code points fold equally);
  case-insensitive ones only their safe runs (ASCII, not i/k/s), whose Python
  case partners are exactly the ASCII ones every folding agrees on.
- Postgres: ``LIKE``/``ILIKE`` with ``%needle%``, unsafe characters as ``_`` (one
  character of any kind); ``pg_trgm``'s GIN index makes that fast and Postgres
  re-checks the ``LIKE`` itself, so the result does not depend on the index. The
  pattern is rendered inline (``literal_execute``) so that a prepared statement
  can never fall back to a generic plan that ignores the index.
- Without the index (old SQLite, no pg_trgm) there is no pre-filter: grep scans.
"""

from __future__ import annotations

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Connection,
    and_,
    bindparam,
    or_,
)

from ..backends import Features, backend_for
from ..models import files
from .regex_info import MIN_RUN, AllOf, Needle, Req, needle_runs, safe_char

# Each trigram in an FTS5 AND costs a doclist read (measured: 0.3 ms for 6, 0.6 ms
# for 12 on 10,000 files); six spread over a long needle narrow almost as well, and
# the exact check afterwards removes what they let through.
MAX_TRIGRAMS_PER_NEEDLE = 6

def detect(conn: Connection) -> Features:
    """Which pre-filter indexes the connected database has (its backend looks)."""
    return backend_for(conn).search_features(conn)


def _trigrams(needle: Needle) -> list[str]:
    grams: list[str] = []
    for run in needle_runs(needle):
        for i in range(len(run) - MIN_RUN + 1):
            g = run[i : i + MIN_RUN]
            if g not in grams:
                grams.append(g)
    if len(grams) > MAX_TRIGRAMS_PER_NEEDLE:
        step = len(grams) / MAX_TRIGRAMS_PER_NEEDLE
        grams = [grams[int(i * step)] for i in range(MAX_TRIGRAMS_PER_NEEDLE)]
    return grams


def fts5_query(req: Req) -> str:
    """An FTS5 MATCH expression over single trigrams (``detail=none`` allows no phrases)."""
    if isinstance(req, Needle):
        grams = _trigrams(req)
        if not grams:
            raise ValueError(f"needle {req.text!r} has no trigram; prune() it first")
        return " AND ".join('"' + g.replace('"', '""') + '"' for g in grams)
    joiner = " AND " if isinstance(req, AllOf) else " OR "
    return joiner.join("(" + fts5_query(p) + ")" for p in req.parts)


def like_pattern(needle: Needle) -> str:
    """``%needle%`` for Postgres LIKE (backslash escapes), unsafe characters as ``_``."""
    out = []
    for ch in needle.text:
        if not safe_char(ch, needle.ci):
            out.append("_")
        elif ch in "\\%_":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "%" + "".join(out) + "%"


def _pg_condition(req: Req) -> ColumnElement[bool]:
    if isinstance(req, Needle):
        value: BindParameter[str] = bindparam(None, like_pattern(req), literal_execute=True)
        return files.c.content.ilike(value) if req.ci else files.c.content.like(value)
    parts = [_pg_condition(p) for p in req.parts]
    return and_(*parts) if isinstance(req, AllOf) else or_(*parts)


class _Rendered:
    """``req`` rendered on demand for the backend's index (``PrefilterQuery``)."""

    def __init__(self, req: Req) -> None:
        self.req = req

    def fts5(self) -> str:
        return fts5_query(self.req)

    def like(self) -> ColumnElement[bool]:
        return _pg_condition(self.req)


def candidates(features: Features, req: Req | None, *, conn: Connection,
               scope: str) -> ColumnElement[bool] | None:
    """A WHERE condition on ``files`` narrowing a grep of ``scope`` to possible
    matches, or None (the backend's ``grep_prefilter``)."""
    if req is None:
        return None
    return backend_for(conn).grep_prefilter(conn, scope, features, _Rendered(req))
