"""Path rules for the virtual filesystem.

Invariants of ``normalize``: the result is absolute, never leaves ``/``, has no empty,
``.`` or ``..`` segments and no trailing slash (except the root itself), and
``normalize(normalize(p)) == normalize(p)``. It holds no character a person cannot
see or that changes how the rest displays: no control characters (C0, DEL, C1 such
as NEL), no format characters (bidirectional overrides and isolates, zero-width
characters), no line or paragraph separators, no surrogates or unassigned code
points (Unicode categories Cc, Cf, Zl, Zp, Cs, Cn), so a name shown in a diff or an
approval is the name stored. Every refusal raises ``InvalidPath`` with a one-line
message that names the rule (and the character, by code point), so callers need
one ``except``.

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
    bad = _invisible(path)
    if bad:
        raise InvalidPath(f"path {_show(path)} contains {bad}; remove it")
    if "\\" in path:
        raise InvalidPath(f"path {_show(path)} contains a backslash; use / to separate folders")
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
