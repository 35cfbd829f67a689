"""The Anthropic API's client-side memory tool, backed by an agent's memagent memory.

``MemagentMemoryTool`` subclasses the SDK's ``BetaAbstractMemoryTool``: hand it to
``client.beta.messages.tool_runner(tools=[...])`` and Claude's ``memory`` tool calls
(view, create, str_replace, insert, delete, rename) read and change the agent's
folder instead of a local directory. ``AsyncMemagentMemoryTool`` is the same for
``AsyncAnthropic`` (each call runs in a worker thread).

Invariants:
- ``/memories`` is the agent's folder (or ``root`` inside it). A path must be
  ``/memories`` or start with ``/memories/``; ``.`` and ``..`` segments are resolved
  inside it as the SDK's tool resolves them, and a ``..`` that would climb out is
  refused in the SDK's words; percent-encoded characters and everything
  ``vfs/paths.py`` refuses (backslashes, control and invisible characters, over-long
  names) are refused with a ``ToolError`` that says why, before anything is read.
  Nothing outside the agent's folder is reachable.
- Nothing is stored without an explicit approval choice (``approve``: a callback,
  ``"yolo"`` or ``"queue"``, or an ``allow`` approval rule of the agent); without one
  every change is refused, naming how to allow it. The agent's approval rules come
  before ``approve`` (a ``deny`` rule refuses, whatever the callback says); only
  ``"yolo"`` overrides them.
- Every change takes the store's write path (``integrations/_folder.py``): validated
  by the file kind's rules, one revision each (author ``agent``, origin
  ``integration`` / ``anthropic-memory-tool``), revertible with ``memagent fs revert``.
  Read-modify-write commands (str_replace, insert) write over the version they read,
  so a concurrent change is refused ("read it again"), never merged.
- Results and error texts are the SDK's own local-filesystem implementation's
  (``BetaLocalFilesystemMemoryTool``), paths named as the caller gave them, so a model
  sees the same answers (tests/test_integrations_anthropic.py runs both on the same
  commands). Folders in a listing show ``DIR_SIZE`` (what the SDK shows for a folder
  on common filesystems). memagent's own refusals (a validator, a stale version, a
  path rule the SDK lacks) come back as ``ToolError`` of one line per problem.
- Directory deletes and renames change each file below in its own revision.
"""

from __future__ import annotations

import re
from typing import Literal

from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818Command,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)
from anyio import to_thread

from memagent.integrations._folder import Approve, Located, MemoryFolder
from memagent.vfs import FileInfo, InvalidPath, NotFound, Store, VfsError

MEMORIES = "/memories"
ADAPTER = "anthropic-memory-tool"
# As the SDK's local implementation: line numbers right-aligned in 6 columns, at most 999,999 lines.
# Its listing shows a folder's own size on disk (4096 bytes, "4K", on ext4, APFS and most
# Linux filesystems), not what it holds; memagent folders are not on disk, so they show that.
DIR_SIZE = 4096
MAX_SHOWN = 200  # characters of a refused path quoted back
MAX_LINES = 999_999
NUMBER_WIDTH = len(str(MAX_LINES))
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
Kind = Literal["file", "dir"]


