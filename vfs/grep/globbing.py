"""Glob patterns over virtual paths.

Semantics: ``*`` and ``?`` stay within one path segment, ``[...]`` is a character
class, ``**`` as a whole segment matches zero or more segments, ``{a,b}`` expands
before matching. A pattern without ``/`` matches the basename at any depth (so
``*.md`` finds every Markdown file); a pattern with ``/`` is anchored at the base
directory. Matching is case-sensitive, like the paths themselves.

``glob_matcher`` is what the store matches with: runs of ``**`` segments collapse
to one (``**/**`` matches exactly what ``**`` does), and the pattern runs on RE2,
which takes time linear in the path whatever the pattern, through the exact
translation of ``prefilter.linear`` (the same Python regex, so the same answer).
``compile_glob`` keeps the plain Python regex: the reference the tests compare
with, which can backtrack for minutes on ``*a*a*a*a*b`` over a long name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from memagent.vfs.errors import InvalidPattern
from memagent.vfs.grep.regex_sets import unambiguous

if TYPE_CHECKING:
    from memagent.vfs.grep import prefilter

MAX_BRACE_EXPANSIONS = 256


def expand_braces(pattern: str) -> list[str]:
    """``a{b,c}d`` -> ``[abd, acd]``; nested braces work; unbalanced ones are literal."""
    depth = 0
    start = -1
    for i, ch in enumerate(pattern):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                inner = pattern[start + 1 : i]
                options = _split_top(inner)
                if len(options) < 2:
                    continue
                out: list[str] = []
                for opt in options:
                    out.extend(expand_braces(pattern[:start] + opt + pattern[i + 1 :]))
                    if len(out) > MAX_BRACE_EXPANSIONS:
                        raise InvalidPattern(
                            f"pattern {pattern!r} expands to more than "
                            f"{MAX_BRACE_EXPANSIONS} alternatives; simplify the braces"
                        )
                return out
    return [pattern]


def _split_top(inner: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        cur.append(ch)
    parts.append("".join(cur))
    return parts


def _segment_regex(seg: str) -> str:
    out, i = [], 0
    while i < len(seg):
        ch = seg[i]
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            j = seg.find("]", i + 2 if i + 1 < len(seg) and seg[i + 1] in "!^" else i + 1)
            if j == -1:
                out.append(re.escape(ch))
            else:
                body = seg[i + 1 : j]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _single_regex(pattern: str) -> str:
    segs = [s for s in pattern.split("/") if s not in ("", ".")]
    if not segs:
        return ""
    out = []
    for n, seg in enumerate(segs):
        last = n == len(segs) - 1
        if seg == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
        else:
            out.append(_segment_regex(seg) + ("" if last else "/"))
    return "".join(out)


def _glob_regex(pattern: str, collapse: bool) -> re.Pattern[str]:
    alts = []
    for p in expand_braces(pattern):
        bare = "/" not in p.strip("/") and not p.startswith("/") and p != "**"
        body = _single_regex(_collapse_stars(p) if collapse else p.lstrip("/"))
        if bare:
            body = "(?:[^/]+/)*" + body  # bare names match at any depth
        alts.append(body)
    try:
        source = "^(?:" + "|".join(alts) + ")$"
        # A class such as [[a-z] would make re print a FutureWarning: spelled without it.
        return re.compile(unambiguous(source))
    except re.error as exc:
        # exc.msg, not str(exc): its position is in the translated regex, not in the glob.
        raise InvalidPattern(f"glob {pattern!r} is not valid: {exc.msg}; fix the [...] class") from None


def _collapse_stars(p: str) -> str:
    """``a/**/**/b`` -> ``a/**/b``: consecutive ``**`` segments match what one does."""
    segs = [s for s in p.split("/") if s not in ("", ".")]
    out = [s for i, s in enumerate(segs) if not (s == "**" and i and segs[i - 1] == "**")]
    return "/".join(out)


@lru_cache(maxsize=256)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """A regex matched against paths relative to the base directory (no leading ``/``).

    The plain reference: Python's backtracking ``re``; the store uses ``glob_matcher``.
    """
    return _glob_regex(pattern, collapse=False)


@dataclass(frozen=True)
class GlobMatcher:
    """``match(relative_path)``: does the glob match? Linear time when ``linear`` is set."""

    pattern: str
    regex: re.Pattern[str]
    linear: prefilter.Linear | None  # the exact RE2 form of ``regex``

    def match(self, path: str) -> bool:
        if self.linear is None:
            return self.regex.match(path) is not None
        if self.linear.compiled is None:
            return False  # the translation proved that nothing matches
        try:
            data = path.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: no stored path has one
            return self.regex.match(path) is not None
        return self.linear.find(data) >= 0


@lru_cache(maxsize=256)
def glob_matcher(pattern: str) -> GlobMatcher:
    """The matcher the store uses: same answers as ``compile_glob``, without backtracking.

    RE2 is missing only if the declared dependency is; then Python's regex (with
    ``**`` runs collapsed) is all there is.
    """
    # Imported here: the RE2 translation is heavy and only glob and grep need it.
    from memagent.vfs.grep import prefilter

    regex = _glob_regex(pattern, collapse=True)
    found = prefilter.linear(regex.pattern, regex.flags)
    return GlobMatcher(pattern, regex, found if isinstance(found, prefilter.Linear) else None)


def path_filter(pattern: str | None) -> Callable[[str], bool] | None:
    return glob_matcher(pattern).match if pattern else None


def literal_prefix(pattern: str) -> str:
    """The leading directories of an anchored pattern that contain no wildcard.

    Used to narrow the database scan; ``""`` when the pattern can match anywhere.
    """
    if "/" not in pattern.strip("/") or "{" in pattern:
        return ""
    prefix = []
    for seg in pattern.strip("/").split("/")[:-1]:
        if any(c in seg for c in "*?[]{}") or seg in ("", ".", ".."):
            break
        prefix.append(seg)
    return "/".join(prefix)
