"""Export an agent to another harness's layout and import one back.

One module per format (``folder``, ``claude_code``, ``deepagents``, ``opencode``,
``codex``), each a ``Format`` (``base.py``); ``FORMATS`` is the registry the
``export``/``import`` commands read. Invariants:

- This package only translates: it imports the standard library, PyYAML,
  ``memagent.validators`` and ``memagent.vfs`` and nothing above them; the CLI
  reads the store and the disk (``archive.py`` reads sources safely).
- ``export_agent`` adds the manifest (``manifest.py``) whenever translating back
  would not give the same files, so export then import is lossless for every
  format; ``import_tree`` applies it only while the exported files are unchanged.
- Whatever a format does, ``export_agent`` exports no memory whose path has a
  configuration location in any segment the rule names (``validators.config_location``,
  the write rule: ``/.git/...``, ``/knowledge/.git/...``; refused by name before the
  layout runs) and writes no memory file verbatim into one; ``import_tree`` gives
  back no memory path there (a crafted manifest is refused by name): the formats'
  own checks (``base.export_plain``, ``base.import_plain``) are the rule, these the
  backstop.
"""

from __future__ import annotations

from collections.abc import Mapping

from memagent.validators import config_location

from .approval import carry
from .base import (
    ExportOptions,
    ExportResult,
    Format,
    FormatError,
    ImportResult,
    Note,
    refuse_config,
    refuse_config_import,
    rel,
)
from .claude_code import ClaudeCodeFormat
from .codex import CodexFormat
from .deepagents import DeepAgentsFormat
from .folder import FolderFormat
from .manifest import MANIFEST, apply, build, lost
from .opencode import OpenCodeFormat

FORMATS: dict[str, Format] = {
    f.name: f for f in (FolderFormat(), ClaudeCodeFormat(), DeepAgentsFormat(), OpenCodeFormat(), CodexFormat())
}


def get_format(name: str) -> Format:
    if name not in FORMATS:
        raise FormatError(f"no format named {name!r}; choose one of: {', '.join(FORMATS)}")
    return FORMATS[name]


def detect(tree: Mapping[str, bytes]) -> Format:
    """The layout ``tree`` most likely holds (the manifest of our own export decides when present)."""
    if MANIFEST in tree:
        import json

        try:
            named = json.loads(tree[MANIFEST]).get("format")
        except (ValueError, AttributeError):
            named = None
        if isinstance(named, str) and named in FORMATS:
            return FORMATS[named]
    return max(FORMATS.values(), key=lambda f: f.detect(tree))


def export_agent(fmt: Format, memory: Mapping[str, str], options: ExportOptions) -> ExportResult:
    """``fmt``'s layout of ``memory``, plus the manifest of what the layout cannot hold."""
    # Every memory path by the write rule, wherever the layout would put it (an old
    # database's /skills/x/.git/config lands in .claude/skills/x/.git/config).
    refuse_config(sorted(memory))
    result = fmt.export(memory, options)
    carry(fmt.name, options.rules, result)  # the approval rules, where the target has an equivalent
    # Backstop: an output in a configuration location must be the format's own
    # translation, never a memory file copied to the same place.
    refuse_config(sorted({src for out, sources in result.origins.items() for src in sources
                          if rel(src) == out and config_location(out) is not None}))
    back = fmt.import_(result.files)
    manifest = build(fmt.name, memory, result, back)
    if manifest is not None:
        result.add(MANIFEST, manifest)
        kept = lost(manifest)
        result.notes.append(Note(MANIFEST, f"keeps {len(kept)} file(s) the layout cannot hold exactly, so "
                                           f"`memagent import` gives them back: {', '.join(kept[:8])}"
                                           + (" ..." if len(kept) > 8 else "")))
    return result


def import_tree(fmt: Format, tree: Mapping[str, bytes]) -> ImportResult:
    """Memory files from ``tree`` in ``fmt``'s layout (the manifest applied when it matches)."""
    files = {p: d for p, d in tree.items() if p != MANIFEST}
    result = fmt.import_(files)
    if MANIFEST in tree:
        apply(tree[MANIFEST], fmt.name, files, result)
    refuse_config_import(result.files)
    return result


__all__ = ["FORMATS", "MANIFEST", "ExportOptions", "ExportResult", "Format", "FormatError", "ImportResult", "Note",
           "detect", "export_agent", "get_format", "import_tree"]
