"""Ranked search on words: ``search_memory``'s lexical mode (lexical.py).

The database's own full-text index ranks (SQLite FTS5 with bm25, Postgres ``ts_rank``);
a write only notes its change and ``SqlStore.search`` merges what is noted before it ranks
(``vfs/pending.py``), so a committed change is searchable at once. The person's or model's
text never reaches a query language: it is cut, split into bounded words, and each word is
quoted or passed as a value. Semantic and hybrid ranking are in ``vfs/embeddings/``
(hybrid.py fuses both lists).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from memagent.vfs.lazy import face

if TYPE_CHECKING:
    from memagent.vfs.search.lexical import MAX_K, FullTextRanker, Ranked, Ranker, searched, snippet, terms

# Public name -> its module in this package, imported on first use (PEP 562, as
# vfs/__init__.py does), so importing one module of the package loads no other.
_LAZY: dict[str, str] = {
    "FullTextRanker": "lexical",
    "MAX_K": "lexical",
    "Ranked": "lexical",
    "Ranker": "lexical",
    "searched": "lexical",
    "snippet": "lexical",
    "terms": "lexical",
}

if not TYPE_CHECKING:
    __getattr__ = face(__name__, _LAZY, globals())


__all__ = ["FullTextRanker", "MAX_K", "Ranked", "Ranker", "searched", "snippet", "terms"]
