"""The export manifest: what a translation loses, kept beside it for the way back.

``.memagent-export.json`` lists, for each memory file that ``import(export(files))``
would not give back exactly, its original content (or ``null``: must not exist)
and the sha256 of every exported file it was made from. Invariants:

- It is written only when a translation loses something (the ``folder`` format
  and agents already in each target's canonical shape need none), and it holds
  only those files, so it is small and says plainly what the target cannot hold.
- An entry applies on import only when every file it was made from is still there
  byte for byte and the import uses the same format: once someone edits the
  exported files in the other harness, the translation of their edit wins.
- Harnesses ignore it: a dotfile beside their own configuration.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from .base import ExportResult, ImportResult, Note

MANIFEST = ".memagent-export.json"
VERSION = 1


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build(format_name: str, memory: Mapping[str, str], exported: ExportResult, back: ImportResult) -> bytes | None:
    """The manifest for ``exported`` (``back`` is the import of it), or None when nothing is lost."""
    entries: list[dict[str, Any]] = []
    for path in sorted(set(memory) | set(back.files)):
        want, got = memory.get(path), back.files.get(path)
        if want == got:
            continue
        made_from = {out for out, sources in exported.origins.items() if path in sources}
        made_from |= back.origins.get(path, set())
        made_from &= set(exported.files)
        entries.append({"path": path, "content": want,
                        "from": {out: sha(exported.files[out]) for out in sorted(made_from)}})
    if not entries:
        return None
    doc = {"memagent_export": VERSION, "format": format_name, "restore": entries}
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def lost(data: bytes) -> list[str]:
    """The memory paths a manifest keeps (for the export report)."""
    doc = json.loads(data)
    return [e["path"] for e in doc["restore"] if e["content"] is not None]


def apply(data: bytes, format_name: str, tree: Mapping[str, bytes], result: ImportResult) -> None:
    """Give back what the translation lost, for the entries whose exported files are unchanged."""
    try:
        doc = json.loads(data)
        entries = doc["restore"]
        if doc.get("memagent_export") != VERSION or not isinstance(entries, list):
            raise ValueError
    except (ValueError, KeyError, TypeError):
        result.notes.append(Note(MANIFEST, "not a memagent export manifest this version can read; ignored"))
        return
    if doc.get("format") != format_name:
        result.notes.append(Note(MANIFEST, f"written for the {doc.get('format')!r} format, not {format_name!r}; "
                                           "ignored"))
        return
    stale = 0
    restored: set[str] = set()
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        path, content, made_from = entry.get("path"), entry.get("content"), entry.get("from")
        if (not isinstance(path, str) or not path.startswith("/") or not isinstance(made_from, dict)
                or not (content is None or isinstance(content, str))):
            continue
        if not all(out in tree and sha(tree[out]) == digest for out, digest in made_from.items()):
            stale += 1
            continue
        if content is None:
            result.files.pop(path, None)
            result.origins.pop(path, None)
        else:
            result.files[path] = content
            result.origins[path] = set(made_from) | {MANIFEST}
        restored.add(path)
    # A note about how a file was translated is void once the original is given back exactly
    # (e.g. "add the tools to /tools.json" after /tools.json is restored as it was).
    # The note may name the memory path or the exported file it was read from (OpenCode's
    # ".opencode/agents/x.md: permission not carried over"): void when all it became is restored.
    def void(note: Note) -> bool:
        if note.path in restored:
            return True
        became = {p for p, sources in result.origins.items() if note.path in sources}
        return bool(became) and became <= restored
    result.notes = [n for n in result.notes if not void(n)]
    if stale:
        result.notes.append(Note(MANIFEST, f"{stale} kept original(s) skipped: the exported files they came "
                                           "from were changed, so their translation is imported instead"))
