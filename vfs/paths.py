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
"""

from __future__ import annotations

import re
import unicodedata

from memagent.vfs.errors import InvalidPath

MAX_PATH_BYTES = 1024
MAX_SEGMENT_BYTES = 255

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
