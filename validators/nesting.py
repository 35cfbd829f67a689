"""Nesting depth of JSON and YAML flow text, measured before any parser sees it.

Invariants:
- ``MAX_DEPTH`` (64) is the deepest nesting any memory file may have: tools.json
  needs 5 levels and frontmatter 3, so 64 refuses nothing real, and it keeps the
  recursive parsers (``json``, PyYAML's composer, ``jsonschema``) and our own
  recursive walks far from Python's recursion limit whatever the file says.
- ``too_deep`` is linear in the text: regex passes skip quoted strings
  (possessive quantifiers, so an unterminated string cannot make them
  backtrack); well-formed text is answered by at most ``MAX_DEPTH`` C-speed
  passes over its bracket skeleton, and only deep or unbalanced text pays for
  the exact per-bracket pass. Text with at most ``MAX_DEPTH`` opening brackets
  is answered at once.
- It counts brackets outside quoted strings. For JSON that is exactly the
  nesting; for YAML it can only under-count (a plain scalar such as ``don't``
  hides brackets behind an apostrophe), so YAML's event parser stays the
  authority and this is just a cheap early refusal.
"""

from __future__ import annotations

import re
from typing import Literal

MAX_DEPTH = 64

_STRING = {
    "json": r'"(?:[^"\\]++|\\.)*+"?',
    # YAML single-quoted strings escape a quote by doubling it, not with a backslash.
    "yaml": r'"(?:[^"\\]++|\\.)*+"?|\'(?:[^\']++|\'\')*+\'?',
}
_TOKENS = {syntax: re.compile(rf"{string}|[\[\]{{}}]", re.DOTALL) for syntax, string in _STRING.items()}
# Everything but the brackets outside strings: removed to leave the bracket skeleton.
_NOT_BRACKETS = {
    "json": re.compile(rf'{_STRING["json"]}|[^\[\]{{}}"]++', re.DOTALL),
    "yaml": re.compile(rf"{_STRING['yaml']}|[^\[\]{{}}\"']++", re.DOTALL),
}
_INNERMOST = re.compile(r"[\[{][\]}]")


def too_deep(text: str, syntax: Literal["json", "yaml"], limit: int = MAX_DEPTH) -> int | None:
    """Offset of the first bracket that opens level ``limit + 1``, or None if none does."""
    if text.count("[") + text.count("{") <= limit:
        return None
    # Fast path, all in C: strip innermost pairs from the bracket skeleton ``limit``
    # times. Nothing left means balanced and no deeper than ``limit``; otherwise the
    # exact pass below finds where (or finds only unbalanced brackets: None).
    skeleton = _NOT_BRACKETS[syntax].sub("", text)
    for _ in range(limit):
        skeleton, removed = _INNERMOST.subn("", skeleton)
        if not skeleton:
            return None
        if not removed:
            break
    depth = 0
    for m in _TOKENS[syntax].finditer(text):
        char = m.group()
        if char in "[{":
            depth += 1
            if depth > limit:
                return m.start()
        elif char in "]}":
            depth = max(0, depth - 1)
    return None


def line_and_column(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of ``offset`` in ``text``."""
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1
