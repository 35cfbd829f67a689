"""What a rule of the scanner is, and the builders the tables use.

A rule (``_Rule``) is data: the kind it reports (``what``, as it reads in a sentence), a
regex whose named group ``s`` is the secret, anchors (``_Anchor``: literals that locate
every match, see the package's speed invariant), an optional confirmer (a predicate on the
match and the whole text) and whether it is generic (reported only where no specific rule
fired).

Invariants:
- ``_regex`` compiles nothing: a ``_LazyRegex`` compiles its pattern on first use, so
  importing the tables costs no regex compilation (~0.2 s for ~330 patterns).
- An anchor's ``key`` is where ``engine._Candidates`` keeps its occurrences; two anchors
  with one key are found by one search.
- This module imports nothing of the package; every other module may import it.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast


class _LazyRegex:
    """A regex compiled the first time it is used.

    Compiling the scanner's ~330 regexes took ~0.2 s of every process's start-up,
    though a process that reads memory never scans, and a scan tries a rule's regex
    only where one of its anchors occurs. On first use the compiled pattern's
    methods are copied onto the instance, so later calls cost what the pattern's own
    do (no ``__getattr__`` after the first).
    """

    def __init__(self, source: str, flags: int = 0) -> None:
        self.pattern = source
        self.flags = flags

    def __getattr__(self, name: str) -> Any:
        compiled = re.compile(self.pattern, self.flags)
        for attr in ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split",
                     "groupindex", "groups"):
            setattr(self, attr, getattr(compiled, attr))
        return getattr(compiled, name)


def _regex(source: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile``, deferred to the pattern's first use (``_LazyRegex``)."""
    return cast("re.Pattern[str]", _LazyRegex(source, flags))


@dataclass(frozen=True)
class _Anchor:
    """A literal that locates every match of a rule.

    Every match starts where an occurrence of ``literal`` starts (in the folded
    text when ``folded``), or, when ``back_over`` is set, where the run of
    ``back_over`` characters that ends at the occurrence starts, if that run is
    1 to ``back_max`` characters long. With ``followed_by`` (a one-character
    literal only), only occurrences followed by one of its characters count: they
    are found by a regex of their own, not with the groups (``_followed``), so a
    literal as common as ":" costs a C-speed pass, not a Python step per occurrence.
    """

    literal: str
    folded: bool = False
    back_over: str = ""
    back_max: int = 0
    followed_by: str = ""
    # Where _Candidates keeps this anchor's occurrences (computed once: starts() reads it per rule per scan).
    key: tuple[bool, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        literal = self.literal if not self.followed_by else f"{self.literal}[{self.followed_by}]"
        object.__setattr__(self, "key", (self.folded, literal))


@dataclass(frozen=True)
class _Rule:
    what: str  # the kind, as it reads in a sentence: "an AWS access key id"
    regex: re.Pattern[str]  # the secret part is the named group "s" when present
    anchors: tuple[_Anchor, ...]  # between them, locate every match (see _Anchor)
    confirm: Callable[[re.Match[str], str], bool] | None = None
    generic: bool = False  # only reported on lines where no specific rule fired


def _prefixed(
    what: str, prefixes: Iterable[str], body: str, confirm: Callable[[re.Match[str], str], bool] | None = None
) -> _Rule:
    """A token that starts a word with one of ``prefixes`` and goes on as ``body`` (a regex)."""
    prefixes = tuple(prefixes)
    alternatives = "|".join(re.escape(p) for p in prefixes)
    return _Rule(what, _regex(rf"\b(?P<s>(?:{alternatives}){body})"), _starts(*prefixes), confirm)


def _starts(*literals: str) -> tuple[_Anchor, ...]:
    """Every match starts with one of ``literals``, case as written."""
    return tuple(_Anchor(lit) for lit in literals)


def _starts_folded(*words: str) -> tuple[_Anchor, ...]:
    """Every match of a ``(?i)`` rule starts with one of ``words``, in any case."""
    return tuple(_Anchor(word, folded=True) for word in words)


# Pieces more than one table uses.
# What a URL's scheme is made of: the run a "://" anchor steps back over (back_over).
_SCHEME_CHARS = string.ascii_lowercase + string.digits + "+.-"
# A password that starts with "-" after a flag that always takes a value (docker login -p, redis-cli
# -a): anything but another flag (-x, --no-auth-warning, --password-stdin).
_DASHED_VALUE = r"-(?![-A-Za-z]+(?:[\s=]|$))\S{5,200}"
