"""Ranked full-text search over files: the database's own index, bm25 or ts_rank.

``search_memory`` and ``memagent fs search`` rank memory files (and past
conversations, which live in ``files`` too) by relevance to a free-text query.
Invariants:

- The index is the database's (migration 0005): SQLite FTS5 ``files_search``
  ranked with ``bm25`` (path words weigh ``PATH_WEIGHT`` times content words);
  Postgres ``files.search_doc`` (a generated ``tsvector``) ranked with ``ts_rank``.
  A write only notes its change for them (SQLite ``fts_pending``, Postgres GIN
  pending lists); ``SqlStore.search`` merges what is noted before it ranks
  (``vfs/pending.py``), so a committed write, edit, move, delete or revert is
  searchable (or gone) at once.
- The person's or model's text never reaches a query language: it is cut to
  ``MAX_QUERY_CHARS``, split into at most ``MAX_TERMS`` words (letters and digits,
  each at most ``MAX_TERM_CHARS``), and each word is quoted (FTS5) or passed as a
  bound parameter to ``plainto_tsquery`` (Postgres), so no input is a syntax error,
  and the query is an OR of a bounded number of terms (no query can hang: on
  Postgres a statement timeout stops it anyway). Files matching more of the words,
  or rarer ones, rank higher. English stop words (``STOP_WORDS``, all on Postgres'
  list) are left out of the query unless it has no other word.
- Only live files of the given scopes are returned, best first, at most ``k``.
  Snippets are cut from the file's text in Python (the same on both databases),
  for the ``k`` returned files only: the line with most query words, bounded to
  ``SNIPPET_CHARS``.
- Cost is bounded by the number of matching files, not by their text. SQLite ranks
  every match inside FTS5 and reads the text of the ``k`` best only. Postgres,
  whose ``ts_rank`` must read each ranked file's out-of-line ``tsvector``, ranks
  exactly the ``PG_CANDIDATES`` best by an estimate the GIN index answers alone
  (see ``_POSTGRES``): exact whenever no more files match.
- Without the index (an SQLite without FTS5) search scans: the same words,
  counted in Python, over files whose text contains one of them.

``Ranker`` is the interface a caller ranks through; ``FullTextRanker`` is the
database one; vectors and the fused ranking are in ``vfs/embeddings/``. Scores are not
rounded (bm25 of a word every file holds is ~1e-6: rounded, a real hit showed "score 0").
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Connection, text

from memagent.vfs.backends import backend_for
from memagent.vfs.backends.base import RankIndex

MAX_QUERY_CHARS = 2000
MAX_TERMS = 24
MAX_TERM_CHARS = 64
MAX_K = 100
SNIPPET_CHARS = 160
PATH_WEIGHT = 4.0
# Postgres: a ranked search is stopped after this long (it never should need it).
STATEMENT_TIMEOUT_MS = 5000

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

# English function words, all on Postgres' english stop list, so both databases drop
# the same ones: in a question ("how do we handle ...") they match thousands of files,
# which costs ranking time (bm25 scores every match) and adds nothing to the order.
_STOP_LIST = """
a about again all am an and any are as at be been being but by can did do does doing down each for from
had has have having he her here him his how i if in into is it its just me my no nor not now of off on or
our out over own same she should so some such t than that the their them then there these they this those
to too under up very was we were what when where which who whom why will with you your
"""
STOP_WORDS = frozenset(_STOP_LIST.split())


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


def searched(words: Sequence[str]) -> list[str]:
    """The words that are ranked: ``words`` without stop words, unless nothing else is left."""
    kept = [w for w in words if w not in STOP_WORDS]
    return kept or list(words)


def fts5_match(words: Sequence[str]) -> str:
    """An FTS5 MATCH expression: the quoted words ORed (quotes doubled, so nothing is syntax)."""
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


def _stem(word: str) -> str:
    """A crude stem for finding a word in a snippet (``meetings`` finds ``meeting``)."""
    return word if len(word) <= 4 else word[: max(4, len(word) - 3)]


def snippet(content: str, words: Sequence[str]) -> str:
    """The line of ``content`` with the most query words, around the first one, one line."""
    stems = [_stem(w) for w in words]
    text_ = content[:400_000]
    lines = text_.splitlines(keepends=True)
    best, best_score, best_at = "", 0, 0
    for i in _lines_with(text_, lines, stems):
        line = lines[i].rstrip("\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
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


def _lines_with(text_: str, lines: Sequence[str], stems: Sequence[str]) -> list[int]:
    """Indexes of the lines that hold a stem, in order: one regex pass over the whole text.

    Scoring every line in Python cost ~0.4 ms a file, a good share of a search; the
    lines worth scoring are usually a handful.
    """
    low = text_.lower()
    if not stems or len(low) != len(text_):  # lower() changed lengths: offsets would not map
        return list(range(len(lines)))
    starts = list(itertools.accumulate((len(ln) for ln in lines), initial=0))
    found = re.finditer("|".join(re.escape(s) for s in stems), low)
    return sorted({bisect.bisect_right(starts, m.start()) - 1 for m in found})


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

# Postgres ranks a bounded candidate set. ts_rank must read each ranked row's tsvector,
# which for a file of a few KB lives out of line (TOAST): ~10 us a row, so ranking the
# 3,000 files a common word matches took ~40 ms. The GIN index alone tells which
# files hold which query word without reading any tsvector, so stage one picks the
# PG_CANDIDATES files with the best estimate of ts_rank from what is cheap (how many
# query words a file holds, which of them its path holds, its size: ts_rank with
# every word counted once), and stage two computes the exact ts_rank of those only.
# When no more than PG_CANDIDATES files match, every match is a candidate and the
# ranking is exact; past that, a file that only repeats a word more often than its
# rivals can be missed (bench/RESULTS.md gives how often on the bench corpus).
# Each word's tsquery is written out (not taken from a subquery) so that the planner
# sees a condition the GIN index on search_doc can answer. The estimate is float8
# arithmetic: numeric's ln() alone cost ~10 us a file.
_PG_HITS = """
SELECT f.id, f.scope, f.deleted, f.size,
       CASE WHEN f.path ILIKE :p{i} THEN {path_weight}::float8 ELSE 1.0::float8 END AS w
