"""Ranked full-text search over files: the database's own index, bm25 or ts_rank.

``search_memory`` and ``memagent fs search`` rank memory files (and past
conversations, which live in ``files`` too) by relevance to a free-text query.
Invariants:

- The index is the database's (migration 0005): SQLite FTS5 ``files_search``
  ranked with ``bm25`` (path words weigh ``PATH_WEIGHT`` times content words);
  Postgres ``files.search_doc`` (a generated ``tsvector``) ranked with ``ts_rank``.
  Both are kept in step with ``files`` inside the writing transaction, so a
  committed write, edit, move, delete or revert is searchable (or gone) at once.
- The person's or model's text never reaches a query language: it is cut to
  ``MAX_QUERY_CHARS``, split into at most ``MAX_TERMS`` words (letters and digits,
  each at most ``MAX_TERM_CHARS``), and each word is quoted (FTS5) or passed as a
  bound parameter to ``plainto_tsquery`` (Postgres), so no input is a syntax error,
  and the query is an OR of a bounded number of terms (no query can hang: on
  Postgres a statement timeout stops it anyway). Files matching more of the words,
  or rarer ones, rank higher.
- Only live files of the given scopes are returned, best first, at most ``k``.
  Snippets are cut from the file's text in Python (the same on both databases):
  the line with most query words, bounded to ``SNIPPET_CHARS``.
- Without the index (an SQLite without FTS5) search scans: the same words,
  counted in Python, over files whose text contains one of them.

``Ranker`` is the interface a caller ranks through; ``FullTextRanker`` is the
database one. An embedding ranker can be added later behind the same interface.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Connection, text

MAX_QUERY_CHARS = 2000
MAX_TERMS = 24
MAX_TERM_CHARS = 64
MAX_K = 100
SNIPPET_CHARS = 160
PATH_WEIGHT = 4.0
# Postgres: a ranked search is stopped after this long (it never should need it).
STATEMENT_TIMEOUT_MS = 5000

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True)
class Ranked:
    """A hit inside the store: scope, path in the scope, score (higher is better), snippet."""

    scope: str
    path: str
    score: float
    snippet: str
    version: int


class Ranker(Protocol):
    """Ranks the live files of ``scopes`` for ``query``; best first, at most ``k``."""

    def rank(self, conn: Connection, scopes: Sequence[str], query: str, k: int) -> list[Ranked]: ...


def terms(query: str) -> list[str]:
    """The query's words (lower-cased, deduplicated, bounded): what is searched for."""
    out: list[str] = []
    for word in _WORD.findall(query[:MAX_QUERY_CHARS].lower()):
        word = word[:MAX_TERM_CHARS]
        if word not in out:
            out.append(word)
        if len(out) >= MAX_TERMS:
            break
    return out


def fts5_match(words: Sequence[str]) -> str:
    """An FTS5 MATCH expression: the quoted words ORed (quotes doubled, so nothing is syntax)."""
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


def _stem(word: str) -> str:
    """A crude stem for finding a word in a snippet (``meetings`` finds ``meeting``)."""
    return word if len(word) <= 4 else word[: max(4, len(word) - 3)]


