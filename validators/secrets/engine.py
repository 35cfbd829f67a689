"""The engine: the table in order, the anchor search, and the scans.

``_RULES`` is the one table, assembled from ``providers``, ``context`` and ``heldout5``
in the order the rules were added. The rest finds candidate starts (the anchor groups,
``_Candidates``, ``_fold``), tries each rule there (``_fast_matches``), skips what is no
finding (``_skipped``: ``exemptions`` and the rule's confirmer) and reports:
``scan_secrets``, ``scan_path``, ``scan_message``, ``redact_path``. ``_scan_reference`` is
the plain ``finditer`` scan the tests compare with; ``_present_anchors`` the RE2 pre-check
(which anchors occur at all: ``_Candidates`` searches only their groups).

Invariants:
- The table's order changes no finding (matches are collected as a set and sorted by
  line); it fixes only which generic kind a line reports when several generic rules fire
  there (``_GENERIC_ORDER``: first appearance).
- Importing builds nothing: the anchor groups (``_group_of()``, ``_all_groups()``,
  ``_followed_finders()``) and RE2's alternations and sets (``_anchor_finders()``, ``_anchor_sets()``) are built on the
  first scan and cached; the regexes compile on first use (``rule._regex``).
- The base64-JSON rule scans the decoded text with ``_find`` again; each level is 3/4 as
  long, so it ends.
- Problems are built from fixed strings and a rule's ``what`` only.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, NamedTuple

from ..base import LineIndex, Problem
from .context import CONTEXT_RULES, PASSWORD_VALUE_RULES
from .exemptions import _placeholder, _public_by_design
from .heldout5 import HELDOUT5_RULES
from .providers import PROVIDER_RULES
from .rule import _Anchor, _regex, _Rule, _starts

KIND = "secret"

_ADVICE = (
    "Secrets must never be stored in memory: remove it (it is not repeated here). Keep the "
    "credential in an environment variable or a secret manager and refer to it by name "
    "(in tools.json as a ${VAR} reference)."
)


# --- the table ------------------------------------------------------------------
#
# The rules in the order they were added (the order of the one table this package was split
# from). The base64-JSON rule is defined here, not in context.py, because its confirmer
# scans the decoded text with _find, this module's: the one rule that needs the engine.


def _encoded_json_secret(m: re.Match[str], text: str) -> bool:
    """base64 of JSON (a dockerconfigjson, a service account key) holding a credential: the
    decoded text is scanned with the same rules. Each level is 3/4 as long, so it ends."""
    value = m.group("s")
    if len(value) > 65536:
        return False
    try:
        raw = base64.b64decode(value.replace("-", "+").replace("_", "/") + "=" * (-len(value) % 4))
        decoded = raw.decode("utf-8")
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return False
    return bool(_find(decoded))


_ENCODED_JSON_RULE = _Rule(
    "a password, secret or token assigned in plain text",
    # base64 of JSON (a dockerconfigjson): decoded and scanned with these same rules.
    _regex(r"(?<![A-Za-z0-9+/_.-])(?P<s>eyJ[A-Za-z0-9+/_-]{16,}={0,2})(?![A-Za-z0-9+/=_.-])"),
    _starts("eyJ"),
    _encoded_json_secret,
    generic=True,
)

_RULES: tuple[_Rule, ...] = (
    *PROVIDER_RULES,
    *CONTEXT_RULES,
    _ENCODED_JSON_RULE,
    *PASSWORD_VALUE_RULES,
    *HELDOUT5_RULES,
)

_GENERIC_ORDER = {what: i for i, what in enumerate(dict.fromkeys(r.what for r in _RULES if r.generic))}


# --- finding candidate starts -------------------------------------------------

# A pass over the text costs about the same whatever literal it looks for, so
# anchors sharing a "hinge" character are found together in one pass. Hinges are
# characters uncommon in prose, preferred in this order: every occurrence of a
# hinge costs one attempt of its group's regex (in C, cheap). An anchor with none
# of them is searched on its own (re still finds it by its literal prefix).
_HINGES = "_-:.A"


class _Literal(NamedTuple):
    text: str
    hinge: int  # index of the group's hinge character in text
    # The group's other literals that can sit on the same hinge too: the finder
    # reports only the first alternative that matches, so these are checked.
    others: tuple[tuple[str, int], ...]


@dataclass(frozen=True, eq=False)  # hashed by identity: _subgroup's cache key (a field hash cost ~50 µs)
class _Group:
    folded: bool
    # Starts with a literal (the hinge), so re searches for it with its fast
    # literal-prefix loop; matches where one of the literals sits on the hinge.
    # Each literal ends its alternative with an empty group, so the number of
    # the last group that matched says which literal it was: literals[n - 1].
    finder: re.Pattern[str]
    literals: tuple[_Literal, ...]
    keys: frozenset[tuple[bool, str]]  # (folded, literal) of each literal: where _Candidates keeps it


def _hinge_index(literal: str) -> int | None:
    for char in _HINGES:
        if char in literal:
            return literal.index(char)
    return None


def _can_share_hinge(a: str, i: int, b: str, j: int) -> bool:
    """Whether ``a`` and ``b`` can both occur with a[i] and b[j] at one position."""
    return all(a[i + d] == b[j + d] for d in range(max(-i, -j), min(len(a) - i, len(b) - j)))


def _group(folded: bool, literals: list[str]) -> _Group:
    hinged = [(lit, _hinge_index(lit) or 0) for lit in literals]
    # Alternatives that go on past the hinge begin with a literal character, so
    # re rejects most of them with one comparison; the look-behind confirming
    # the part before the hinge comes last. Literals that end at the hinge can
    # only be confirmed by a look-behind: one per length (a look-behind must
    # have a fixed width), each an alternation re also rejects cheaply.
    alternatives: list[str] = []
    order: list[tuple[str, int]] = []  # literal of each empty group, in group order
    ending_at_hinge: dict[int, list[tuple[str, int]]] = {}
    for lit, i in hinged:
        if i + 1 < len(lit):
            alternatives.append(re.escape(lit[i + 1 :]) + (f"(?<={re.escape(lit)})" if i else "") + "()")
            order.append((lit, i))
        else:
            ending_at_hinge.setdefault(len(lit), []).append((lit, i))
    for _, members in sorted(ending_at_hinge.items()):
        alternatives.append("(?<=" + "|".join(re.escape(lit) + "()" for lit, _ in members) + ")")
        order.extend(members)
    lit0, i0 = hinged[0]
    finder = _regex(f"{re.escape(lit0[i0])}(?:{'|'.join(alternatives)})")
    entries = tuple(
        _Literal(lit, i, tuple((o, j) for o, j in order if o != lit and _can_share_hinge(lit, i, o, j)))
        for lit, i in order
    )
    return _Group(folded, finder, entries, frozenset((folded, e.text) for e in entries))


def _groups(rules: Iterable[_Rule]) -> dict[tuple[bool, str], _Group]:
    """(folded, literal) -> the group that finds it, for every anchor of ``rules``."""
    members: dict[tuple[bool, str], list[str]] = {}
    for rule in rules:
        for anchor in rule.anchors:
            if anchor.followed_by:  # found by its own regex (_followed)
                continue
            lit = anchor.literal
            i = _hinge_index(lit)
            key = (anchor.folded, lit if i is None else lit[i])
            if lit not in members.setdefault(key, []):
                members[key].append(lit)
    out: dict[tuple[bool, str], _Group] = {}
    for (folded, _), literals in members.items():
        group = _group(folded, literals)
        out.update({(folded, lit): group for lit in literals})
    return out


@cache
def _group_of() -> dict[tuple[bool, str], _Group]:
    """Built on the first scan, not at import: it costs ~30 ms (``_LazyRegex``'s reason)."""
    return _groups(_RULES)


@cache
def _all_groups() -> tuple[_Group, ...]:
    return tuple({id(group): group for group in _group_of().values()}.values())


@lru_cache(maxsize=1024)
def _subgroup(group: _Group, live: frozenset[tuple[bool, str]]) -> _Group:
    """``group`` narrowed to the literals ``live`` holds: the others do not occur in the
    text, and a big group's regex costs an attempt at every hinge character (the "-"
    group's 53 literals: ~0.2 ms of a 4.4 KB note, most of its scan)."""
    return _group(group.folded, [lit.text for lit in group.literals if (group.folded, lit.text) in live])


@cache
def _rules_by_key() -> dict[tuple[bool, str], tuple[int, ...]]:
    """Anchor key -> the positions in ``_RULES`` of the rules that anchor locates."""
    out: dict[tuple[bool, str], list[int]] = {}
    for i, rule in enumerate(_RULES):
        for anchor in rule.anchors:
            if i not in out.setdefault(anchor.key, []):
                out[anchor.key].append(i)
    return {key: tuple(positions) for key, positions in out.items()}


def _followed(rules: Iterable[_Rule]) -> dict[tuple[bool, str], re.Pattern[str]]:
    """anchor key -> the regex finding the anchor, for every anchor with ``followed_by``."""
    out: dict[tuple[bool, str], re.Pattern[str]] = {}
    for anchor in (a for rule in rules for a in rule.anchors if a.followed_by):
        # One character: matches cannot overlap, so finditer sees every occurrence.
        assert len(anchor.literal) == 1, anchor
        after = "".join(re.escape(c) for c in anchor.followed_by)
        out[anchor.key] = _regex(f"{re.escape(anchor.literal)}(?=[{after}])")
    return out


@cache
def _followed_finders() -> dict[tuple[bool, str], re.Pattern[str]]:
    return _followed(_RULES)


# Non-ASCII characters that (?i) matches as an ASCII letter (Unicode simple case
# folding); each maps to one character, so replacing them keeps offsets.
_FOLDS_TO_ASCII = {"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"}


def _fold(text: str) -> str:
    """``text`` lower-cased for anchor search, with the same length (offsets carry over).

    str.lower() alone is not enough: U+0130 lower-cases to two characters, and
    U+0131 and U+017F are already lower case yet (?i) matches them as i and s.
    Other non-ASCII characters become "?" (no anchor contains one); going
    through the ASCII codec is also several times faster than str.lower() on
    text that holds any non-ASCII character.
    """
    if text.isascii():
        return text.lower()
    for char, ascii_letter in _FOLDS_TO_ASCII.items():
        if char in text:  # a one-character `in` runs at memchr speed; a regex class is 10x slower
            text = text.replace(char, ascii_letter)
    return text.encode("ascii", "replace").decode("ascii").lower()


class _Candidates:
    """Candidate match starts in one text: every group of anchors searched once, up front."""

    def __init__(self, text: str, present: frozenset[tuple[bool, str]] | None = None) -> None:
        """``present``: the anchor keys known to occur in ``text`` (``_present_anchors``);
        only their groups are searched, each for those of its literals only. None: all."""
        self._text = text
        folded = _fold(text)
        # Anchors not searched for occur nowhere: absent keys read as no occurrence.
        self._found: dict[tuple[bool, str], list[int]] = {}
        followed = _followed_finders()
        if present is None:
            groups: Iterable[_Group] = _all_groups()
            keys: Iterable[tuple[bool, str]] = followed
        else:  # the groups of the present anchors only, each once, in no particular order
            group_of = _group_of()
            groups = {id(g): g for key in present if (g := group_of.get(key)) is not None}.values()
            keys = (key for key in present if key in followed)
        for group in groups:
            if present is not None and len(group.literals) > 2:
                live = group.keys & present
                if len(live) < len(group.keys):
                    group = _subgroup(group, live)
            self._search(group, folded if group.folded else text)
        for key in keys:
            self._found[key] = [m.start() for m in followed[key].finditer(folded if key[0] else text)]

    def rules(self) -> list[_Rule]:
        """The rules one of whose anchors occurs, in the table's order: no other can match."""
        by_key = _rules_by_key()
        positions = {i for key, at in self._found.items() if at for i in by_key.get(key, ())}
        return [_RULES[i] for i in sorted(positions)]

    def starts(self, rule: _Rule) -> list[int]:
        """Sorted, distinct positions that include every start of a match of ``rule``."""
        found = [self._placed(anchor, at) for anchor in rule.anchors if (at := self._found.get(anchor.key))]
        if len(found) <= 1:  # the usual case, already sorted and distinct
            return found[0] if found else []
        return sorted(set().union(*found))

    def _occurrences(self, folded: bool, literal: str) -> list[int]:
        """Every start of ``literal``, overlapping ones included, ascending."""
        return self._found.get((folded, literal), [])

    def _placed(self, anchor: _Anchor, occurrences: list[int]) -> list[int]:
        """Where matches can start, given where the anchor's literal occurs."""
        if not anchor.back_over:
            return occurrences
        out: list[int] = []
        for at in occurrences:
            # The original text, not the folded one: back_over is matched case-sensitively.
            window = self._text[max(0, at - anchor.back_max - 1) : at]
            run = len(window) - len(window.rstrip(anchor.back_over))
            # A run longer than back_max leaves no allowed start (each would have
            # a run character before it); an empty one leaves none either.
            if 0 < run <= anchor.back_max:
                out.append(at - run)
        return out

    def _search(self, group: _Group, target: str) -> None:
        found: dict[str, list[int]] = {lit.text: [] for lit in group.literals}
        # A group none of whose literals occurs has no hit: str's substring search (C, memchr
        # speed) says so several times faster than the finder's regex search would.
        if len(group.literals) <= 2 and not any(lit.text in target for lit in group.literals):
            for text in found:
                self._found[group.folded, text] = []
            return
        # search() from one past each hinge rather than finditer(): a match may
        # run past the next hinge, and occurrences may overlap ("AKIAKIA...").
        m = group.finder.search(target)
        while m is not None:
            hinge = m.start()
            assert m.lastindex is not None  # every alternative ends with an empty group
            lit = group.literals[m.lastindex - 1]
            found[lit.text].append(hinge - lit.hinge)
            for other, j in lit.others:
                if hinge >= j and target.startswith(other, hinge - j):
                    found[other].append(hinge - j)
            m = group.finder.search(target, hinge + 1)
        for text, positions in found.items():
            self._found[group.folded, text] = positions


def _fast_matches(rule: _Rule, content: str, starts: list[int]) -> Iterator[re.Match[str]]:
    """The matches ``rule.regex.finditer(content)`` returns, trying only ``starts``.

    finditer returns the leftmost match at or after the end of the previous one;
    trying the candidates in order from that end finds the same one, because
    every position where the regex can match is a candidate. ``match(content,
    pos)`` sees the text before ``pos``, so ``\\b`` and look-behinds behave
    as they do in finditer.
    """
    end = 0
    for start in starts:
        if start < end:
            continue
        m = rule.regex.match(content, start)
        if m is not None:
            yield m
            end = m.end()


def _skipped(rule: _Rule, m: re.Match[str], content: str) -> bool:
    """A match that is no finding: a placeholder, unconfirmed, or public by design."""
    secret = m.group("s") if "s" in rule.regex.groupindex else None
    if secret is not None and _placeholder(secret):
        return True
    return bool(rule.confirm and not rule.confirm(m, content)) or _public_by_design(m, content)


def _findings(content: str, matches: Iterable[tuple[_Rule, Iterable[re.Match[str]]]]) -> list[tuple[int, str]]:
    """(line, kind) of each confirmed match, once each, in line order; generic ones only where alone."""
    index: LineIndex | None = None
    found: set[tuple[int, str]] = set()
    generic: set[tuple[int, str]] = set()
    for rule, rule_matches in matches:
        for m in rule_matches:
            if _skipped(rule, m, content):
                continue
            index = index or LineIndex(content)
            (generic if rule.generic else found).add((index.line_of(m.start()), rule.what))
    specific_lines = {line for line, _ in found}
    # One generic problem a line (the first generic rule's kind): they all say the same thing.
    first_generic: dict[int, str] = {}
    for line, what in sorted(generic, key=lambda lw: (lw[0], _GENERIC_ORDER[lw[1]])):
        first_generic.setdefault(line, what)
    found |= {(line, what) for line, what in first_generic.items() if line not in specific_lines}
    return sorted(found)


@cache
def _anchor_finders() -> tuple[Any, Any] | None:
    """Two RE2 alternations, of every case-sensitive anchor literal and of every folded
    one (None without RE2). Every rule is tried only where one of its anchors occurs
    (``_Candidates``), so a text in which neither finds anything has no finding; RE2
    answers that in one linear pass (~0.02 ms for 4.7 KB), where the anchor groups
    take ~0.25 ms in Python's ``re``. Built on first use, like RE2's import."""
    re2 = _re2()
    if re2 is None:  # pragma: no cover - a declared dependency; the scan is exact without it
        return None
    options = re2.Options()
    options.log_errors = False
    patterns = {(folded, pattern) for folded, pattern, _ in _anchor_patterns(re2)}

    def alternation(folded: bool) -> Any:
        return re2.compile("|".join(sorted(p for f, p in patterns if f is folded)), options)

    return alternation(False), alternation(True)


def _re2() -> Any:
    try:
        import re2
    except ImportError:  # pragma: no cover - a declared dependency; the scan is exact without it
        return None
    return re2


def _anchor_patterns(re2: Any) -> list[tuple[bool, str, tuple[bool, str]]]:
    """(folded, RE2 pattern, key) of every anchor: its literal, escaped, and with
    ``followed_by`` the class of characters that must follow it."""
    out: dict[tuple[bool, str, tuple[bool, str]], None] = {}
    for anchor in (a for rule in _RULES for a in rule.anchors):
        pattern = str(re2.escape(anchor.literal))
        if anchor.followed_by:
            pattern += "[" + "".join(re2.escape(c) for c in anchor.followed_by) + "]"
        out[anchor.folded, pattern, anchor.key] = None
    return list(out)


@cache
def _anchor_sets() -> tuple[tuple[Any, tuple[tuple[bool, str], ...]], ...] | None:
    """Two RE2 sets (case-sensitive anchors, folded ones), each with the key of its
    patterns in order: one linear pass says which anchors occur anywhere in a text,
    overlapping ones included (each pattern of a set is matched on its own), so
    ``_Candidates`` searches only the groups that can find something (~0.8 ms of the
    1 ms a 4.4 KB note took with every group searched). None without RE2."""
    re2 = _re2()
    if re2 is None:  # pragma: no cover
        return None
    options = re2.Options()
    options.log_errors = False
    out = []
    patterns = _anchor_patterns(re2)
    for folded in (False, True):
        matcher = re2.Set.SearchSet(options)
        keys = []
        for f, pattern, key in patterns:
            if f is folded:
                matcher.Add(pattern)
                keys.append(key)
        matcher.Compile()
        out.append((matcher, tuple(keys)))
    return tuple(out)


def _present_anchors(text: str) -> frozenset[tuple[bool, str]] | None:
    """The keys of the anchors that occur in ``text`` (empty: nothing can be found), or
    None when that cannot be told quickly (no RE2, a lone surrogate RE2 cannot encode).

    RE2's set answers "no pattern matched" and "the DFA ran out of memory" alike (no
    list), so an empty answer is checked with the plain alternation, which RE2 runs
    with its NFA when the DFA fails: a side that may hold an anchor makes it unknown."""
    sets = _anchor_sets()
    finders = _anchor_finders()
    if sets is None or finders is None:
        return None
    found: set[tuple[bool, str]] = set()
    try:
        folded_text = _fold(text)
        for (matcher, keys), finder, target in zip(sets, finders, (text, folded_text), strict=True):
            hits = matcher.Match(target)
            if hits:
                found.update(keys[i] for i in hits)
            elif finder.search(target) is not None:
                return None
    except Exception:  # noqa: BLE001 - e.g. a lone surrogate RE2 cannot encode: the full scan decides
        return None
    return frozenset(found)


def _no_anchor(text: str) -> bool:
    """True when no rule's anchor occurs in ``text`` (so nothing can be found); False
    when one may, or when this cannot be decided quickly (no RE2, a lone surrogate)."""
    return _present_anchors(text) == frozenset()


def _candidates(text: str) -> _Candidates | None:
    """The candidate starts in ``text``, or None when no anchor occurs in it."""
    present = _present_anchors(text)
    if present is not None and not present:
        return None
    return _Candidates(text, present)


def _find(content: str) -> list[tuple[int, str]]:
    candidates = _candidates(content)
    if candidates is None:
        return []
    return _findings(
        content,
        ((rule, _fast_matches(rule, content, starts)) for rule in candidates.rules()
         if (starts := candidates.starts(rule))),
    )


def scan_secrets(content: str) -> list[Problem]:
    """One problem per (line, kind) found in file content, in line order."""
    return [Problem(f"line {line}", f"contains {what}. {_ADVICE}", KIND) for line, what in _find(content)]


def _secret_spans(text: str) -> list[tuple[int, int]]:
    """Where each confirmed match lies in ``text`` (generic ones included), in rule order."""
    candidates = _candidates(text)
    if candidates is None:
        return []
    spans: list[tuple[int, int]] = []
    for rule in candidates.rules():
        starts = candidates.starts(rule)
        for m in _fast_matches(rule, text, starts) if starts else ():
            if not _skipped(rule, m, text):
                spans.append(m.span())
    return spans


WITHHELD = "[withheld]"


def _segments_with_secrets(path: str) -> list[int]:
    """1-based positions of the path's segments (the parts between slashes, empty ones
    skipped) that hold any part of a credential."""
    spans = _secret_spans(path)
    out: list[int] = []
    at, n = 0, 0
    for part in path.split("/"):
        end = at + len(part)
        if part:
            n += 1
            if any(start < end and at < stop for start, stop in spans):
                out.append(n)
        at = end + 1
    return out


def redact_path(path: str) -> str:
    """``path`` with every segment that holds a credential replaced by ``[withheld]``: how a
    refused path is shown, so the refusal never repeats the secret it refuses."""
    held = set(_segments_with_secrets(path))
    if not held:
        return path
    n, parts = 0, []
    for part in path.split("/"):
        if part:
            n += 1
            part = WITHHELD if n in held else part
        parts.append(part)
    return "/".join(parts)


def _ordinal_list(numbers: list[int]) -> str:
    """'2', '2 and 4', '1, 2 and 4'."""
    words = [str(n) for n in numbers]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def scan_path(path: str) -> list[Problem]:
    """Credentials in a file's path: a name is shown in listings, diffs and prompts.

    The problem names the segment (``segment 2`` of ``/knowledge/<token>.md``), never its
    text, and carries the path as ``redact_path`` shows it, which ``format_problems`` uses."""
    found = list(dict.fromkeys(what for _, what in _find(path)))
    if not found:
        return []
    held = _segments_with_secrets(path)
    noun = "segment" if len(held) == 1 else "segments"
    where = f" ({noun} {_ordinal_list(held)} of the path, shown as {WITHHELD})" if held else ""
    shown = redact_path(path)
    return [
        Problem(
            "path",
            f"the file's path contains {what}{where}. Secrets must never be stored in memory, not even in a "
            "file name: choose a path without it (it is not repeated here).",
            KIND,
            shown_path=shown,
        )
        for what in found
    ]


def scan_message(text: str) -> list[Problem]:
    """Credentials in a revision message (kept forever in the history); locations say "message line N"."""
    return [
        Problem(
            f"message line {line}",
            f"the revision message contains {what}. Write the message without it (it is not repeated "
            "here); messages are kept in the history for good.",
            KIND,
        )
        for line, what in _find(text)
    ]


def _scan_reference(content: str) -> list[Problem]:
    """scan_secrets the slow, obvious way (every regex over the whole text); for tests."""
    found = _findings(content, ((rule, rule.regex.finditer(content)) for rule in _RULES))
    return [Problem(f"line {line}", f"contains {what}. {_ADVICE}", KIND) for line, what in found]
