"""Glob patterns over virtual paths.

Semantics: ``*`` and ``?`` stay within one path segment, ``[...]`` is a character
class, ``**`` as a whole segment matches zero or more segments, ``{a,b}`` expands
before matching. A pattern without ``/`` matches the basename at any depth (so
``*.md`` finds every Markdown file); a pattern with ``/`` is anchored at the base
directory. Matching is case-sensitive, like the paths themselves.
"""

from __future__ import annotations

import re
from functools import lru_cache

from memagent.vfs.errors import InvalidPattern

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


@lru_cache(maxsize=256)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """A regex matched against paths relative to the base directory (no leading ``/``)."""
    alts = []
    for p in expand_braces(pattern):
        body = _single_regex(p.lstrip("/") if p.startswith("/") else p)
        if "/" not in p.strip("/") and not p.startswith("/") and p != "**":
            body = "(?:[^/]+/)*" + body  # bare names match at any depth
        alts.append(body)
    try:
        return re.compile("^(?:" + "|".join(alts) + ")$")
    except re.error as exc:
        raise InvalidPattern(f"glob {pattern!r} is not valid: {exc}") from None


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