def _size(n: int) -> str:
    """Bytes as the SDK's view shows them: 0B, 512B, 1.5K, 2M."""
    if n == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    i = min((n.bit_length() - 1) // 10, len(units) - 1)
    value = n / (1024**i)
    return f"{int(value)}{units[i]}" if value == int(value) else f"{value:.1f}{units[i]}"


def _resolve_dots(rest: str) -> str | None:
    """``rest`` (what follows ``/memories``) with ``.`` and ``..`` segments resolved, as the SDK's
    tool resolves a path inside its folder; None when a ``..`` would climb out of it."""
    parts: list[str] = []
    for part in rest.split("/"):
        if part == "..":
            if not parts:
                return None
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/" + "/".join(parts)


def _numbered(lines: list[str], start: int) -> str:
    return "\n".join(f"{str(i + start).rjust(NUMBER_WIDTH)}\t{line}" for i, line in enumerate(lines))


class MemagentMemoryTool(BetaAbstractMemoryTool):
    """Claude's memory tool over ``agent:<agent>`` in a memagent store.

    ``root`` narrows ``/memories`` to a folder of the agent (default: all of it);
    ``approve`` decides what is stored: a callback is asked before each change (False
    refuses it and the model is told so); ``"yolo"`` stores every change (recorded
    ``yolo``); ``"queue"`` stores each as a proposal for ``memagent review``. Without
    it every change is refused, with a tool error saying how to allow it.
    """

    def __init__(self, store: Store, agent: str, *, root: str = "/", approve: Approve = None,
                 cache_control: BetaCacheControlEphemeralParam | None = None) -> None:
        super().__init__(cache_control=cache_control)
        self.folder = MemoryFolder(store, agent, adapter=ADAPTER, root=root, prefix=MEMORIES, approve=approve)

    # -- dispatch and paths -----------------------------------------------------

    def execute(self, command: BetaMemoryTool20250818Command) -> str:
        try:
            result = super().execute(command)
        except VfsError as exc:
            raise ToolError(str(exc)) from None
        except (AttributeError, TypeError) as exc:
            # construct_type_unchecked lets a malformed call through; say what is wrong, no traceback.
            raise ToolError(f"malformed memory command ({exc}); see the memory tool's parameters") from None
        assert isinstance(result, str)
        return result

    def locate(self, path: object) -> Located:
        """A ``/memories`` path checked and resolved, or a ``ToolError`` saying why not."""
        if not isinstance(path, str):
            raise ToolError(f"path must be a string such as /memories/notes.md, got {type(path).__name__}")
        if path != MEMORIES and not path.startswith(MEMORIES + "/"):
            raise ToolError(f"Path must start with /memories, got: {path[:MAX_SHOWN]}")
        if _PERCENT.search(path):
            raise ToolError(f"Path {path[:MAX_SHOWN]!r} contains a percent-encoded character; "
                            "write names with plain characters")
        rest = _resolve_dots(path[len(MEMORIES):])
        if rest is None:
            raise ToolError(f"Path {path[:MAX_SHOWN]} would escape /memories directory")
        try:
            return self.folder.locate(rest or "/")
        except InvalidPath as exc:
            raise ToolError(str(exc)) from None

    def _kind(self, loc: Located) -> Kind | None:
        if loc.inner == self.folder.root:
            return "dir"  # /memories always exists, even when empty
        store, scope = self.folder.store, self.folder.scope
        if store.exists(scope, loc.inner):
            return "file"
        try:
            store.ls(scope, loc.inner)
        except NotFound:
            return None
        return "dir"

    def _missing(self, given: str) -> ToolError:
        return ToolError(f"The path {given} does not exist. Please provide a valid path.")

    # -- commands -------------------------------------------------------------------

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        loc = self.locate(command.path)
        kind = self._kind(loc)
        if kind is None:
            raise self._missing(command.path)
        if kind == "dir":
            return self._view_dir(loc, command.path)
        content = self.folder.store.read(self.folder.scope, loc.inner, shown=loc.shown).content
        lines = content.split("\n")
        if len(lines) > MAX_LINES:
            raise ToolError(f"File {command.path} exceeds maximum line limit of 999,999 lines.")
        start = 1
        view_range = command.view_range
        if view_range and len(view_range) == 2:
            first = max(1, int(view_range[0])) - 1
            end = len(lines) if view_range[1] == -1 else int(view_range[1])
            lines, start = lines[first:end], first + 1
        return f"Here's the content of {command.path} with line numbers:\n" + _numbered(lines, start)

    def _view_dir(self, loc: Located, given: str) -> str:
        """Files and folders up to two levels below ``loc``, hidden names left out, each named
        below the path as the caller gave it (``given``), folders at ``DIR_SIZE`` (as the SDK)."""
        below = self.folder.files_below(loc)
        prefix = "" if loc.inner == "/" else loc.inner
        rels = [(f.path[len(prefix) + 1:].split("/"), f) for f in below]
        out: list[str] = []

        def walk(parts_prefix: list[str], depth: int) -> None:
            names: dict[str, list[FileInfo]] = {}
            for parts, f in rels:
                if parts[: len(parts_prefix)] == parts_prefix and len(parts) > len(parts_prefix):
                    names.setdefault(parts[len(parts_prefix)], []).append(f)
            for name in sorted(names):
                if name.startswith("."):
                    continue
                here = [*parts_prefix, name]
                files = names[name]
                is_dir = not (len(files) == 1 and files[0].path == prefix + "/" + "/".join(here))
                size = DIR_SIZE if is_dir else files[0].size
                out.append(f"{_size(size)}\t{given}/{'/'.join(here)}{'/' if is_dir else ''}")
                if is_dir and depth < 2:
                    walk(here, depth + 1)

        walk([], 1)
        header = f"Here're the files and directories up to 2 levels deep in {given}, excluding hidden items:"
        lines = [f"{_size(DIR_SIZE)}\t{given}", *out]
        return f"{header}\n" + "\n".join(lines)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        loc = self.locate(command.path)
        if command.path.endswith("/"):
            raise ToolError(f"{command.path} names a directory; give a file path such as /memories/notes.md")
        kind = self._kind(loc)
        if kind == "file":
            raise ToolError(f"File {command.path} already exists")
        if kind == "dir":
            raise ToolError(f"{loc.shown} is a directory; give a file path inside it")
        if not isinstance(command.file_text, str):
            raise ToolError("file_text must be a string")
        self.folder.write(loc, command.file_text, expected_version=0, message="memory tool: create")
        return f"File created successfully at: {command.path}"

    def _read_file(self, loc: Located, given: str) -> tuple[str, int]:
        kind = self._kind(loc)
        if kind is None:
            raise self._missing(given)
        if kind == "dir":
            raise ToolError(f"The path {given} is not a file.")
        fc = self.folder.store.read(self.folder.scope, loc.inner, shown=loc.shown)
        return fc.content, fc.version

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        loc = self.locate(command.path)
        content, version = self._read_file(loc, command.path)
        old, new = command.old_str, command.new_str
        count = content.count(old)
        if count == 0:
            raise ToolError(f"No replacement was performed, old_str `{old}` did not appear verbatim in {command.path}.")
        if count > 1:
            starts, at = [], content.find(old)
            while at != -1:
                starts.append(content[:at].count("\n") + 1)
                at = content.find(old, at + 1)
            raise ToolError(f"No replacement was performed. Multiple occurrences of old_str `{old}` in lines: "
                            f"{', '.join(map(str, starts))}. Please ensure it is unique")
        changed = content[: content.find(old)].count("\n")
        if old != new:
            self.folder.edit(loc, old, new, replace_all=False, expected_version=version,
                             message="memory tool: str_replace")
        new_lines = content.replace(old, new).split("\n")
        first, end = max(0, changed - 2), min(len(new_lines), changed + 3)
        return ("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
                + _numbered(new_lines[first:end], first + 1))

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        loc = self.locate(command.path)
        content, version = self._read_file(loc, command.path)
        lines = content.split("\n")
        if lines[-1] == "":
            lines.pop()
        at = command.insert_line
        if not isinstance(at, int) or at < 0 or at > len(lines):
            raise ToolError(f"Invalid `insert_line` parameter: {at}. It should be within the range [0, {len(lines)}].")
        lines.insert(at, command.insert_text.rstrip("\n"))
        after = "\n".join(lines)
        if not after.endswith("\n"):
            after += "\n"
        self.folder.write(loc, after, expected_version=version, message="memory tool: insert")
        return f"The file {command.path} has been edited."

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        loc = self.locate(command.path)
        if loc.inner == self.folder.root:
            raise ToolError("Cannot delete the /memories directory itself")
        kind = self._kind(loc)
        if kind is None:
            raise ToolError(f"The path {command.path} does not exist")
        if kind == "file":
            self.folder.delete(loc, message="memory tool: delete")
        else:
            for f in self.folder.files_below(loc):
                self.folder.delete(Located(f.path, self.folder.show(f.path)),
                                   message=f"memory tool: delete {loc.shown}")
        return f"Successfully deleted {command.path}"

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        src, dst = self.locate(command.old_path), self.locate(command.new_path)
        if src.inner == self.folder.root:
            raise ToolError("Cannot rename the /memories directory itself")
        if self._kind(dst) is not None:
            raise ToolError(f"The destination {command.new_path} already exists")
        kind = self._kind(src)
        if kind is None:
            raise ToolError(f"The path {command.old_path} does not exist")
        if kind == "file":
            self.folder.move(src, dst)
        else:
            if dst.inner.startswith(src.inner + "/"):
                raise ToolError(f"Cannot move {src.shown} into itself ({dst.shown}); choose another destination")
            show = self.folder.show
            moves = [(Located(f.path, show(f.path)), Located(target, show(target)))
                     for f in self.folder.files_below(src)
                     for target in [dst.inner + f.path[len(src.inner):]]]
            store = self.folder.store
            for a, b in moves:  # every file checked first, so a refusal changes nothing
                store.validate(b.inner, store.read(self.folder.scope, a.inner, shown=a.shown).content,
                               shown=b.shown)
            for a, b in moves:
                self.folder.move(a, b)
        return f"Successfully renamed {command.old_path} to {command.new_path}"

    def clear_all_memory(self) -> str:
        """Delete every file of the folder (each a revision, so each can be reverted)."""
        root = self.folder.locate("/")
        try:
            for f in self.folder.files_below(root):
                self.folder.delete(Located(f.path, self.folder.show(f.path)), message="memory tool: clear all")
        except VfsError as exc:
            raise ToolError(str(exc)) from None
        return "All memory cleared"


class AsyncMemagentMemoryTool(BetaAsyncAbstractMemoryTool):
    """``MemagentMemoryTool`` for ``AsyncAnthropic``: each command runs in a worker thread."""

    def __init__(self, store: Store, agent: str, *, root: str = "/", approve: Approve = None,
                 cache_control: BetaCacheControlEphemeralParam | None = None) -> None:
        super().__init__(cache_control=cache_control)
        self.sync = MemagentMemoryTool(store, agent, root=root, approve=approve)

    async def execute(self, command: BetaMemoryTool20250818Command) -> str:
        return await to_thread.run_sync(self.sync.execute, command)

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await self.execute(command)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await self.execute(command)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await self.execute(command)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await self.execute(command)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await self.execute(command)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await self.execute(command)

    async def clear_all_memory(self) -> str:
        return await to_thread.run_sync(self.sync.clear_all_memory)


__all__ = ["ADAPTER", "AsyncMemagentMemoryTool", "MemagentMemoryTool"]
