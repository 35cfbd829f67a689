"""``history``: the revisions of one memory file, newest first, as a tool.

Invariants:
- Read-only: it changes nothing and asks no one.
- The text is ``memagent fs log``'s table (``vfs.render.render_log``): version,
  date, author, approval, size, origin (e.g. ``mcp (claude-code 2.1.0)``) and the
  revision's reason, so a model sees the same provenance a person does.
- Errors are values: a bad path or a missing file is an ``is_error`` result whose
  text says how to fix the call (``ToolBox`` turns ``VfsError`` into one).
"""

from __future__ import annotations

from typing import Any

from memagent.agent.tools.base import ToolResult, schema
from memagent.vfs import AgentView, render_log

DEFAULT_LIMIT = 20
MAX_LIMIT = 200
NAMES = frozenset({"history"})

DEFINITIONS: list[dict[str, Any]] = [
    {"name": "history",
     "description": "List the revisions of a memory file, newest first: version, date, author, how it was "
                    "approved, size, where the change came from and its reason. Deleted files keep their history.",
     "input_schema": schema({
         "file_path": {"type": "string", "description": "Absolute path inside memory, e.g. /AGENTS.md"},
         "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT,
                   "description": "Most revisions to return."}}, ["file_path"])},
]


class HistoryTools:
    """``ToolProvider`` of ``history`` over one agent's view."""

    def __init__(self, view: AgentView) -> None:
        self.view = view

    def definitions(self) -> list[dict[str, Any]]:
        return DEFINITIONS

    def run(self, name: str, args: dict[str, Any]) -> ToolResult:
        return self._history(**args)

    def _history(self, file_path: str, limit: int = DEFAULT_LIMIT) -> ToolResult:
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            return ToolResult(f"limit must be a whole number from 1 to {MAX_LIMIT}; leave it out for "
                              f"{DEFAULT_LIMIT}", True)
        revs = sorted(self.view.history(file_path), key=lambda r: r.version, reverse=True)
        shown = revs[:limit]
        text = render_log(shown)
        if len(revs) > limit:
            text += f"\n({len(revs) - limit} older revision(s) not shown; pass a larger limit)"
        return ToolResult(text)
