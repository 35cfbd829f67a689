"""The file tools the model sees, and their dispatch over an agent's view of memory.

Contracts follow DESIGN.md (names, parameters, text results). Invariants:
- Errors are values: every failure becomes a ``ToolResult(is_error=True)`` whose text
  says how to fix the call; nothing here raises to the loop for a bad call.
- Every mutating call goes path rules -> validators -> approval gate -> commit, and
  commits against the version the model last saw, so an edit never lands on a file
  that changed underneath it; a refusal at any step changes nothing.
- ``seen`` maps view paths to the version the model has seen (by reading it, writing
  it, or finding it in the system prompt).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memagent.agent.gate import ApprovalRequest, Gate, Op
from memagent.vfs import paths
from memagent.vfs.errors import NotFound, StaleVersion, VfsError
from memagent.vfs.render import render_ls, render_numbered
from memagent.vfs.scopes import AgentView
from memagent.vfs.search import render as render_grep
from memagent.vfs.store import apply_edit, unified_diff
from memagent.vfs.types import Change

READ_LIMIT = 2000
MUTATING = frozenset({"write_file", "edit_file", "delete_file"})


@dataclass(frozen=True)
class ToolResult:
    content: str
    is_error: bool = False


def _schema(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


_PATH = {"type": "string", "description": "Absolute path inside memory, e.g. /AGENTS.md"}

DEFINITIONS: list[dict[str, Any]] = [
    {"name": "ls", "description": "List a memory folder: one entry a line, folders end in /, with sizes.",
     "input_schema": _schema({"path": {**_PATH, "default": "/"}}, [])},
    {"name": "read_file",
     "description": "Read a memory file as numbered lines (`{n:>6}\\t{line}`). Use offset/limit for long files.",
     "input_schema": _schema({"file_path": _PATH,
                              "offset": {"type": "integer", "minimum": 0, "default": 0,
                                         "description": "Lines to skip."},
                              "limit": {"type": "integer", "minimum": 1, "default": READ_LIMIT,
                                        "description": "Most lines to return."}}, ["file_path"])},
    {"name": "write_file",
     "description": "Create a memory file or overwrite one you have read. Validated; a person approves it.",
     "input_schema": _schema({"file_path": _PATH, "content": {"type": "string"}}, ["file_path", "content"])},
    {"name": "edit_file",
     "description": "Replace an exact string in a memory file. old_string must occur once unless "
                    "replace_all is true. Validated; a person approves it.",
     "input_schema": _schema({"file_path": _PATH, "old_string": {"type": "string"},
                              "new_string": {"type": "string"},
                              "replace_all": {"type": "boolean", "default": False}},
                             ["file_path", "old_string", "new_string"])},
    {"name": "delete_file",
     "description": "Delete a memory file (kept in history; revertible). A person approves it.",
     "input_schema": _schema({"file_path": _PATH}, ["file_path"])},
    {"name": "glob",
     "description": "Find memory files by pattern: ** crosses folders, {a,b} braces; a pattern "
                    "without / matches file names at any depth.",
     "input_schema": _schema({"pattern": {"type": "string"}, "path": {**_PATH, "default": "/"}},
                             ["pattern"])},
    {"name": "grep",
     "description": "Search memory file contents with a Python regular expression (or a fixed "
                    "string). Content lines print as path:line:text.",
     "input_schema": _schema({
         "pattern": {"type": "string"},
         "path": {**_PATH, "default": "/"},
         "glob": {"type": ["string", "null"], "default": None,
                  "description": "Only files matching this glob, e.g. *.md"},
         "output_mode": {"type": "string", "enum": ["files_with_matches", "content", "count"],
                         "default": "files_with_matches"},
         "case_insensitive": {"type": "boolean", "default": False},
         "fixed_strings": {"type": "boolean", "default": False}}, ["pattern"])},
]

TASK_DEFINITION: dict[str, Any] = {
    "name": "task",
    "description": "Run a subagent from /subagents/ on a self-contained task; it works with its own "
                   "tools and instructions and returns its final answer.",
    "input_schema": _schema({"subagent": {"type": "string", "description": "The subagent's name."},
                             "description": {"type": "string",
                                             "description": "The whole task, with every detail it needs."}},
                            ["subagent", "description"]),
}
READ_ONLY = frozenset({"ls", "read_file", "glob", "grep"})


@dataclass
class ToolBox:
    """Runs tool calls for one agent session."""

    view: AgentView
    gate: Gate
    author: str = "agent"
    seen: dict[str, int] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)
    on_change: Callable[[Change, str], None] | None = None
    # None = every tool; a subagent gets the set its file allows.
    allowed: frozenset[str] | None = None
    # Runs a subagent; set by the agent loop, absent inside subagents (no recursion).
    task_runner: Callable[[str, str], ToolResult] | None = None

    def definitions(self) -> list[dict[str, Any]]:
        defs = DEFINITIONS + ([TASK_DEFINITION] if self.task_runner else [])
        return [d for d in defs if self.allowed is None or d["name"] in self.allowed]

    def run(self, name: str, args: dict[str, Any]) -> ToolResult:
        names = [d["name"] for d in self.definitions()]
        handler = getattr(self, f"_t_{name}", None)
        if handler is None or name not in names:
            return ToolResult(f"unknown tool {name!r}; the tools are: {', '.join(names)}", True)
        try:
            result: ToolResult = handler(**args)
            return result
        except TypeError as exc:
            return ToolResult(f"bad arguments for {name}: {exc}; see the tool's input schema", True)
        except VfsError as exc:
            return ToolResult(str(exc), True)

    # -- reading ----------------------------------------------------------------

    def _t_ls(self, path: str = "/") -> ToolResult:
        return ToolResult(render_ls(self.view.ls(path)))

    def _t_read_file(self, file_path: str, offset: int = 0, limit: int = READ_LIMIT) -> ToolResult:
        fc = self.view.read(file_path, offset=offset, limit=limit)
        self.seen[fc.path] = fc.version
        return ToolResult(render_numbered(fc))

    def _t_glob(self, pattern: str, path: str = "/") -> ToolResult:
        found = self.view.glob(pattern, path)
        return ToolResult("\n".join(found) if found else "No files found.")

    def _t_grep(self, pattern: str, path: str = "/", glob: str | None = None,
                output_mode: str = "files_with_matches", case_insensitive: bool = False,
                fixed_strings: bool = False) -> ToolResult:
        result = self.view.grep(pattern, path=path, glob=glob, output_mode=output_mode,
                                case_insensitive=case_insensitive, fixed_strings=fixed_strings)
        return ToolResult(render_grep(result))

    def _t_task(self, subagent: str, description: str) -> ToolResult:
        assert self.task_runner is not None  # run() only offers task when a runner is set
        return self.task_runner(subagent, description)

    # -- writing ----------------------------------------------------------------

    def _current(self, path: str) -> tuple[str | None, int]:
        """Content and version now (None, 0 for a file that does not exist)."""
        try:
            fc = self.view.read(path)
        except NotFound:
            return None, 0
        return fc.content, fc.version

    def _expected(self, path: str, version: int) -> int:
        """The version a write must be based on: what the model saw, checked against now."""
        seen = self.seen.get(path)
        if seen is not None and seen != version:
            raise StaleVersion(
                f"{path} changed since you read it (you saw version {seen}, it is now "
                f"version {version}); read it again and re-apply your change"
            )
        return version

    def _gated(self, op: Op, path: str, before: str | None, after: str | None,
               commit: Callable[[str], Change]) -> ToolResult:
        diff = unified_diff(before, after, path, path)
        outcome = self.gate.check(ApprovalRequest(op, path, diff, new_file=before is None))
        if not outcome.approved:
            msg = f"The user rejected this change to {path}; nothing was changed."
            if outcome.feedback:
                msg += f" Their feedback: {outcome.feedback}"
            return ToolResult(msg, True)
        change = commit(outcome.approval)
        self.changes.append(change)
        if change.after is None:
            self.seen.pop(change.path, None)
        else:
            self.seen[change.path] = change.version
        if self.on_change:
            self.on_change(change, outcome.approval)
        verb = {"write": "Wrote", "edit": "Edited", "delete": "Deleted"}[op]
        return ToolResult(f"{verb} {change.path} (now version {change.version}).")

    def _t_write_file(self, file_path: str, content: str) -> ToolResult:
        path = paths.normalize_file(file_path)
        before, version = self._current(path)
        if before is not None and path not in self.seen:
            return ToolResult(
                f"{path} already exists (version {version}) and you have not read it; "
                "read_file it first so you do not overwrite what you have not seen, "
                "or use edit_file", True)
        expected = self._expected(path, version)
        self.view.check(path, content)
        return self._gated("write", path, before, content, lambda how: self.view.write(
            path, content, expected_version=expected, author=self.author, approval=how))

    def _t_edit_file(self, file_path: str, old_string: str, new_string: str,
                     replace_all: bool = False) -> ToolResult:
        path = paths.normalize_file(file_path)
        fc = self.view.read(path)
        expected = self._expected(path, fc.version)
        after = apply_edit(path, fc.content, old_string, new_string, replace_all)
        self.view.check(path, after)
        return self._gated("edit", path, fc.content, after, lambda how: self.view.write(
            path, after, expected_version=expected, author=self.author, approval=how,
            message="edit"))

    def _t_delete_file(self, file_path: str) -> ToolResult:
        path = paths.normalize_file(file_path)
        fc = self.view.read(path)
        expected = self._expected(path, fc.version)
        return self._gated("delete", path, fc.content, None, lambda how: self.view.delete(
            path, expected_version=expected, author=self.author, approval=how))


def describe_call(name: str, args: dict[str, Any]) -> str:
    """A compact one-line rendering of a tool call for the terminal."""
    main = args.get("file_path") or args.get("pattern") or args.get("path") or ""
    extra = {k: v for k, v in args.items() if k not in ("file_path", "content", "old_string",
                                                         "new_string", "pattern") and v}
    tail = " " + json.dumps(extra, ensure_ascii=False) if extra else ""
    return f"{name}({main}){tail}"
