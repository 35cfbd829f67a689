"""Reading an import source (a folder or a ``.zip``) without trusting it.

``read_source(path)`` returns the source's regular files as ``{relative path:
bytes}``. Invariants:

- Refused, each by name, and then nothing at all is returned: symbolic links,
  device files, FIFOs and sockets; absolute names, drive letters, backslashes,
  control characters and ``..`` segments (zip-slip); duplicate or encrypted zip
  entries; and sources over the caps on entry count, total size and compression
  ratio (zip bombs). Zip sizes are checked from the headers *and* while
  decompressing, so a header that lies cannot make us inflate more than the cap.
- Nothing is ever extracted to disk: entries are read into memory, bounded.
- Version-control and cache folders (``.git``, ``node_modules``...) are not read.
- A zip whose entries all sit in one top-level folder (how downloads usually
  look) is read as if that folder were the root.
"""

from __future__ import annotations

import os
import re
import stat
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .base import JUNK_DIRS, FormatError, Note

MAX_ENTRIES = 10_000
MAX_TOTAL_BYTES = 100 * 1024 * 1024
MAX_FILE_BYTES = 8 * 1024 * 1024  # bigger files cannot be memory (1 MiB cap); skipped unread
MAX_RATIO = 100  # uncompressed / compressed, for entries and archives of any real size
RATIO_FLOOR = 1024 * 1024  # below this many bytes, high ratios are ordinary text
LAYOUT_DIRS = frozenset({".claude", ".opencode", ".codex", ".agents", "skills", "subagents", "knowledge"})

_BAD_CHARS = re.compile(r"[\x00-\x1f\x7f\\]")


class UnsafeSource(FormatError):
    """The source breaks a safety rule; ``refusals`` names each offending entry."""

    def __init__(self, source: str, refusals: list[str]) -> None:
        self.refusals = refusals
        shown = refusals[:20] + ([f"... and {len(refusals) - 20} more"] if len(refusals) > 20 else [])
        super().__init__(f"refused to import {source}: {len(refusals)} unsafe entr"
                         f"{'y' if len(refusals) == 1 else 'ies'}; nothing was stored\n"
                         + "\n".join(f"  {r}" for r in shown))


@dataclass
class Source:
    tree: dict[str, bytes] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)
    kind: str = "folder"  # or "zip"


def name_problem(name: str) -> str | None:
    """Why an entry name may not be read (zip-slip and friends), or None."""
    if _BAD_CHARS.search(name):
        return "has a backslash or control character in its name"
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "is an absolute path"
    if any(part == ".." for part in name.split("/")):
        return "goes up with '..' (it would land outside the import)"
    return None


def _ratio_too_high(size: int, compressed: int) -> bool:
    return size > RATIO_FLOOR and size > MAX_RATIO * max(compressed, 1)


Step = Callable[[int, int], None]  # (files read, files to read), for a progress bar


