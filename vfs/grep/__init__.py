"""grep: the exact matcher, and what narrows the files and lines it reads.

engine.py is the matcher every search path agrees with (``scan_plain`` defines the answer,
a Python ``re`` search within each line; ``scan`` answers the same, bounded); regex_info.py
reads what a pattern guarantees about its matches; fts.py turns that into the database's
pre-filter (the trigram index); prefilter.py is the pre-filter and exact RE2 form of the
patterns no trigram narrows, over regex_tree.py (a pattern's node tree and its RE2 and
Postgres syntax); regex_sets.py respells sets so ``re`` prints no FutureWarning; globbing.py
is glob. The store's ``grep`` (``vfs/files/grepping.py``) runs them. Invariants:

- Whatever narrows the candidates first (a glob, a database index, RE2 or Postgres'
  regex), the answer comes from ``scan`` on the real contents: a fast path only drops
  files or lines that could not match, and never changes what a match is.
- A pattern's facts only skip work, conservatively; nothing here runs unbounded.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from memagent.vfs.lazy import face

if TYPE_CHECKING:
    from memagent.vfs.grep.engine import DEFAULT_LIMIT, plan, render, scan, scan_plain
    from memagent.vfs.grep.fts import Features, candidates, detect
    from memagent.vfs.grep.globbing import compile_glob, glob_matcher, literal_prefix
    from memagent.vfs.grep.prefilter import choose
    from memagent.vfs.grep.regex_info import MIN_RUN, Needle, info, safe_char

# Public name -> its module in this package, imported on first use (PEP 562, as
# vfs/__init__.py does), so importing one module of the package loads no other.
_LAZY: dict[str, str] = {
    "DEFAULT_LIMIT": "engine",
    "plan": "engine",
    "render": "engine",
    "scan": "engine",
    "scan_plain": "engine",
    "Features": "fts",
    "candidates": "fts",
    "detect": "fts",
    "compile_glob": "globbing",
    "glob_matcher": "globbing",
    "literal_prefix": "globbing",
    "choose": "prefilter",
    "MIN_RUN": "regex_info",
    "Needle": "regex_info",
    "info": "regex_info",
    "safe_char": "regex_info",
}

if not TYPE_CHECKING:
    __getattr__ = face(__name__, _LAZY, globals())


__all__ = ["DEFAULT_LIMIT", "Features", "MIN_RUN", "Needle", "candidates", "choose", "compile_glob", "detect",
           "glob_matcher", "info", "literal_prefix", "plan", "render", "safe_char", "scan", "scan_plain"]
