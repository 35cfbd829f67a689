"""A deepagents backend over an agent's memagent memory.

``MemagentBackend`` implements deepagents' ``BackendProtocol`` (ls, read, write,
edit, delete, glob, grep, upload_files, download_files; the async variants come from
the protocol's thread wrappers), so ``create_deep_agent(backend=MemagentBackend(...))``
keeps the deepagents harness and stores its files as versioned, validated memagent
memory. Paths are the agent's own (``/notes.md`` is ``/notes.md`` in ``memagent fs``),
or below ``root`` when given.

Contracts (deepagents' documented semantics, checked by tests/test_integrations_deepagents.py
against deepagents' own ``StoreBackend`` too):

- Results are values, never exceptions: each error is the result's ``error`` string,
  in deepagents' wording where it has one (``File '/x' not found``, the edit errors of
  ``perform_string_replacement``, ``invalid_path``/``file_not_found``/``is_directory``
  for uploads and downloads) and memagent's one-line messages otherwise (a validator's
  refusal, a path rule, a stale version).
- ``grep`` is literal (the protocol's contract: the pattern is text, not a regex),
  answered by memagent's indexed grep in the database; ``glob`` and grep's ``glob``
  filter use deepagents' own matcher (``compile_grep_include_glob``), so a pattern
  means the same in every backend. ``max_count`` caps the matches and sets
  ``truncated`` only when more exist.
- Writes take the store's one write path (``integrations/_folder.py``): every write,
  edit, upload and delete is validated and appends a revision (author ``agent``,
  origin ``integration`` / ``deepagents``); a change that changes nothing stores
  nothing; deleting a folder deletes each file under it (each revertible). Nothing
  is stored without an explicit ``approve`` (a callback, ``"yolo"`` or ``"queue"``)
  or an ``allow`` approval rule of the agent: without one each change's result
  carries the refusal and how to allow it. The agent's approval rules come before
  ``approve`` (a ``deny`` rule refuses, whatever the callback says); only ``"yolo"``
  overrides them.

Beyond the protocol: ``grep_regex`` (a regular expression, run in linear time by
RE2 where it can be; see README "grep patterns") and ``search`` (the database's
ranked full-text search), offered to the model as tools by ``tools()``.
Binary files are refused, as deepagents' own ``ContextHubBackend`` refuses them: an
upload whose bytes are not UTF-8 text gets ``invalid_path`` and nothing is stored
(memagent memory is text that enters prompts and indexes; opaque bytes would be
neither). A file whose name says it is binary (``.mkv``, ``.png``, ``.pdf``: deepagents'
own classification) is read whole, never sliced into lines, as ``StoreBackend`` does.

As ``StoreBackend``: ``ls`` of a missing folder (or of a file) is an empty listing;
``delete`` reports the path as the caller gave it (``delete("*")`` is ``*``, the file
``/*``, never a wildcard). Deliberate differences: an empty grep pattern and deleting
the whole folder (``/``) are refused with an error.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict

from deepagents.backends.protocol import (
    FILE_NOT_FOUND,
    INVALID_PATH,
    IS_DIRECTORY,
    BackendProtocol,
    DeleteResult,
    EditResult,
    FileData,
    FileDownloadResponse,
    FileInfo,
    FileUploadResponse,
    GlobResult,
    GrepMatch,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
)
from deepagents.backends.utils import (
    InvalidGlobPatternError,
    _get_backend_read_file_type,
    compile_grep_include_glob,
    perform_string_replacement,
    slice_read_response,
)

from memagent.integrations._folder import Approve, Located, MemoryFolder
from memagent.vfs import InvalidPath, IsADirectory, NotFound, Store, VfsError, dir_prefix, normalize_path, path_basename

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

ADAPTER = "deepagents"
# grep reports every match unless the caller caps it (the protocol's max_count=None).
UNCAPPED = 10**9


class SearchMatch(TypedDict):
    """One file ranked by ``search``: its path, a relevance score (higher is better) and a snippet."""

    path: str
    score: float
    snippet: str


def _relative(path: str, root: str) -> str:
    """``path`` relative to a search root, as deepagents' glob matchers expect it."""
    if root == "/":
        return path[1:]
    if path == root:
        return path_basename(path)
    return path[len(root) + 1:]


