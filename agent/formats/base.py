"""What every export/import format shares: the protocol, results, and path rules.

A format translates between an agent's memory files (``{"/AGENTS.md": text, ...}``,
the store's absolute paths) and another harness's project layout (``{"CLAUDE.md":
bytes, ...}``, relative POSIX paths). Invariants:

- Formats are pure: they neither read nor write disks or databases. The CLI reads
  the store and the source, calls a format, and writes or stores the result.
- Nothing is dropped silently: whatever a target cannot hold (export) or memagent
  cannot hold (import) becomes a ``Note`` naming the file and saying why.
- Every result also says where each file came from (``origins``), so the manifest
  (``manifest.py``) can give back byte for byte what a translation loses.
- Output paths are relative, use ``/``, never start with ``/`` and have no ``.``,
  ``..`` or empty segments (``check_output_path``); the CLI checks again before
  writing.
- Format-owned locations are written only by the format itself: no memory file is
  ever copied to a configuration location of another program
  (``validators.config_location``: ``.git/``, ``.envrc``, ``.claude/``..., in the
  segments that rule names, ``knowledge/.git/`` and ``skills/x/.git/`` too) nor to one
  of the format's own ``reserved`` paths; the export is refused instead, naming
  every such file (``export_plain``, and ``export_agent`` over every memory path
  whatever folder a layout moves it to). On import such entries are never taken
  into memory: a plain file or a skill's file there is left behind with a note
  (``import_plain``, ``shared.import_skills``). Both sides ask the same rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from memagent.validators import config_location
from memagent.validators.config_files import safe_path
from memagent.vfs import RESERVED_PREFIXES, InvalidPath, Rule, normalize_file

# Files of an agent's memory: absolute store path -> text.
Memory = dict[str, str]
# Files of a harness project: relative path -> bytes.
Tree = dict[str, bytes]

# Folders and files no harness layout means and no agent needs: skipped on import.
JUNK_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", "__MACOSX",
                       ".mypy_cache", ".pytest_cache", ".ruff_cache", ".idea", ".vscode"})
JUNK_FILES = frozenset({".DS_Store", "Thumbs.db", "desktop.ini"})


class FormatError(Exception):
    """A translation that cannot be done at all; the message is one line for a person."""


@dataclass(frozen=True)
class Note:
    """Something that could not be carried over: ``path`` (a memory or source path) and why."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass
class ExportOptions:
    """What an export may need besides the files."""

    agent: str = "agent"
    # Tools each MCP server offers, from ``--probe`` (server -> names); a server
    # missing here was not probed.
    offered: dict[str, list[str]] = field(default_factory=dict)
    # The agent's approval rules, in order (``formats/approval.py`` carries them).
    rules: list[Rule] = field(default_factory=list)


@dataclass
class ExportResult:
    files: Tree
    notes: list[Note] = field(default_factory=list)
    # output path -> the memory paths it was made from
    origins: dict[str, set[str]] = field(default_factory=dict)

    def add(self, out: str, data: str | bytes, *sources: str) -> None:
        check_output_path(out)
        if out in self.files:
            raise FormatError(f"two files would be written to {out} ({', '.join(sorted(sources))} and "
                              f"{', '.join(sorted(self.origins.get(out, set())))}); rename one with `memagent fs mv`")
        self.files[out] = data.encode("utf-8") if isinstance(data, str) else data
        self.origins[out] = set(sources)


@dataclass
class ImportResult:
    files: Memory
    notes: list[Note] = field(default_factory=list)
    # memory path -> the source paths it was made from
    origins: dict[str, set[str]] = field(default_factory=dict)

    def add(self, path: str, content: str, *sources: str) -> None:
        if path in self.files:
            self.notes.append(Note(sorted(sources)[0] if sources else path,
                                   f"also maps to {path}, which is already taken; not imported"))
            return
        self.files[path] = content
        self.origins[path] = set(sources)


class Format(Protocol):
    """One harness layout. ``name`` is what ``--format`` takes."""

    name: str
    title: str  # e.g. "Claude Code"

    def export(self, memory: Mapping[str, str], options: ExportOptions) -> ExportResult: ...

    def import_(self, tree: Mapping[str, bytes]) -> ImportResult: ...

    def detect(self, tree: Mapping[str, bytes]) -> int:
        """How sure this layout is what ``tree`` holds: 0 (not at all) to 100."""
        ...


_SEGMENT_BAD = re.compile(r"[\x00-\x1f\x7f\\]")


def check_output_path(path: str) -> None:
    """Refuse an output path that could leave the output folder."""
    parts = path.split("/")
    if (not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts)
            or _SEGMENT_BAD.search(path) or re.match(r"^[A-Za-z]:", path)):
        raise FormatError(f"refusing to write {path!r}: output paths stay inside the output folder")


def rel(path: str) -> str:
    """A memory path as a relative output path: ``/knowledge/a.md`` -> ``knowledge/a.md``."""
    return path.lstrip("/")


def decode(data: bytes) -> str | None:
    """UTF-8 text (a leading byte-order mark kept), or None for binary data."""
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def is_junk(path: str) -> bool:
    parts = path.split("/")
    return any(p in JUNK_DIRS for p in parts[:-1]) or parts[-1] in JUNK_FILES


def is_hidden(path: str) -> bool:
    return any(p.startswith(".") for p in path.split("/"))


