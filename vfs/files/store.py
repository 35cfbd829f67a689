"""The store: every agent's, user's and org's files, versioned, in one database.

``Store`` is the one interface; ``SqlStore`` implements it over SQLAlchemy for SQLite
and Postgres alike. Invariants:

- One write path: ``prepare_write``/``prepare_edit``/``prepare_delete`` normalise
  the path once, read the file once, check the expected version, apply the edit and
  validate once, and return a ``PendingChange``; ``commit`` stores it. ``write``,
  ``edit`` and ``delete`` are prepare + commit, so the CLI, the tools and imports
  all take it. Content is validated (whoever calls: CLI, tools, revert, move,
  import) before anything is written.
- Each mutation is one transaction that updates ``files`` and appends exactly one
  revision (``vfs/files/revisions.py``); a refused mutation (stale version, invalid
  content, missing file) leaves the database as it was.
- Concurrency is optimistic: ``UPDATE ... WHERE version = <read version>`` decides
  which of two writers wins; the other gets ``StaleVersion`` and loses nothing it
  could not re-apply. Creating a file races on the (scope, path) unique key.
- Deleting keeps the row (``deleted``, content NULL) and its history, so a deleted
  file can be reverted and re-creating it continues its version numbers.
- Errors name a file by ``shown``, the path as the caller's namespace gives it (an
  ``AgentView`` passes its view path); without it, the path in the scope.
- Every revision records its provenance (``types.Origin``: chat thread and turn,
  subagent, CLI, import, reflection run...); a caller that names none gets the one
  its author implies. ``search`` ranks live files with the database's full-text
  index (``vfs/search/lexical.py``), which the database keeps in step inside each write
  transaction; ``blame`` attributes each line to a revision (``vfs/files/blame.py``).
- ``SqlStore`` is composed by concern: ``vfs/files/listing.py`` (ls, glob), ``vfs/files/grepping.py``
  (grep), ``vfs/files/history.py`` (log, blame, diff), ``vfs/files/mutations.py`` (agents and every
  mutation), on ``vfs/files/core.py`` (transactions, row reads); reading files and
  ranked search are here. What differs between databases is the backend's
  (``vfs/backends/``), reached through ``store.db``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Protocol

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from memagent.vfs import db, paths
from memagent.vfs.backends import Database
from memagent.vfs.db import retried
from memagent.vfs.embeddings import hybrid
from memagent.vfs.embeddings.base import Embedder, SearchMode
from memagent.vfs.embeddings.base import check_mode as check_search_mode
from memagent.vfs.embeddings.index import SyncReport, VectorIndex
from memagent.vfs.errors import VfsError
from memagent.vfs.files.core import (
    AGENT_NAME_HELP,
    Validator,
    check_agent_name,
    count_lines,
    default_validator,
    no_agent_message,
)
from memagent.vfs.files.edits import apply_edit, unified_diff
from memagent.vfs.files.grepping import Grepping
from memagent.vfs.files.history import History
from memagent.vfs.files.listing import Listing
from memagent.vfs.files.mutations import Writing
from memagent.vfs.grep.engine import DEFAULT_LIMIT
from memagent.vfs.pending import PendingLists
from memagent.vfs.search import lexical
from memagent.vfs.types import (
    Approval,
    Author,
    BlameLine,
    Change,
    Entry,
    FileContent,
    FileInfo,
    GrepResult,
    Origin,
    PendingChange,
    Revision,
)

# Re-exported for callers that imported them from here before vfs/files/edits.py and vfs/files/core.py.
__all__ = ["AGENT_NAME_HELP", "SqlStore", "Store", "Validator", "apply_edit", "check_agent_name",
           "no_agent_message", "unified_diff"]

log = logging.getLogger("memagent.vfs")


class Store(Protocol):
    """What the CLI, the tools and the benchmarks rely on.

    ``shown`` (optional everywhere) is how errors and diffs name the file: the path
    as the caller's namespace gives it. ``mount`` does the same for ``ls`` and
    ``move``: the prefix the caller's namespace puts before paths of this scope.
    """

    def create_agent(self, name: str, files: dict[str, str] | None = None, *,
                     author: Author = "cli", approval: Approval = "cli") -> None: ...
    def list_agents(self) -> list[str]: ...
    def require_agent(self, name: str) -> None: ...
    def exists(self, scope: str, path: str) -> bool: ...
    def stat(self, scope: str, path: str, *, shown: str | None = None) -> FileInfo: ...
    def read(self, scope: str, path: str, *, offset: int = 0, limit: int | None = None,
             shown: str | None = None) -> FileContent: ...
    def prepare_write(self, scope: str, path: str, content: str, *, expected_version: int | None = None,
                      shown: str | None = None) -> PendingChange: ...
    def prepare_edit(self, scope: str, path: str, old_string: str, new_string: str, *,
                     replace_all: bool = False, expected_version: int | None = None,
                     shown: str | None = None) -> PendingChange: ...
    def prepare_delete(self, scope: str, path: str, *, expected_version: int | None = None,
                       shown: str | None = None) -> PendingChange: ...
    def commit(self, pending: PendingChange, *, author: Author, approval: Approval, message: str = "",
               origin: Origin | None = None) -> Change: ...
    def write(self, scope: str, path: str, content: str, *, expected_version: int | None = None,
              author: Author = "cli", approval: Approval = "cli", message: str = "",
              origin: Origin | None = None) -> Change: ...
    def edit(self, scope: str, path: str, old_string: str, new_string: str, *,
             replace_all: bool = False, expected_version: int | None = None,
             author: Author = "cli", approval: Approval = "cli", message: str = "",
             origin: Origin | None = None) -> Change: ...
    def delete(self, scope: str, path: str, *, expected_version: int | None = None,
               author: Author = "cli", approval: Approval = "cli", message: str = "",
               origin: Origin | None = None) -> Change: ...
    def move(self, scope: str, src: str, dst: str, *, author: Author = "cli",
             approval: Approval = "cli", message: str = "", mount: str = "",
             origin: Origin | None = None, expected_version: int | None = None) -> Change: ...
    def revert(self, scope: str, path: str, to_version: int, *, author: Author = "cli",
               approval: Approval = "cli", message: str = "", shown: str | None = None,
               origin: Origin | None = None) -> Change: ...
    def ls(self, scope: str, path: str = "/", *, mount: str = "") -> list[Entry]: ...
    def glob(self, scope: str, pattern: str, path: str = "/") -> list[str]: ...
    def grep(self, scope: str, pattern: str, *, path: str = "/", glob: str | None = None,
             output_mode: str = "files_with_matches", case_insensitive: bool = False,
             fixed_strings: bool = False, limit: int = DEFAULT_LIMIT) -> GrepResult: ...
    def history(self, scope: str, path: str, *, shown: str | None = None) -> list[Revision]: ...
    def blame(self, scope: str, path: str, *, shown: str | None = None) -> list[BlameLine]: ...
    def search(self, scopes: Sequence[str], query: str, *, k: int = 10,
               mode: SearchMode = "lexical") -> list[lexical.Ranked]: ...
    def revision_content(self, scope: str, path: str, version: int, *, shown: str | None = None) -> str | None: ...
    def diff(self, scope: str, path: str, from_version: int, to_version: int | None = None, *,
             shown: str | None = None) -> str: ...
    def all_files(self, scope: str) -> list[FileInfo]: ...
    def validate(self, path: str, content: str, *, shown: str | None = None) -> None: ...
    def generation(self, *scopes: str) -> int: ...
    def bulk_write(self, scope: str, files: Mapping[str, str], *, author: Author = "import",
                   approval: Approval = "cli", message: str = "", origin: Origin | None = None,
                   expected_versions: Mapping[str, int] | None = None, create: bool = False) -> list[Change]: ...
    def close(self) -> None: ...


class SqlStore(Listing, Grepping, History, Writing):
    """``Store`` over a SQLAlchemy engine (SQLite or Postgres)."""

    def __init__(self, engine: Engine | Database, *, validator: Validator | None = None,
                 embedder: Embedder | None = None) -> None:
        # The engine and its backend (vfs/backends/): what the thread and proposal
        # stores take too (``ThreadStore(store.db)``).
        self.db = Database.of(engine)
        self.engine = engine = self.db.engine
        self.validator: Validator = validator or default_validator
        # Which search indexes the database has; read on first use (see vfs/grep/fts.py).
        self._search_features = None
        # Ranked search (search_memory); see vfs/search/lexical.py.
        self._ranker: lexical.Ranker = lexical.FullTextRanker()
        # The files' vectors (vfs/embeddings/): ``embedder`` or MEMAGENT_EMBEDDER's, built on first use.
        self.vectors = VectorIndex(engine, embedder)
        # The full-text indexes' pending entries, merged after writes (vfs/pending.py); the
        # same thread embeds noted files once a search has loaded the model.
        self._pending = PendingLists(engine, background=self._embed_in_background)
        # A call whose connection the server dropped runs again on a new one (each
        # method's ``db.retried``); it needs to know whether the call sent a COMMIT.
        db.watch_commits(engine)

    def close(self) -> None:
        """Close the store's database connections (the store may not be used after)."""
        self._pending.close()
        self.engine.dispose()

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- reading ------------------------------------------------------------

    @retried("read")
    def exists(self, scope: str, path: str) -> bool:
        path = paths.normalize(path)
        with self._read() as conn:
            row = self._row(conn, scope, path)
            return row is not None and not row.deleted

    @retried("read")
    def stat(self, scope: str, path: str, *, shown: str | None = None) -> FileInfo:
        path = paths.normalize_file(path)
        with self._read() as conn:
            row = self._live(conn, scope, path, shown or path)
        return FileInfo(path, row.size, row.version, row.updated_at)

    @retried("read")
    def read(self, scope: str, path: str, *, offset: int = 0, limit: int | None = None,
             shown: str | None = None) -> FileContent:
        path = paths.normalize_file(path)
        row = self._head(scope, path)
        if row is None or row.deleted:
            with self._read() as conn:
                self._require_live(conn, scope, path, shown or path, row)
        assert row is not None and row.content is not None  # _require_live raised otherwise
        content: str = row.content
        total = count_lines(content)
        if offset < 0 or (limit is not None and limit < 0):
            raise VfsError("offset and limit must be zero or positive line counts")
        if offset == 0 and (limit is None or limit >= total):
            return FileContent(path, content, row.version, total, 0, total)
        if offset and offset >= total:
            raise VfsError(
                f"offset {offset} is past the end of {shown or path}, which has {total} lines; "
                "use a smaller offset"
            )
        lines = content.splitlines(keepends=True)
        chosen = lines[offset : None if limit is None else offset + limit]
        return FileContent(path, "".join(chosen), row.version, total, offset, len(chosen))

    # -- ranked search --------------------------------------------------------

    @retried("read")
    def search(self, scopes: Sequence[str], query: str, *, k: int = 10,
               ranker: lexical.Ranker | None = None,
               mode: SearchMode = "lexical") -> list[lexical.Ranked]:
        """Live files of ``scopes`` ranked by relevance to ``query``: ``mode`` lexical
        (``vfs/search/lexical.py``, the store's default), semantic or hybrid
        (``vfs/embeddings/hybrid.py``; ``AgentView.search`` and the front ends default
        to ``hybrid.DEFAULT_MODE``)."""
        mode = check_search_mode(mode)
        # The ranking reads the full-text index: what it has not merged yet it would miss
        # (SQLite) or scan in every lookup (Postgres).
        self._pending.flush(search_only=True)
        if ranker is not None:
            with self._read(transaction=True) as conn:
                return ranker.rank(conn, scopes, query, k)
        if mode != "lexical":
            self.vectors.sync()  # embed what was written since the last sync
        with self._read(transaction=True) as conn:
            return hybrid.search(conn, self._ranker, self.vectors, scopes, query, k, mode)

    def reindex_embeddings(self) -> SyncReport:
        """Drop every vector and embed every live file again with the current embedder."""
        return self.vectors.reindex()

    def _embed_in_background(self) -> None:
        try:
            self.vectors.sync(load=False)
        except (VfsError, SQLAlchemyError) as exc:  # the next search embeds and reports it
            log.debug("embedding noted files in the background failed: %s", exc)