def read_zip(path: Path, step: Step | None = None) -> Source:
    source = Source(kind="zip")
    refusals: list[str] = []
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise FormatError(f"{path} is not a readable zip archive ({exc}); give a folder or a .zip file") from None
    with archive:
        infos = archive.infolist()
        if len(infos) > MAX_ENTRIES:
            raise UnsafeSource(str(path), [f"the archive has {len(infos)} entries, over the cap of {MAX_ENTRIES}"])
        declared = sum(i.file_size for i in infos)
        if declared > MAX_TOTAL_BYTES:
            raise UnsafeSource(str(path), [f"the archive would unpack to {declared} bytes, over the cap of "
                                           f"{MAX_TOTAL_BYTES}"])
        seen: set[str] = set()
        wanted: list[zipfile.ZipInfo] = []
        for info in infos:
            name = info.filename
            mode = info.external_attr >> 16
            if (why := name_problem(name)) is not None:
                refusals.append(f"{name!r} {why}")
                continue
            kind = stat.S_IFMT(mode) if info.create_system == 3 else 0
            if kind == stat.S_IFLNK:
                refusals.append(f"{name!r} is a symbolic link")
                continue
            if kind in (stat.S_IFCHR, stat.S_IFBLK, stat.S_IFIFO, stat.S_IFSOCK):
                refusals.append(f"{name!r} is a device file, FIFO or socket")
                continue
            if info.is_dir():
                continue
            if info.flag_bits & 0x1:
                refusals.append(f"{name!r} is encrypted")
                continue
            clean = "/".join(p for p in name.split("/") if p not in ("", "."))
            if clean in seen:
                refusals.append(f"{name!r} appears twice in the archive")
                continue
            seen.add(clean)
            if _ratio_too_high(info.file_size, info.compress_size):
                refusals.append(f"{name!r} unpacks {info.file_size // max(info.compress_size, 1)} times its "
                                f"size (cap {MAX_RATIO}x): a zip bomb")
                continue
            if any(part in JUNK_DIRS for part in clean.split("/")[:-1]):
                continue
            if info.file_size > MAX_FILE_BYTES:
                source.notes.append(Note(clean, f"{info.file_size} bytes, too big to be memory; not read"))
                continue
            wanted.append(info)
        if not refusals and _ratio_too_high(declared, path.stat().st_size):
            refusals.append(f"the archive unpacks {declared // max(path.stat().st_size, 1)} times its size "
                            f"(cap {MAX_RATIO}x): a zip bomb")
        if refusals:
            raise UnsafeSource(str(path), refusals)
        total = 0
        for done, info in enumerate(wanted, 1):
            try:
                with archive.open(info) as handle:
                    data = handle.read(info.file_size + 1)
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
                raise UnsafeSource(str(path), [f"{info.filename!r} is damaged or lies about its size ({exc})"]) \
                    from None
            total += len(data)
            if len(data) > info.file_size or total > MAX_TOTAL_BYTES:
                raise UnsafeSource(str(path), [f"{info.filename!r} unpacks to more than its header says"])
            source.tree["/".join(p for p in info.filename.split("/") if p not in ("", "."))] = data
            if step is not None:
                step(done, len(wanted))
    _strip_single_root(source)
    return source


def _strip_single_root(source: Source) -> None:
    tops = {p.split("/", 1)[0] for p in source.tree}
    if len(tops) != 1 or any("/" not in p for p in source.tree):
        return
    (top,) = tops
    if top in LAYOUT_DIRS:
        return
    source.tree = {p.split("/", 1)[1]: data for p, data in source.tree.items()}


def read_folder(root: Path, step: Step | None = None) -> Source:
    source = Source(kind="folder")
    refusals: list[str] = []
    wanted: list[tuple[str, Path]] = []
    entries = 0
    total = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        keep = []
        for d in sorted(dirnames):
            full = base / d
            relname = full.relative_to(root).as_posix()
            if os.path.islink(full):
                refusals.append(f"{relname!r} is a symbolic link")
            elif d not in JUNK_DIRS:
                keep.append(d)
        dirnames[:] = keep
        for f in sorted(filenames):
            full = base / f
            relname = full.relative_to(root).as_posix()
            if (why := name_problem(relname)) is not None:
                refusals.append(f"{relname!r} {why}")
                continue
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                refusals.append(f"{relname!r} is a symbolic link")
                continue
            if not stat.S_ISREG(info.st_mode):
                refusals.append(f"{relname!r} is a device file, FIFO or socket")
                continue
            entries += 1
            if entries > MAX_ENTRIES:
                raise UnsafeSource(str(root), [f"the folder has more than {MAX_ENTRIES} files (the cap)"])
            if info.st_size > MAX_FILE_BYTES:
                source.notes.append(Note(relname, f"{info.st_size} bytes, too big to be memory; not read"))
                continue
            total += info.st_size
            if total > MAX_TOTAL_BYTES:
                raise UnsafeSource(str(root), [f"the folder holds more than {MAX_TOTAL_BYTES} bytes (the cap)"])
            wanted.append((relname, full))
    if refusals:
        raise UnsafeSource(str(root), refusals)
    for done, (relname, full) in enumerate(wanted, 1):
        with open(full, "rb") as handle:
            source.tree[relname] = handle.read(MAX_FILE_BYTES + 1)
        if step is not None:
            step(done, len(wanted))
    return source


def read_source(path: Path, step: Step | None = None) -> Source:
    """The files of a folder or a zip archive, or ``UnsafeSource`` naming every refused entry."""
    if path.is_dir():
        return read_folder(path, step)
    if path.is_file():
        return read_zip(path, step)
    raise FormatError(f"{path} does not exist; give a folder or a .zip file to import")