def import_plain(tree: Mapping[str, bytes], claimed: set[str], result: ImportResult) -> None:
    """Import every file no layout rule claimed as a plain memory file at the same path.

    Hidden files (``.env``, ``.gitignore``...) and junk folders stay behind with a
    note: they are tool configuration or secrets, not an agent's knowledge.
    """
    for src in sorted(tree):
        if src in claimed:
            continue
        if is_junk(src):
            continue
        if is_hidden(src):
            result.notes.append(Note(src, "hidden file not imported (harness settings or secrets, not memory)"))
            continue
        if (reader := config_location(src)) is not None:
            result.notes.append(Note(src, f"not imported: it is configuration read by {reader}, and memory "
                                          "holds none"))
            continue
        path = "/" + src
        if path.startswith(RESERVED_PREFIXES):
            result.notes.append(Note(src, f"{path.split('/')[1]}/ is reserved in memagent (shared memory); "
                                          "not imported"))
            continue
        text = decode(tree[src])
        if text is None:
            result.notes.append(Note(src, "binary file not imported (memory holds UTF-8 text only)"))
            continue
        result.add(path, text, src)


def export_plain(memory: Mapping[str, str], claimed: set[str], result: ExportResult,
                 reserved: tuple[str, ...] = ()) -> None:
    """Write every memory file no layout rule claimed at the same relative path.

    ``reserved`` are output paths or folder prefixes (ending in ``/``) the layout
    itself uses; a memory file there would be read as harness configuration, so
    the export refuses rather than write it.
    """
    plain = [p for p in sorted(memory) if p not in claimed]
    refuse_config(plain, reserved)
    for path in plain:
        result.add(rel(path), memory[path], path)


def _reserved_by(out: str, reserved: tuple[str, ...]) -> str | None:
    for r in reserved:
        if out == r or (r.endswith("/") and out.startswith(r)):
            return r
    return None


def refuse_config(memory_paths: Iterable[str], reserved: tuple[str, ...] = ()) -> None:
    """Refuse, naming each, memory files that an export would copy where a program reads configuration.

    A database written before the write rule existed (or before it looked past the
    first segment) may still hold ``/.git/config`` or ``/knowledge/.git/config``; an
    export must never hand it to git (nor ``/.claude/...`` to Claude Code...), in
    whatever folder the format puts it. ``reserved`` adds the target format's own locations.
    """
    bad: list[str] = []
    for path in memory_paths:
        out = rel(path)
        if config_location(out) is not None or _reserved_by(out, reserved) is not None:
            bad.append(path)
    if not bad:
        return
    first = bad[0]
    fixed = safe_path(first)
    fixed = fixed if fixed != first else "/knowledge" + first  # only the format's own location: move it down
    shown = ", ".join(bad[:8]) + (f" and {len(bad) - 8} more" if len(bad) > 8 else "")
    raise FormatError(f"refusing to export {shown}: in the exported folder {'it' if len(bad) == 1 else 'they'} "
                      "would be read as configuration by git, a tool or the target harness (and could run "
                      f"commands); move or delete {'it' if len(bad) == 1 else 'each'} first, e.g. "
                      f"`memagent fs mv {first} {fixed}` or `memagent fs rm {first}`")


def refuse_config_import(files: Iterable[str]) -> None:
    """Refuse, naming each, memory paths an import would create in a configuration location.

    Only a crafted source gets here (a manifest entry, a layout mapped by hand):
    a plain file there is already left behind by ``import_plain``.
    """
    bad: list[str] = []
    for path in files:
        try:
            norm = normalize_file(path)
        except InvalidPath:
            norm = path
        if config_location(norm) is not None:
            bad.append(path)
    if bad:
        raise FormatError("refusing to import: " + ", ".join(sorted(bad)) + " would be memory files where git, a "
                          "tool or a harness reads configuration; memory holds none (remove "
                          f"{'it' if len(bad) == 1 else 'them'} from the source); nothing was stored")


def skill_layout(memory: Mapping[str, str]) -> dict[str, list[tuple[str, str]]]:
    """Skills by name: (memory path, path inside the skill folder) for each of its files.

    ``/skills/x.md`` becomes ``x/SKILL.md``; ``/skills/x/...`` keeps its place.
    Files directly in ``/skills/`` that are not ``.md`` files are not skills and are
    left to ``export_plain``.
    """
    skills: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(memory):
        if not path.startswith("/skills/"):
            continue
        rest = path[len("/skills/"):]
        if "/" in rest:
            name, inner = rest.split("/", 1)
            skills.setdefault(name, []).append((path, inner))
        elif rest.endswith(".md"):
            name = rest[:-3]
            if f"/skills/{name}/SKILL.md" in memory:
                raise FormatError(f"/skills/{name}.md and /skills/{name}/SKILL.md are both the skill '{name}'; "
                                  "remove or rename one")
            skills.setdefault(name, []).append((path, "SKILL.md"))
    return skills


def subagent_paths(memory: Mapping[str, str]) -> list[str]:
    return sorted(p for p in memory if re.fullmatch(r"/subagents/[^/]+\.md", p))


def suggest(text: str) -> str:
    """The nearest valid skill or subagent name: lowercase, other characters become single hyphens."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:64].strip("-")
    return slug or "imported"


def mapping(value: object) -> dict[str, Any]:
    """``value`` when it is a JSON/TOML/YAML object, else an empty one (tolerant reading)."""
    return value if isinstance(value, dict) else {}


def text_or(value: object, default: str) -> str:
    return value if isinstance(value, str) else default