def _literal_dirs(pattern: str) -> str:
    """The leading folders of an anchored glob that hold no wildcard (``docs/api`` of
    ``docs/api/*.md``), or "" when there are none or the pattern is bare (matches any depth)."""
    parts = pattern.lstrip("/").split("/")
    # wcmatch compares case-insensitively on Windows and macOS: there a literal folder
    # would not narrow exactly, so only case-sensitive platforms narrow.
    if len(parts) < 2 or "\\" in pattern or sys.platform in ("win32", "darwin"):
        return ""
    literal: list[str] = []
    for part in parts[:-1]:
        if not part or any(c in part for c in "*?[{!"):
            break
        literal.append(part)
    return "/".join(literal)


class MemagentBackend(BackendProtocol):
    """deepagents' file operations over ``agent:<agent>`` (below ``root``) in a memagent store.

    ``approve`` decides what is stored: a callback is asked before each change (False
    refuses it and the model gets an error); ``"yolo"`` stores every change (recorded
    ``yolo``); ``"queue"`` stores each as a proposal for ``memagent review``. Without
    it every change is refused, with an error saying how to allow it.
    """

    def __init__(self, store: Store, agent: str, *, root: str = "/", approve: Approve = None) -> None:
        self.folder = MemoryFolder(store, agent, adapter=ADAPTER, root=root, approve=approve)
        self.store = store

    def _loc(self, path: str | None) -> Located:
        if path is not None and not isinstance(path, str):
            raise InvalidPath(f"path must be a string such as /notes.md, got {type(path).__name__}")
        return self.folder.locate(path or "/")

    # -- reads ------------------------------------------------------------------------

    def ls(self, path: str) -> LsResult:
        try:
            loc = self._loc(path)
            entries = self.store.ls(self.folder.scope, loc.inner)
        except NotFound:
            # deepagents lists what is below the path: nothing, not an error.
            return LsResult(entries=[])
        except VfsError as exc:
            return LsResult(error=str(exc))
        if len(entries) == 1 and not entries[0].is_dir and self.store.exists(self.folder.scope, loc.inner):
            return LsResult(entries=[])
        base = dir_prefix(loc.shown)
        infos: list[FileInfo] = []
        for e in entries:
            if e.is_dir:
                infos.append(FileInfo(path=f"{base}{e.name}/", is_dir=True, size=0))
            else:
                infos.append(FileInfo(path=base + e.name, is_dir=False, size=e.size))
        infos.sort(key=lambda i: i["path"])
        return LsResult(entries=infos)

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        try:
            loc = self._loc(file_path)
            fc = self.store.read(self.folder.scope, loc.inner, shown=loc.shown)
        except NotFound:
            return ReadResult(error=f"File '{file_path}' not found")
        except VfsError as exc:
            return ReadResult(error=str(exc))
        data = FileData(content=fc.content, encoding="utf-8")
        if _get_backend_read_file_type(loc.shown) != "text":
            # deepagents reads media and binary names whole: line slicing would cut them.
            return ReadResult(file_data=data)
        return slice_read_response(data, offset, limit)

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        out: list[FileDownloadResponse] = []
        for path in paths:
            try:
                loc = self._loc(path)
                content = self.store.read(self.folder.scope, loc.inner, shown=loc.shown).content
            except InvalidPath:
                out.append(FileDownloadResponse(path=path, error=INVALID_PATH))
            except IsADirectory:
                out.append(FileDownloadResponse(path=path, error=IS_DIRECTORY))
            except NotFound:
                out.append(FileDownloadResponse(path=path, error=FILE_NOT_FOUND))
            else:
                out.append(FileDownloadResponse(path=path, content=content.encode("utf-8")))
        return out

    # -- search -------------------------------------------------------------------------

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        """Files below ``path`` matching ``pattern`` (deepagents' matcher), in path order.

        Paths come from the store's path index (no file is read); ``size`` and
        ``modified_at`` are left out, as the protocol allows (the middleware shows paths).
        """
        try:
            loc = self._loc(path)
            matcher = compile_grep_include_glob(pattern)
            candidates = self._paths_below(loc, _literal_dirs(pattern))
        except (VfsError, InvalidGlobPatternError) as exc:
            return GlobResult(error=str(exc))
        return GlobResult(matches=[FileInfo(path=p, is_dir=False) for p in candidates
                                   if matcher(_relative(p, loc.shown))])

    def _paths_below(self, loc: Located, narrow: str) -> list[str]:
        """Live files at or below ``loc`` as the client names them; ``narrow``: literal folders
        of an anchored pattern, which only those below can match."""
        if loc.inner != self.folder.root and self.store.exists(self.folder.scope, loc.inner):
            return [loc.shown]
        base = loc.inner
        if narrow:
            try:
                base = normalize_path(dir_prefix(loc.inner) + narrow)
            except InvalidPath:
                base = loc.inner
        return [self.folder.show(p) for p in self.store.glob(self.folder.scope, "**", base)]

    def grep(self, pattern: str, path: str | None = None, glob: str | None = None, *,
             max_count: int | None = None) -> GrepResult:
        """Lines containing ``pattern`` as literal text (the protocol's contract)."""
        return self._grep(pattern, path, glob, max_count=max_count, literal=True, case_insensitive=False)

    def grep_regex(self, pattern: str, path: str | None = None, glob: str | None = None, *,
                   case_insensitive: bool = False, max_count: int | None = None) -> GrepResult:
        """Lines matching the regular expression ``pattern`` (Python syntax; linear time where RE2 can run it)."""
        return self._grep(pattern, path, glob, max_count=max_count, literal=False,
                          case_insensitive=case_insensitive)

    def _grep(self, pattern: str, path: str | None, glob: str | None, *, max_count: int | None, literal: bool,
              case_insensitive: bool) -> GrepResult:
        if not isinstance(pattern, str) or pattern == "":
            return GrepResult(error="Error: the grep pattern is empty; give the text to search for")
        try:
            loc = self._loc(path)
            matcher: Callable[[str], bool] | None = compile_grep_include_glob(glob) if glob else None
            cap = UNCAPPED if max_count is None or matcher is not None else max(int(max_count), 0)
            found = self.store.grep(self.folder.scope, pattern, path=loc.inner, output_mode="content",
                                    fixed_strings=literal, case_insensitive=case_insensitive, limit=cap)
        except (VfsError, InvalidGlobPatternError) as exc:
            return GrepResult(error=str(exc))
        show = self.folder.show
        matches: list[GrepMatch] = []
        for p, n, text in found.lines:
            shown = show(p)
            if matcher is None or matcher(_relative(shown, loc.shown)):
                matches.append(GrepMatch(path=shown, line=n, text=text))
        truncated = found.truncated or found.cut is not None
        if max_count is not None and len(matches) > max_count:
            matches, truncated = matches[: max(int(max_count), 0)], True
        return GrepResult(matches=matches, truncated=truncated)

    def search(self, query: str, *, k: int = 10) -> list[SearchMatch]:
        """Files ranked by relevance to ``query`` with the database's full-text index, best first."""
        prefix = dir_prefix(self.folder.root)
        hits = self.store.search([self.folder.scope], query, k=k if prefix == "/" else max(k, 100))
        return [SearchMatch(path=self.folder.show(h.path), score=h.score, snippet=h.snippet)
                for h in hits if h.path.startswith(prefix)][:k]

    # -- writes -----------------------------------------------------------------------

    def write(self, file_path: str, content: str) -> WriteResult:
        try:
            loc = self._loc(file_path)
            if not isinstance(content, str):
                return WriteResult(error=f"Error: content must be text, got {type(content).__name__}")
            self.folder.write(loc, content, message="deepagents: write")
        except VfsError as exc:
            return WriteResult(error=str(exc))
        return WriteResult(path=loc.shown)

    def edit(self, file_path: str, old_string: str, new_string: str,
             replace_all: bool = False) -> EditResult:
        try:
            loc = self._loc(file_path)
            fc = self.store.read(self.folder.scope, loc.inner, shown=loc.shown)
        except NotFound:
            return EditResult(error=f"Error: File '{file_path}' not found")
        except VfsError as exc:
            return EditResult(error=str(exc))
        result = perform_string_replacement(fc.content, old_string, new_string, replace_all)
        if isinstance(result, str):
            return EditResult(error=result)
        after, occurrences = result
        if after != fc.content:
            try:
                self.folder.edit(loc, old_string, new_string, replace_all=replace_all, expected_version=fc.version,
                                 message="deepagents: edit")
            except VfsError as exc:
                return EditResult(error=str(exc))
        return EditResult(path=loc.shown, occurrences=occurrences)

    def delete(self, file_path: str) -> DeleteResult:
        try:
            loc = self._loc(file_path)
            if loc.inner == self.folder.root:
                return DeleteResult(error="Error: refusing to delete the whole memory folder; "
                                          "delete the files or folders inside it")
            if self.store.exists(self.folder.scope, loc.inner):
                self.folder.delete(loc, message="deepagents: delete")
                return DeleteResult(path=file_path)
            below = self.folder.files_below(loc)
            if not below:
                return DeleteResult(error=f"Error: File '{file_path}' not found")
            for f in below:
                self.folder.delete(Located(f.path, self.folder.show(f.path)),
                                   message=f"deepagents: delete {loc.shown}")
        except VfsError as exc:
            return DeleteResult(error=str(exc))
        return DeleteResult(path=file_path)

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        out: list[FileUploadResponse] = []
        for path, content in files:
            try:
                loc = self._loc(path)
                text = content.decode("utf-8")
                self.folder.write(loc, text, message="deepagents: upload")
            except (InvalidPath, UnicodeDecodeError):
                # Binary content: refused as deepagents' ContextHubBackend refuses it.
                out.append(FileUploadResponse(path=path, error=INVALID_PATH))
            except IsADirectory:
                out.append(FileUploadResponse(path=path, error=IS_DIRECTORY))
            except VfsError as exc:
                out.append(FileUploadResponse(path=path, error=str(exc)))
            else:
                out.append(FileUploadResponse(path=path))
        return out

    # -- extra tools for the model ------------------------------------------------------------

    def tools(self) -> list[BaseTool]:
        """LangChain tools ``grep_regex`` and ``search_memory`` over this backend, for
        ``create_deep_agent(tools=...)``: what deepagents' literal grep cannot do."""
        from langchain_core.tools import StructuredTool

        def grep_regex(pattern: str, path: str = "/", glob: str | None = None, case_insensitive: bool = False,
                       max_count: int = 200) -> str:
            r = self.grep_regex(pattern, path, glob, case_insensitive=case_insensitive, max_count=max_count)
            if r.error:
                return r.error
            lines = [f"{m['path']}:{m['line']}:{m['text']}" for m in r.matches or []]
            if r.truncated:
                lines.append("(more matches exist: narrow the pattern, path or glob, or raise max_count)")
            return "\n".join(lines) or "No matches"

        def search_memory(query: str, k: int = 10) -> str:
            if not query.strip():
                return "query is empty; give a few words to look for, e.g. 'meeting notes format'"
            hits = self.search(query, k=max(1, min(int(k), 50)))
            return "\n\n".join(f"{h['path']} (score {h['score']:.2f})\n{h['snippet']}" for h in hits) or "No matches"

        return [
            StructuredTool.from_function(grep_regex, description=(
                "Search file contents with a regular expression (Python syntax); matching lines as "
                "path:line:text. Use it when a literal grep cannot say it: alternatives (a|b), character "
                "classes, anchors. `glob` narrows the files (e.g. '*.md'); `max_count` caps the lines.")),
            StructuredTool.from_function(search_memory, description=(
                "Find memory files about a topic: a few words, ranked by relevance (full-text search), "
                "each with a snippet. Use it before grep when you do not know the exact words.")),
        ]


__all__ = ["ADAPTER", "MemagentBackend", "SearchMatch"]