FROM files AS f
WHERE f.search_doc @@ plainto_tsquery('english', :w{i})
"""

# One word needs no grouping: each match is one row.
_PG_CANDIDATES_ONE = ("SELECT id FROM hits WHERE scope IN ({scopes}) AND deleted = false "
                      "ORDER BY w / ln(size + 2.0::float8) DESC, id LIMIT :n")
_PG_CANDIDATES_MANY = ("SELECT id FROM hits WHERE scope IN ({scopes}) AND deleted = false "
                       "GROUP BY id, size ORDER BY sum(w) / ln(size + 2.0::float8) DESC, id LIMIT :n")

# OFFSET 0 keeps the scope test out of the GIN scans (no condition is pushed into a
# subquery with an OFFSET): on a table without statistics (just imported) the planner
# otherwise reads every file of the scope through the (scope, deleted) index and tests
# each tsvector, ~100 ms at 2,000 files. (MATERIALIZED does the same but copies rows.)
_POSTGRES = """
WITH hits AS (SELECT * FROM ({hits}) AS u OFFSET 0),
cand AS ({candidates})
SELECT f.scope, f.path, f.version, f.content, ts_rank(f.search_doc, {query}, 1) AS score
FROM files AS f
WHERE f.id = ANY(ARRAY(SELECT id FROM cand))
ORDER BY score DESC, f.path
LIMIT :k
"""
# A word in the path weighs A (1.0) in search_doc against B (0.4) in the text; ts_rank
# gives such a word ~2.5 times a text word's share, and the estimate does the same.
_PG_PATH_WEIGHT = 2.5
PG_CANDIDATES = 200


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
    # The text only of the k kept (for their snippets): reading n files' text cost more.
    # With k or fewer in the top, one query reads everything.
    few = len(top) <= k
    rows = conn.execute(text(f"SELECT id, scope, path, version{', content' if few else ''} FROM files "
                             f"WHERE id IN ({ids}) AND scope IN ({placeholders}) AND deleted = 0"), params).all()
    if len(rows) < k and len(top) == n:
        return None
    found = sorted(rows, key=lambda r: (score[r.id], r.path))[:k]
    if few:
        content = {r.id: r.content for r in found}
    else:
        kept = ", ".join(str(int(r.id)) for r in found)
        content = {r.id: r.content for r in conn.execute(text(f"SELECT id, content FROM files WHERE id IN ({kept})"))}
    return [_Row(r.scope, r.path, r.version, content[r.id], score[r.id]) for r in found]


@dataclass(frozen=True)
class _Row:
    scope: str
    path: str
    version: int
    content: str
    score: float


class FullTextRanker:
    """``Ranker`` over the database's full-text index (see the module docstring)."""

    name = "fulltext"

    def __init__(self) -> None:
        self._kind: dict[str, RankIndex] = {}  # by backend name

    def rank(self, conn: Connection, scopes: Sequence[str], query: str, k: int) -> list[Ranked]:
        words = searched(terms(query))
        k = max(1, min(int(k), MAX_K))
        if not words or not scopes:
            return []
        backend = backend_for(conn)
        if backend.name not in self._kind:
            self._kind[backend.name] = backend.rank_index(conn)
        kind = self._kind[backend.name]
        placeholders, params = _in_scopes(scopes)
        if kind == "fts5":
            rows: Sequence[Any] | None = _sqlite_two_stage(conn, scopes, fts5_match(words), k)
            if rows is None:
                sql = text(_SQLITE.format(weight=PATH_WEIGHT, scopes=placeholders))
                rows = conn.execute(sql, {**params, "q": fts5_match(words), "k": k}).all()
            # bm25 is lower-is-better and negative: flip it so higher is better.
            return [Ranked(r.scope, r.path, -float(r.score), snippet(r.content, words), r.version)
                    for r in rows]
        if kind == "tsvector":
            return _postgres(conn, placeholders, params, words, k)
        return _scan(conn, scopes, words, k)


