"""Ranked search in three modes: lexical (full text), semantic (vectors), hybrid (both fused).

Invariants:
- ``lexical`` is exactly ``search.lexical.FullTextRanker``'s answer.
- ``semantic`` ranks by the best chunk's cosine similarity (``index.VectorIndex``);
  its snippet is the line of that chunk holding most query words (its first line
  when none does).
- ``hybrid`` fuses the two lists by reciprocal rank fusion: a file's score is the
  sum over the lists that hold it of ``1 / (RRF_K + rank)``, so neither list's
  score scale matters and a file both lists find comes first. Each list
  contributes its best ``depth(k)`` (k + 10: 30 deep changed no hit@1 or hit@3 figure of the
  quality set and cost a snippet per extra lexical hit). Its snippet is the semantic one when the
  vectors found the file (the best-matching chunk), else the lexical one.
- Scores are comparable within one answer only; higher is better. Equal scores go
  by path, then scope, so an answer is a function of the data (issue #36).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection

from memagent.vfs.search.lexical import MAX_K, Ranked, Ranker, searched, snippet, terms

from .base import SearchMode
from .chunks import chunk_text
from .index import SemanticHit, VectorIndex, contents

DEFAULT_MODE: SearchMode = "hybrid"
RRF_K = 60
# A file is close in meaning only from this cosine up. Measured with wordllama on
# the bench's quality set (bench/hybrid_search.py): 0.15 keeps 19 of 26 paraphrase
# targets in the hybrid top 3, 0.20 keeps 16 and 0.25 only 12, while no lexical-class
# answer changes; what it lets through below a real match is noise that fusion ranks
# after the files both lists found. Random letters reach ~0.2 against short notes,
# so a nonsense query can get weak hits in semantic and hybrid modes.
MIN_SIMILARITY = 0.15


def depth(k: int) -> int:
    """How many hits each list contributes to a fusion for ``k`` results."""
    return k + 10


def _semantic_snippet(hit: SemanticHit, text: dict[int, str], words: Sequence[str]) -> str:
    return snippet(chunk_text(text.get(hit.file_id, ""), hit.chunk), words)


def search(conn: Connection, lexical: Ranker, vectors: VectorIndex, scopes: Sequence[str],
           query: str, k: int, mode: SearchMode) -> list[Ranked]:
    k = max(1, min(int(k), MAX_K))
    if mode == "lexical":
        return lexical.rank(conn, scopes, query, k)
    words = searched(terms(query))
    if not query.strip() or not scopes:
        return []
    if mode == "semantic":
        hits = vectors.rank(conn, scopes, query, k, MIN_SIMILARITY)
        text = contents(conn, [h.file_id for h in hits])
        return [Ranked(h.scope, h.path, h.score, _semantic_snippet(h, text, words), h.version)
                for h in hits]
    n = depth(k)
    lex = lexical.rank(conn, scopes, query, n) if words else []
    sem = vectors.rank(conn, scopes, query, n, MIN_SIMILARITY)
    fused: dict[tuple[str, str], float] = {}
    for keys in ([(h.scope, h.path) for h in lex], [(h.scope, h.path) for h in sem]):
        for rank, key in enumerate(keys, 1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (RRF_K + rank)
    by_sem = {(h.scope, h.path): h for h in sem}
    by_lex = {(h.scope, h.path): h for h in lex}
    # Equal fused scores (a file first in one list and second in the other, its rival the
    # reverse) go by path, then scope: the data, never the lists' order.
    order = sorted(fused, key=lambda key: (-fused[key], key[1], key[0]))[:k]
    # Text only for the semantic hits shown (their snippet is cut from the best chunk).
    text = contents(conn, [by_sem[key].file_id for key in order if key in by_sem])
    out = []
    for key in order:
        s = by_sem.get(key)
        if s is not None:
            out.append(Ranked(s.scope, s.path, fused[key], _semantic_snippet(s, text, words), s.version))
        else:
            h = by_lex[key]
            out.append(Ranked(h.scope, h.path, fused[key], h.snippet, h.version))
    return out