def snippet(content: str, words: Sequence[str]) -> str:
    """The line of ``content`` with the most query words, around the first one, one line."""
    stems = [_stem(w) for w in words]
    best, best_score, best_at = "", 0, 0
    for line in content[:400_000].splitlines():
        low = line.lower()
        score = sum(1 for s in stems if s in low)
        if score > best_score:
            best, best_score = line, score
            best_at = min((low.find(s) for s in stems if s in low), default=0)
            if score == len(stems):
                break
    if not best:
        best = next((ln for ln in content.splitlines() if ln.strip()), "")
        best_at = 0
    line = " ".join(best.split()) if len(best) < 4 * SNIPPET_CHARS else best
    if len(line) > SNIPPET_CHARS:
        start = max(0, min(best_at - SNIPPET_CHARS // 3, len(line) - SNIPPET_CHARS))
        line = ("…" if start else "") + line[start : start + SNIPPET_CHARS].strip() + "…"
    return " ".join(line.split())


def _in_scopes(scopes: Sequence[str]) -> tuple[str, dict[str, Any]]:
    names = [f"s{i}" for i in range(len(scopes))]
    return ", ".join(":" + n for n in names), dict(zip(names, scopes, strict=True))


_SQLITE = """
SELECT f.scope, f.path, f.version, f.content, bm25(files_search, {weight}, 1.0) AS score
FROM files_search JOIN files AS f ON f.id = files_search.rowid
WHERE files_search MATCH :q AND f.scope IN ({scopes}) AND f.deleted = 0
ORDER BY score, f.path
LIMIT :k
"""

# The tsquery is written out in WHERE (not taken from a subquery) so that the planner
# sees a condition the GIN index on search_doc can answer.
_POSTGRES = """
SELECT f.scope, f.path, f.version, f.content, ts_rank(f.search_doc, {query}, 1) AS score
FROM files AS f
WHERE f.search_doc @@ ({query}) AND f.scope IN ({scopes}) AND f.deleted = false
ORDER BY score DESC, f.path
LIMIT :k
"""


_SQLITE_TOP = "SELECT rowid, bm25(files_search, {weight}, 1.0) AS score FROM files_search " \
    "WHERE files_search MATCH :q ORDER BY score LIMIT :n"


def _sqlite_two_stage(conn: Connection, scopes: Sequence[str], match: str, k: int) -> list[Any] | None:
    """The best ``k`` of ``scopes`` from the index alone, then their rows; None when unsure.

    Ranking inside FTS5 and joining only the top rows is several times faster than
    joining every match (3,000 matches: ~8 ms against ~30 ms). Rows of other scopes
    may take places in the top; when too few of ours survive and the index had more,
    the caller runs the full query (None).
    """
    n = 4 * k + 20
    top = conn.execute(text(_SQLITE_TOP.format(weight=PATH_WEIGHT)), {"q": match, "n": n}).all()
    if not top:
        return []
    score = {r.rowid: r.score for r in top}
    placeholders, params = _in_scopes(scopes)
    ids = ", ".join(str(int(i)) for i in score)
    rows = conn.execute(text(f"SELECT id, scope, path, version, content FROM files WHERE id IN ({ids}) "
                             f"AND scope IN ({placeholders}) AND deleted = 0"), params).all()
    if len(rows) < k and len(top) == n:
        return None
    found = sorted(rows, key=lambda r: (score[r.id], r.path))[:k]
    return [_Row(r.scope, r.path, r.version, r.content, score[r.id]) for r in found]


@dataclass(frozen=True)
class _Row:
    scope: str
    path: str
    version: int
    content: str
    score: float


def _features(conn: Connection) -> str:
    """``fts5``, ``tsvector`` or ``scan``: which index this database has (migration 0005)."""
    if conn.dialect.name == "sqlite":
        found = conn.exec_driver_sql(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'files_search'").first()
        return "fts5" if found else "scan"
    if conn.dialect.name == "postgresql":
        found = conn.exec_driver_sql(
            "SELECT 1 FROM information_schema.columns WHERE table_name = 'files' "
            "AND column_name = 'search_doc'").first()
        return "tsvector" if found else "scan"
    return "scan"


class FullTextRanker:
    """``Ranker`` over the database's full-text index (see the module docstring)."""

    name = "fulltext"

    def __init__(self) -> None:
        self._kind: dict[str, str] = {}

    def rank(self, conn: Connection, scopes: Sequence[str], query: str, k: int) -> list[Ranked]:
        words = terms(query)
        k = max(1, min(int(k), MAX_K))
        if not words or not scopes:
            return []
        dialect = conn.dialect.name
        if dialect not in self._kind:
            self._kind[dialect] = _features(conn)
        kind = self._kind[dialect]
        placeholders, params = _in_scopes(scopes)
        if kind == "fts5":
            rows: Sequence[Any] | None = _sqlite_two_stage(conn, scopes, fts5_match(words), k)
            if rows is None:
                sql = text(_SQLITE.format(weight=PATH_WEIGHT, scopes=placeholders))
                rows = conn.execute(sql, {**params, "q": fts5_match(words), "k": k}).all()
            # bm25 is lower-is-better and negative: flip it so higher is better.
            return [Ranked(r.scope, r.path, round(-float(r.score), 4), snippet(r.content, words), r.version)
                    for r in rows]
        if kind == "tsvector":
            wparams = {f"w{i}": w for i, w in enumerate(words)}
            query_sql = " || ".join(f"plainto_tsquery('english', :w{i})" for i in range(len(words)))
            sql = text(_POSTGRES.format(query=query_sql, scopes=placeholders))
            conn.exec_driver_sql(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")
            found = conn.execute(sql, {**params, **wparams, "k": k}).all()
            return [Ranked(r.scope, r.path, round(float(r.score), 4), snippet(r.content, words), r.version)
                    for r in found]
        return _scan(conn, scopes, words, k)


def _scan(conn: Connection, scopes: Sequence[str], words: Sequence[str], k: int) -> list[Ranked]:
    """No index: count the words in Python over files that contain one of them."""
    placeholders, params = _in_scopes(scopes)
    likes = " OR ".join(f"lower(content) LIKE :l{i}" for i in range(len(words)))
    lparams = {f"l{i}": "%" + w.replace("\\", "").replace("%", "").replace("_", "") + "%"
               for i, w in enumerate(words)}
    sql = text(f"SELECT scope, path, version, content FROM files WHERE scope IN ({placeholders}) "
               f"AND content IS NOT NULL AND ({likes})")
    scored: list[Ranked] = []
    for r in conn.execute(sql, {**params, **lparams}):
        low = r.content.lower()
        path_low = r.path.lower()
        score = sum(math.log1p(low.count(w)) + PATH_WEIGHT * (w in path_low) for w in words)
        if score > 0:
            scored.append(Ranked(r.scope, r.path, round(score, 4), snippet(r.content, words), r.version))
    scored.sort(key=lambda h: (-h.score, h.path))
    return scored[:k]
