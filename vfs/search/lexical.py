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
- Only live files of the given scopes are returned, best first (equal scores by
  path, then scope, on both databases: never by plan or row order), at most ``k``.
  Snippets are cut from the file's text in Python (the same on both databases),
  for the ``k`` returned files only: the line with most query words, bounded to
  ``SNIPPET_CHARS``.
- Cost is bounded by the number of matching files, not by their text. SQLite ranks
  every match inside FTS5 and reads the text of the ``k`` best only. Postgres,
  whose ``ts_rank`` must read each ranked file's out-of-line ``tsvector``, ranks
  exactly the ``PG_CANDIDATES`` best (``backends/postgres.py``) by an estimate the GIN index answers alone
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
from typing import Protocol

from sqlalchemy import Connection, text

from memagent.vfs.backends import backend_for
from memagent.vfs.backends.base import RankIndex, in_scopes

MAX_QUERY_CHARS = 2000
MAX_TERMS = 24
MAX_TERM_CHARS = 64
MAX_K = 100
SNIPPET_CHARS = 160
PATH_WEIGHT = 4.0

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
        if kind == "scan":
            return _scan(conn, scopes, words, k)
        # The index's query is the backend's (bm25 over FTS5, ts_rank over a tsvector).
        rows = backend.rank_rows(conn, scopes, words, [_stem(w) for w in words], k, path_weight=PATH_WEIGHT)
        return [Ranked(r.scope, r.path, r.score, snippet(r.content, words), r.version) for r in rows]


def _scan(conn: Connection, scopes: Sequence[str], words: Sequence[str], k: int) -> list[Ranked]:
    """No index: count the words in Python over files that contain one of them."""
    placeholders, params = in_scopes(scopes)
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
    scored.sort(key=lambda h: (-h.score, h.path, h.scope))
    return scored[:k]