def _postgres(conn: Connection, placeholders: str, params: dict[str, Any], words: Sequence[str],
              k: int) -> list[Ranked]:
    """Exact ts_rank over the ``PG_CANDIDATES`` best estimated matches (see ``_POSTGRES``)."""
    hits = " UNION ALL ".join(_PG_HITS.format(i=i, path_weight=_PG_PATH_WEIGHT)
                              for i in range(len(words)))
    query_sql = " || ".join(f"plainto_tsquery('english', :w{i})" for i in range(len(words)))
    wparams: dict[str, Any] = {f"w{i}": w for i, w in enumerate(words)}
    # Words are letters and digits only (``terms``), so nothing in them is a LIKE wildcard;
    # ILIKE folds case (/AGENTS.md) at half the cost of lower() + LIKE.
    wparams.update({f"p{i}": f"%{_stem(w)}%" for i, w in enumerate(words)})
    candidates = _PG_CANDIDATES_ONE if len(words) == 1 else _PG_CANDIDATES_MANY
    sql = text(_POSTGRES.format(hits=hits, candidates=candidates.format(scopes=placeholders), query=query_sql))
    conn.exec_driver_sql(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")
    found = conn.execute(sql, {**params, **wparams, "n": max(PG_CANDIDATES, k), "k": k}).all()
    return [Ranked(r.scope, r.path, float(r.score), snippet(r.content, words), r.version)
            for r in found]


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
