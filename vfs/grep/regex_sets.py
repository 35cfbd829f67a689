"""Character sets spelled so Python's ``re`` has nothing to warn about, meaning unchanged.

Python's ``re`` emits a ``FutureWarning`` (printed on stderr, in the middle of a
command's output or a chat screen) for a set that starts with ``[`` (``[[a]``) and
for ``--``, ``&&``, ``~~`` and ``||`` inside a set: a future version may read them
as nested sets and set operations. Today each of them is a literal character, and
the escaped spelling (``[\\[a]``, ``[a&\\&]``) means the same without the warning.
Glob classes (``**/[[a-z]*.md``) reach ``re`` the same way once translated.

Invariants:
- ``unambiguous(p, flags)`` is a pattern whose parse tree is exactly ``p``'s: both
  are parsed and compared, and ``p`` itself comes back whenever they differ, the
  rewrite still warns, or either does not parse (the caller's compile then reports
  the error as before). So the rewrite can never change what matches.
- Nothing here lets a warning out: ``p`` is parsed with warnings silenced, only to
  compare.
- ``posix_class(p)`` names a POSIX bracket class (``[[:space:]]``) in ``p``: grep
  users type them by habit, and Python reads them as a plain set of characters.
"""

from __future__ import annotations

import re
import re._parser as sre_parse
import warnings
from functools import lru_cache

# What to write instead of each POSIX class, in Python's syntax.
POSIX_CLASSES = {
    "alnum": "[^\\W_]", "alpha": "[^\\W\\d_]", "blank": "[ \\t]", "cntrl": "[\\x00-\\x1f\\x7f]",
    "digit": "\\d", "graph": "[!-~]", "lower": "[a-z]", "print": "[ -~]",
    "punct": "[!-/:-@\\[-`{-~]", "space": "\\s", "upper": "[A-Z]", "word": "\\w", "xdigit": "[0-9A-Fa-f]",
}
_POSIX = re.compile(r"\[\^?[^\]]*?\[:(" + "|".join(POSIX_CLASSES) + r"):\]")


def _escape_sets(pattern: str) -> str:
    """``pattern`` with ``[`` and the second of a doubled ``-&~|`` escaped inside sets."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
        elif c == "(" and pattern.startswith("(?#", i):
            end = pattern.find(")", i)
            end = n if end == -1 else end + 1
            out.append(pattern[i:end])
            i = end
        elif c == "[":
            out.append("[")
            i += 1
            if pattern.startswith("^", i):
                out.append("^")
                i += 1
            first = True  # a "]" right after "[" or "[^" is a literal, as in re
            while i < n:
                c = pattern[i]
                if c == "\\":
                    out.append(pattern[i : i + 2])
                    i += 2
                elif c == "]" and not first:
                    out.append("]")
                    i += 1
                    break
                elif c == "[":
                    out.append("\\[")
                    i += 1
                elif c in "-&~|" and not first and pattern.startswith(c, i + 1):
                    out.append(c + "\\" + c)
                    i += 2
                else:
                    out.append(c)
                    i += 1
                first = False
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _tree(pattern: str, flags: int) -> tuple[str, int, tuple[tuple[str, int], ...]]:
    parsed = sre_parse.parse(pattern, flags)
    return repr(parsed.data), parsed.state.flags, tuple(sorted(parsed.state.groupdict.items()))


@lru_cache(maxsize=512)
def unambiguous(pattern: str, flags: int = 0) -> str:
    """``pattern``, respelled without what ``re`` warns about; see the module docstring."""
    if "[" not in pattern:
        return pattern
    rewritten = _escape_sets(pattern)
    if rewritten == pattern:
        return pattern
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)  # a rewrite that still warns is no use
            new = _tree(rewritten, flags)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            old = _tree(pattern, flags)
    except (re.error, FutureWarning, RecursionError, OverflowError, ValueError):
        return pattern
    return rewritten if new == old else pattern


def posix_class(pattern: str) -> str | None:
    """The name of the first POSIX class written inside a set of ``pattern``, if any."""
    found = _POSIX.search(pattern)
    return found.group(1) if found else None
