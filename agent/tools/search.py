"""``search_memory``: memory files and past conversations ranked by relevance, as a tool.

Invariants:
- Read-only: it changes nothing and asks no one.
- Ranking goes through a ``MemorySearch`` (anything with ``search(query, k, mode)``
  returning ``SearchHit``s in view paths). The default is the agent's view: words
  (the full-text index, ``vfs/search/lexical.py``), meaning (vectors), or both fused
  (``vfs/embeddings/hybrid.py``), as ``mode`` says.
- Errors are values: an empty or wordless query, a bad ``k`` or ``mode``, is an
  ``is_error`` result saying how to fix the call; no query can crash or hang it.
- ``hybrid`` (the default) whose embedder fails falls back to ``lexical`` and says
  so in the result; ``semantic`` asked for explicitly fails with the embedder's line.
"""

from __future__ import annotations

from typing import Any, Protocol

from memagent.agent.tools.base import ToolResult, schema
from memagent.vfs import (
    DEFAULT_SEARCH_MODE,
    SEARCH_MODES,
    AgentView,
    EmbedderError,
    SearchHit,
    SearchMode,
    check_search_mode,
    render_search,
)

DEFAULT_K = 10
MAX_K = 50
NAMES = frozenset({"search_memory"})

DEFINITIONS: list[dict[str, Any]] = [
    {"name": "search_memory",
     "description": "Rank memory files and past conversations (/conversations/) by relevance to a "
                    "question, by words and by meaning; each hit has its path and a snippet. Use it when you "
                    "do not know which file holds something, then read_file the best hits. A question in other "
                    "words than the file's is found too (mode hybrid, the default); for exact text or patterns "
                    "use grep.",
     "input_schema": schema({
         "query": {"type": "string", "description": "Words to look for, e.g. 'meeting notes format'"},
         "k": {"type": "integer", "minimum": 1, "maximum": MAX_K, "default": DEFAULT_K,
               "description": "Most results to return."},
         "mode": {"type": "string", "enum": list(SEARCH_MODES), "default": DEFAULT_SEARCH_MODE,
                  "description": "lexical: the words (stemmed); semantic: the meaning; hybrid: both fused."}},
        ["query"])},
]

# For a small model's prompt (the compact profile): the query only; k and mode keep their defaults.
COMPACT_DEFINITIONS: list[dict[str, Any]] = [
    {"name": "search_memory",
     "description": "Find memory files and past conversations (/conversations/) about a question, by "
                    "meaning and words; then read_file the best hits.",
     "input_schema": schema({"query": {"type": "string"}}, ["query"])},
]


class MemorySearch(Protocol):
    """What ranks files for the tool (the view's search, or another ranker)."""

    def search(self, query: str, *, k: int = DEFAULT_K, mode: SearchMode = DEFAULT_SEARCH_MODE) -> list[SearchHit]: ...


class SearchTools:
    """``ToolProvider`` of ``search_memory`` over one agent's view (or another ranker)."""

    def __init__(self, view: AgentView, *, ranker: MemorySearch | None = None, compact: bool = False) -> None:
        self.view = view
        self.ranker: MemorySearch = ranker if ranker is not None else view
        self.compact = compact

    def definitions(self) -> list[dict[str, Any]]:
        return COMPACT_DEFINITIONS if self.compact else DEFINITIONS

    def run(self, name: str, args: dict[str, Any]) -> ToolResult:
        return self._search(**args)

    def _search(self, query: str, k: int = DEFAULT_K, mode: str = DEFAULT_SEARCH_MODE) -> ToolResult:
        if not isinstance(query, str) or not query.strip():
            return ToolResult("query is empty; give a few words to look for, e.g. 'meeting notes format'", True)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            return ToolResult(f"k must be a whole number from 1 to {MAX_K}; leave it out for {DEFAULT_K}", True)
        if mode not in SEARCH_MODES:
            return ToolResult(f"mode must be one of {', '.join(SEARCH_MODES)}; leave it out for {DEFAULT_SEARCH_MODE}",
                              True)
        chosen = check_search_mode(mode)
        try:
            hits = self.ranker.search(query, k=k, mode=chosen)
        except EmbedderError as exc:
            if chosen != "hybrid":
                raise
            # The embedder is down or misconfigured: words still find things, so recall
            # degrades instead of vanishing; the note says why the ranking is words only.
            hits = self.ranker.search(query, k=k, mode="lexical")
            return ToolResult(f"(search by meaning is unavailable, so these are matches by words only: {exc})\n"
                              + render_search(hits, query[:200]))
        return ToolResult(render_search(hits, query[:200]))
