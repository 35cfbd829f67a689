"""The ``folder`` format: the memory files exactly as stored, one file per path.

Reference: README "What memory looks like" (our own layout; no other harness).
Invariants: export writes ``/a/b.md`` to ``a/b.md`` byte for byte and import
reads it back the same way, so the round trip is the identity; hidden files,
junk folders and binary files of a hand-made folder are listed, not imported.
"""

from __future__ import annotations

from collections.abc import Mapping

from .base import ExportOptions, ExportResult, ImportResult, export_plain, import_plain


class FolderFormat:
    name = "folder"
    title = "plain folder"

    def export(self, memory: Mapping[str, str], options: ExportOptions) -> ExportResult:
        result = ExportResult({})
        export_plain(memory, set(), result)
        return result

    def import_(self, tree: Mapping[str, bytes]) -> ImportResult:
        result = ImportResult({})
        import_plain(tree, set(), result)
        return result

    def detect(self, tree: Mapping[str, bytes]) -> int:
        # The fallback: any folder can be read as plain files; one with our own
        # layout (AGENTS.md, our tools.json shape) a little more surely.
        score = 10
        if "AGENTS.md" in tree:
            score += 10
        if b'"mcp_servers"' in tree.get("tools.json", b""):
            score += 30
        return score
