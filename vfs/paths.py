"""Path rules for the virtual filesystem.

Invariants of ``normalize``: the result is absolute, never leaves ``/``, has no empty,
``.`` or ``..`` segments and no trailing slash (except the root itself), and
``normalize(normalize(p)) == normalize(p)``. It holds no character a person cannot
see or that changes how the rest displays: no control characters (C0, DEL, C1 such
as NEL), no format characters (bidirectional overrides and isolates, zero-width
characters), no line or paragraph separators, no surrogates or unassigned code
points (Unicode categories Cc, Cf, Zl, Zp, Cs, Cn), so a name shown in a diff or an
approval is the name stored. The result is in Unicode NFC, so two spellings that
render the same (``café`` composed or as ``e`` + U+0301) are one path, and an
approval rule (normalised here too) sees the form it is matched against. It holds
no character a reader takes for a folder separator (``SEPARATOR_LOOKALIKES``: U+2215
DIVISION SLASH, U+FF0F FULLWIDTH SOLIDUS, ...; and ``%2F``/``%5C``, which an export or a
URL turns into one), so every ``/`` a person sees in a path is a folder. Every refusal
raises ``InvalidPath`` with a one-line message that names the rule (and the character,
by code point), so callers need one ``except``.

``lookalike_key`` is what a person reads of one name (case, width and compatibility
forms, accents on Latin, Greek and Cyrillic letters, Cyrillic and Greek letters shaped
like Latin ones, dash and space variants, trailing spaces and dots all fold away). The
normaliser does not apply it (``Notes.md`` and ``notes.md`` are two paths); the store
refuses a NEW name whose key equals an existing sibling's (``vfs/files/mutations.py``).

It also holds the two names every layer shares about where a file lives: the
reserved mounts (``MOUNTS``: top-level folders of an agent's view that belong to
other scopes) and the store scope names (``scope_name``/``parse_scope``). Both are
defined here and only here, so a new mount or scope kind is one edit; a test
(tests/test_scope_names.py) refuses scope names built by hand in product code.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal, get_args

from memagent.vfs.errors import InvalidPath

MAX_PATH_BYTES = 1024
MAX_SEGMENT_BYTES = 255

# Top-level folders of an agent's view that are other scopes (``AgentView`` mounts
# them): an agent's own file never lives below them, an import never writes there.
Mount = Literal["user", "org", "conversations"]
MOUNTS: tuple[Mount, ...] = get_args(Mount)
# The same, as view-path prefixes ("/user/", ...), for ``str.startswith``.
RESERVED_PREFIXES: tuple[str, ...] = tuple(f"/{m}/" for m in MOUNTS)

# What a store scope belongs to: an agent's own files, a user's or an organisation's
# shared files, an agent's rendered past conversations, or an agent's settings (its
# approval rules: no view mounts it, so no memory tool reaches it).
ScopeKind = Literal["agent", "user", "org", "conversations", "settings"]
SCOPE_KINDS: tuple[ScopeKind, ...] = get_args(ScopeKind)


def scope_name(kind: ScopeKind, ident: str) -> str:
    """The store scope of ``kind`` for ``ident``: ``scope_name("agent", "ada")`` is ``agent:ada``.

    The only place a scope name is put together; ``parse_scope`` takes it apart.
    """
    if kind not in SCOPE_KINDS:
        raise ValueError(f"unknown scope kind {kind!r}; expected one of {', '.join(SCOPE_KINDS)}")
    return f"{kind}:{ident}"


def scope_kind(scope: str) -> ScopeKind | None:
    """The kind of a scope name, or None for a string that is not one (a trusted caller's bare name)."""
    try:
        return parse_scope(scope)[0]
    except ValueError:
        return None


def parse_scope(scope: str) -> tuple[ScopeKind, str]:
    """``agent:ada`` -> ``("agent", "ada")``; a ValueError names a string that is not a scope."""
    head, sep, ident = scope.partition(":")
    for kind in SCOPE_KINDS:
        if sep and head == kind:
            return kind, ident
    raise ValueError(f"{scope!r} is not a scope name; expected <kind>:<name> with kind one of "
                     f"{', '.join(SCOPE_KINDS)}")

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Unicode categories refused anywhere in a path, and how a message calls them.
_INVISIBLE = {
    "Cc": "a control character",
    "Cf": "an invisible formatting character",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
    "Cs": "a lone surrogate, not valid Unicode text",
    "Cn": "an unassigned code point",
}


# Characters a reader takes for "/" or "\\" (Unicode's confusables for the two): refused
# anywhere in a path. Not the CJK letters that resemble a stroke (KATAKANA NO, 丿):
# they are ordinary words' letters.
SEPARATOR_LOOKALIKES = frozenset(
    "\u2215\u2044\uff0f\u29f8\u2571\u27cb\u2f03\u3033\u31d3\u1735\u2041"  # slashes
    "\u2216\u29f5\u29f9\ufe68\uff3c\u2572\u27cd\u31d4\u2f02"  # backslashes
)
# "%2F" and "%5C": a separator once anything URL-decodes the name (an export, a link).
_PERCENT_SEPARATOR = re.compile(r"%(?:2f|5c)", re.IGNORECASE)


def _show(path: str) -> str:
    # Never echo a 2 KB path or raw control characters back into a one-line error.
    shown = path.encode("unicode_escape").decode("ascii")
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _invisible(path: str) -> str | None:
    """Why ``path`` holds a refused character, naming the first by code point; None if none."""
    if path.isascii():
        found = _CONTROL.search(path)
        chars = found.group() if found else ""
    else:
        chars = path
    for ch in chars:
        kind = _INVISIBLE.get(unicodedata.category(ch))
        if kind:
            name = unicodedata.name(ch, "")
            return f"U+{ord(ch):04X}{f' {name}' if name else ''} ({kind})"
    return None


def normalize(path: str) -> str:
    """Return the canonical form of ``path`` or raise ``InvalidPath``.

    Relative paths are taken relative to the root, so ``AGENTS.md`` is ``/AGENTS.md``.
    """
    if not isinstance(path, str):
        raise InvalidPath(f"path must be a string, got {type(path).__name__}")
    if path == "":
        raise InvalidPath("path is empty; give an absolute path such as /AGENTS.md")
    if "\x00" in path:
        raise InvalidPath(f"path {_show(path)} contains a NUL byte; remove it")
    bad = _invisible(path)  # before NFC: a lone surrogate has no normal form
    if bad:
        raise InvalidPath(f"path {_show(path)} contains {bad}; remove it")
    if not path.isascii():
        # NFC composes only assigned, visible characters: nothing _invisible refuses appears.
        path = unicodedata.normalize("NFC", path)
        ch = next((c for c in path if c in SEPARATOR_LOOKALIKES), None)
        if ch is not None:
            raise InvalidPath(
                f"path {_show(path)} contains U+{ord(ch):04X} {unicodedata.name(ch, '')}, which looks like "
                "a folder separator; use / between folders, or another character in a name")
    if "\\" in path:
        raise InvalidPath(f"path {_show(path)} contains a backslash; use / to separate folders")
    if "%" in path and _PERCENT_SEPARATOR.search(path):
        raise InvalidPath(f"path {_show(path)} contains a percent-encoded separator (%2F or %5C), which reads as "
                          "a folder once decoded; use / between folders, or another character in a name")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES * 4:
        # Cheap early refusal before splitting absurd inputs.
        raise InvalidPath(f"path is longer than {MAX_PATH_BYTES} bytes; use a shorter path")
    parts: list[str] = []
    for seg in path.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if not parts:
                raise InvalidPath(
                    f"path {_show(path)} goes above the root with '..'; "
                    "paths must stay inside the agent's folder"
                )
            parts.pop()
            continue
        try:
            size = len(seg.encode("utf-8"))
        except UnicodeEncodeError:
            raise InvalidPath(f"path {_show(path)} is not valid Unicode text") from None
        if size > MAX_SEGMENT_BYTES:
            raise InvalidPath(
                f"a name in path {_show(path)} is {size} bytes; each name may have at most "
                f"{MAX_SEGMENT_BYTES} bytes"
            )
        parts.append(seg)
    result = "/" + "/".join(parts)
    if len(result.encode("utf-8")) > MAX_PATH_BYTES:
        raise InvalidPath(f"path is longer than {MAX_PATH_BYTES} bytes; use a shorter path")
    return result


def normalize_file(path: str) -> str:
    """Normalise a path that must name a file (not the root, not ending in ``/``)."""
    norm = normalize(path)
    if norm == "/" or path.endswith("/"):
        raise InvalidPath(f"{_show(path)} names a directory; give a file path such as /notes.md")
    return norm


def dir_prefix(directory: str) -> str:
    """``/a/b`` -> ``/a/b/``; ``/`` stays ``/``: the prefix every path under it starts with."""
    return directory if directory.endswith("/") else directory + "/"


def parent(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


def basename(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def is_under(path: str, directory: str) -> bool:
    return directory == "/" or path == directory or path.startswith(dir_prefix(directory))


# Cyrillic and Greek letters drawn like Latin ones, and dashes drawn like "-": a name in
# them reads as the Latin name. (Unicode's confusables.txt is far larger; these are the
# ones a keyboard or a paste puts in a name.)
_HOMOGLYPHS = str.maketrans({
    **dict(zip("АВЕКМНОРСТХЅІЈҮԚԜаеорсухѕіјһӏԁԛԝ", "ABEKMHOPCTXSIJYQWaeopcyxsijhldqw", strict=True)),
    **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧον", "ABEZHIKMNOPTYXov", strict=True)),
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2212\ufe63\uff0d", "-"),
})
# Scripts whose accents are marks on a letter a reader can overlook (knówledge, knowledge̸);
# in Devanagari, Arabic, Hebrew, Thai... a mark is part of the word and is kept.
_FOLDED_SCRIPTS = ("LATIN", "GREEK", "CYRILLIC")
_SPACES = re.compile(r"\s+")


def _mark_folds(base: str) -> bool:
    """Whether a combining mark on ``base`` (the letter before it, "" at the start) is dropped."""
    return base == "" or base.isascii() or unicodedata.name(base, "").startswith(_FOLDED_SCRIPTS)


def lookalike_key(name: str) -> str:
    """What a reader sees of one path segment: two names with the same key look alike.

    Folds NFKC forms (fullwidth ``ｋ``, ligatures, non-breaking and thin spaces), the
    homoglyphs above, combining marks on Latin, Greek and Cyrillic letters, case
    (``casefold``: ``Straße`` is ``STRASSE``), runs of spaces to one, and trailing spaces
    and dots. ``notes.md``/``notes2.md``, ``a-b``/``a_b``, ``log0``/``logo`` keep distinct keys.
    """
    if name.isascii():
        # Most names, and every sibling a new name is compared with: the same steps,
        # without the Unicode passes that leave ASCII unchanged (a path holds no tab).
        key = name.lower()
        if "  " in key:
            key = _SPACES.sub(" ", key)
        return key.rstrip(" .").lstrip(" ")
    key = unicodedata.normalize("NFKC", name).translate(_HOMOGLYPHS)
    if not key.isascii():
        kept: list[str] = []
        base = ""
        for ch in unicodedata.normalize("NFD", key):
            if unicodedata.category(ch) in ("Mn", "Me"):
                if _mark_folds(base):
                    continue
            else:
                base = ch
            kept.append(ch)
        key = "".join(kept)
    key = _SPACES.sub(" ", key.casefold())
    return key.rstrip(" .").lstrip(" ")
