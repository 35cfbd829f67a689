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
  revision (``vfs/revisions.py``); a refused mutation (stale version, invalid
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
  index (``vfs/ranking.py``), which the database keeps in step inside each write
  transaction; ``blame`` attributes each line to a revision (``vfs/blame.py``).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    TextClause,
    and_,
    func,
    insert,
    select,
    text,
)
from sqlalchemy.exc import DBAPIError, DisconnectionError, IntegrityError, SQLAlchemyError

from memagent.vfs import blame as blaming
from memagent.vfs import bulk, db, paths, ranking, search
from memagent.vfs.edits import apply_edit, unified_diff
from memagent.vfs.embeddings import hybrid
from memagent.vfs.embeddings.base import Embedder, SearchMode
from memagent.vfs.embeddings.base import check_mode as check_search_mode
from memagent.vfs.embeddings.index import SyncReport, VectorIndex
from memagent.vfs.errors import (
    AgentNotFound,
    AlreadyExists,
    IsADirectory,
    NotFound,
    ReadOnly,
    RevisionNotFound,
    StaleVersion,
    ValidationFailed,
    VfsError,
)
from memagent.vfs.globbing import glob_matcher, literal_prefix
from memagent.vfs.models import agents, files, revisions
from memagent.vfs.pending import PendingLists
from memagent.vfs.revisions import append, guard_new_file, has_children, now, prefix_range, stale
from memagent.vfs.search import DEFAULT_LIMIT, scan, scan_plain
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

if TYPE_CHECKING:
    from memagent.validators import Problem
    from memagent.vfs.fts import Features

Validator = Callable[[str, str], "Sequence[Problem]"]

AGENT_NAME_HELP = "agent names are 1-64 characters of a-z, 0-9, '-' and '_', starting with a letter or digit"

# Re-exported for callers that imported them from here before vfs/edits.py.
__all__ = ["AGENT_NAME_HELP", "SqlStore", "Store", "Validator", "apply_edit", "check_agent_name", "unified_diff"]

log = logging.getLogger("memagent.vfs")


def _count_lines(content: str) -> int:
    if not content:
        return 0
    return content.count("\n") + (0 if content.endswith("\n") else 1)


def no_agent_message(name: str) -> str:
    """The one line for an agent that does not exist; `memagent init` is suggested only
    for a name it would accept."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", name or ""):
        return f"no agent named {name!r} ({AGENT_NAME_HELP}); list agents with `memagent agents`"
    return f"no agent named {name!r}; create it with `memagent init {name}` or list agents with `memagent agents`"


def check_agent_name(name: str) -> str:
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", name or ""):
        raise VfsError(f"invalid agent name {name!r}: {AGENT_NAME_HELP}")
    return name


def _default_validator(path: str, content: str) -> Sequence[Problem]:
    from memagent.validators import validate

    return validate(path, content)


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
               mode: SearchMode = "lexical") -> list[ranking.Ranked]: ...
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


def _memory_scope(scope: str, shown: str) -> None:
    """Memory writers never write a conversations scope: its files are derived from the
    thread's messages and kept by ``vfs/conversation_files.py`` alone (a file written here
    would also block the next render of a thread at that path)."""
    if scope.startswith(paths.scope_name("conversations", "")):
        raise ReadOnly(f"{shown} is read-only: /conversations/ holds past threads, kept by memagent; "
                       "write notes elsewhere, e.g. /knowledge/")


class SqlStore:
    """``Store`` over a SQLAlchemy engine (SQLite or Postgres)."""

    def __init__(self, engine: Engine, *, validator: Validator | None = None,
                 embedder: Embedder | None = None) -> None:
        self.engine = engine
        self.validator: Validator = validator or _default_validator
        self._read_options: dict[str, Any] = (
            {"isolation_level": "AUTOCOMMIT"} if engine.dialect.name == "postgresql" else {})
        # Which search indexes the database has; read on first use (see vfs/fts.py).
        self._search_features: Features | None = None
        # Ranked search (search_memory); see vfs/ranking.py.
        self._ranker: ranking.Ranker = ranking.FullTextRanker()
        # The files' vectors (vfs/embeddings/): ``embedder`` or MEMAGENT_EMBEDDER's, built on first use.
        self.vectors = VectorIndex(engine, embedder)
        # The full-text indexes' pending entries, merged after writes (vfs/pending.py); the
        # same thread embeds noted files once a search has loaded the model.
        self._pending = PendingLists(engine, background=self._embed_in_background)
        # A call whose connection the server dropped runs again on a new one (see
        # _RECONNECTING); it needs to know whether the call sent a COMMIT.
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

    # -- transactions -------------------------------------------------------

    @contextmanager
    def _read(self, *, transaction: bool = False) -> Iterator[Connection]:
        # Reads run in autocommit on Postgres: no BEGIN/ROLLBACK round trips around
        # a single SELECT (SQLite transactions are in-process and cost nothing).
        # grep needs a transaction there (server-side cursors, SET LOCAL).
        options = {} if transaction else self._read_options
        with self.engine.connect().execution_options(**options) as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self.engine.connect().execution_options(**{db.WRITE: True}) as conn, conn.begin():
            yield conn

    # -- agents -------------------------------------------------------------

    def create_agent(self, name: str, files: dict[str, str] | None = None, *,
                     author: Author = "cli", approval: Approval = "cli") -> None:
        """Create an agent and its starting files in one transaction (all or nothing)."""
        check_agent_name(name)
        start = bulk.normalize_batch(files or {})
        for path, content in start.items():
            self.validate(path, content)
        with self._write() as conn:
            _insert_agent(conn, name)
            bulk.write_batch(conn, paths.scope_name("agent", name), start, author=author, approval=approval,
                             message="init", origin=Origin("init") if author == "cli" else None)

    def list_agents(self) -> list[str]:
        with self._read() as conn:
            return list(conn.scalars(select(agents.c.name).order_by(agents.c.name)))

    def require_agent(self, name: str) -> None:
        with self._read() as conn:
            found = conn.scalar(select(agents.c.id).where(agents.c.name == name))
        if found is None:
            raise AgentNotFound(no_agent_message(name))

    # -- reading ------------------------------------------------------------

    def _row(self, conn: Connection, scope: str, path: str) -> Any:
        return conn.execute(
            select(files).where(files.c.scope == scope, files.c.path == path)
        ).first()

    def _live(self, conn: Connection, scope: str, path: str, shown: str) -> Any:
        return self._require_live(conn, scope, path, shown, self._row(conn, scope, path))

    def _require_live(self, conn: Connection, scope: str, path: str, shown: str, row: Any) -> Any:
        """``row`` if it is a live file, else the error that says what is there instead."""
        if row is not None and not row.deleted:
            return row
        if has_children(conn, scope, path):
            raise IsADirectory(f"{shown} is a directory; use ls to see what is in it")
        if row is not None:
            raise NotFound(
                f"{shown} was deleted (version {row.version}); see its history with "
                f"`fs log {shown}` and bring it back with `fs revert {shown} --to N`"
            )
        raise NotFound(f"no file at {shown}; use ls or glob to find the right path")

    def _head(self, scope: str, path: str) -> _Head | None:
        """A file's content, version and deleted flag by one DBAPI query (None: no row).

        The hot read of ``read`` and of every write's ``prepare``: a single SELECT
        needs no transaction (SQLite runs it in its own; Postgres in autocommit), and
        bypassing SQLAlchemy's statement layer here saves most of such a call's time.
        """
        raw = self.engine.raw_connection()
        driver: Any = raw.driver_connection
        pg = self.engine.dialect.name == "postgresql"
        try:
            if pg:
                driver.autocommit = True  # no BEGIN/ROLLBACK round trips around one SELECT
            cur = raw.cursor()
            try:
                cur.execute(_HEAD_SQL_PG if pg else _HEAD_SQL, (scope, path))
                got = cur.fetchone()
            finally:
                cur.close()
        except Exception as exc:
            # Bypassing SQLAlchemy means noticing a dead connection here: drop it from
            # the pool (resetting a dead socket would only fail again, and hide this
            # error) and say it is a disconnect, which _RECONNECTING retries.
            if db.driver_is_dead(driver) or db.is_disconnect(exc):
                raw.invalidate(exc)
                raise DisconnectionError(f"the database dropped the connection ({type(exc).__name__})") from exc
            raise
        finally:
            if pg and raw.is_valid:
                driver.autocommit = False  # as the pool hands it to SQLAlchemy
            raw.close()  # back to the pool; after invalidate() only the record returns
        return None if got is None else _Head(got[0], int(got[1]), bool(got[2]))

    def exists(self, scope: str, path: str) -> bool:
        path = paths.normalize(path)
        with self._read() as conn:
            row = self._row(conn, scope, path)
            return row is not None and not row.deleted

    def stat(self, scope: str, path: str, *, shown: str | None = None) -> FileInfo:
        path = paths.normalize_file(path)
        with self._read() as conn:
            row = self._live(conn, scope, path, shown or path)
        return FileInfo(path, row.size, row.version, row.updated_at)

    def read(self, scope: str, path: str, *, offset: int = 0, limit: int | None = None,
             shown: str | None = None) -> FileContent:
        path = paths.normalize_file(path)
        row = self._head(scope, path)
        if row is None or row.deleted:
            with self._read() as conn:
                self._require_live(conn, scope, path, shown or path, row)
        assert row is not None and row.content is not None  # _require_live raised otherwise
        content: str = row.content
        total = _count_lines(content)
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

    def generation(self, *scopes: str) -> int:
        """A number that grows with every mutation in any of ``scopes`` (their sum of versions).

        Every mutation raises one file's version by one (or creates a file at version 1),
        so callers can cache what they derive from memory and rebuild only after a change.
        """
        with self._read() as conn:
            total = conn.scalar(select(func.sum(files.c.version)).where(files.c.scope.in_(scopes)))
        return int(total or 0)

    def all_files(self, scope: str) -> list[FileInfo]:
        with self._read() as conn:
            rows = conn.execute(
                select(files.c.path, files.c.size, files.c.version, files.c.updated_at)
                .where(files.c.scope == scope, files.c.deleted.is_(False))
                .order_by(files.c.path)
            ).all()
        return [FileInfo(r.path, r.size, r.version, r.updated_at) for r in rows]

    # -- listing and search ---------------------------------------------------
    # ls, glob and grep answer from the database: the listing index covers paths
    # and sizes, and grep reads content only for the files the trigram index
    # (vfs/fts.py) cannot rule out. ``_grep_plain`` keeps the reference answer.

    def _features(self, conn: Connection) -> Features:
        if self._search_features is None:
            from memagent.vfs.fts import detect

            self._search_features = detect(conn)
        return self._search_features

    def ls(self, scope: str, path: str = "/", *, mount: str = "") -> list[Entry]:
        path = paths.normalize(path)
        prefix = paths.dir_prefix(path)
        lo, hi = _prefix_range(prefix)
        cut = len(prefix)
        with self._read() as conn:
            args = {"scope": scope, "depth": prefix.count("/"), "lo": lo, "hi": hi}
            if conn.dialect.name == "postgresql":
                # Both steps of _ls_entries in one statement: one round trip, not two.
                out = [Entry(p[cut:], bool(is_dir), int(n)) for p, n, is_dir in conn.execute(_LS_PG, args)]
            else:
                out = _ls_entries(conn, args, cut)
            if not out and path != "/":
                row = conn.execute(
                    select(files.c.size).where(
                        files.c.scope == scope, files.c.path == path, files.c.deleted.is_(False)
                    )
                ).first()
                if row is not None:
                    return [Entry(paths.basename(path), False, row.size)]
                raise NotFound(f"no directory or file at {mount}{path}; use ls / to see the top level")
        out.sort(key=lambda e: e.name)
        return out

    def glob(self, scope: str, pattern: str, path: str = "/") -> list[str]:
        base = paths.normalize(path)
        if pattern.startswith("/"):
            base, pattern = "/", pattern[1:]
        matcher = glob_matcher(pattern)
        prefix = paths.dir_prefix(base)
        lit = literal_prefix(pattern)
        scan_prefix = prefix + (lit + "/" if lit else "")
        lo, hi = _prefix_range(scan_prefix)
        with self._read() as conn:
            rows = conn.scalars(
                select(files.c.path)
                .where(
                    files.c.scope == scope,
                    files.c.path >= lo,
                    files.c.path < hi,
                    files.c.deleted.is_(False),
                )
                .order_by(files.c.path)
            ).all()
        cut = len(prefix)
        return [p for p in rows if matcher.match(p[cut:])]

    def grep(self, scope: str, pattern: str, *, path: str = "/", glob: str | None = None,
             output_mode: str = "files_with_matches", case_insensitive: bool = False,
             fixed_strings: bool = False, limit: int = DEFAULT_LIMIT) -> GrepResult:
        req = search.plan(pattern, path=path, glob=glob, output_mode=output_mode,
                          case_insensitive=case_insensitive, fixed_strings=fixed_strings)
        mode, regex, base, prefix = req.mode, req.regex, req.base, req.prefix
        with self._read(transaction=True) as conn:
            if conn.dialect.name == "postgresql":
                # A server-side regex (the pre-filter below) cannot be stopped from
                # here once it runs: let the server stop it at grep's deadline.
                ms = max(int(req.seconds_left() * 1000), 1)
                conn.exec_driver_sql(f"SET LOCAL statement_timeout = {ms}")
            # Imported here: the pre-filters pull in RE2 (~30 ms), which commands that
            # do not grep (fs cat, ls, log; chat start) should not pay for.
            from memagent.vfs import regexfilter, regexinfo
            from memagent.vfs.fts import candidates

            features = self._features(conn)
            narrow = candidates(features, regexinfo.info(regex).required)
            keep = None
            if narrow is None:
                # No literal to look up: a regex pre-filter, in the database or in RE2.
                narrow, keep = regexfilter.choose(conn, features, regex)
            pg_narrow = narrow is not None and conn.dialect.name == "postgresql"
            scope_col: ColumnElement[str] = files.c.scope
            path_col: ColumnElement[str] = files.c.path
            live: ColumnElement[bool] = files.c.deleted.is_(False)
            if pg_narrow:
                # Postgres does not cost reading TOASTed content: on a small scope it
                # picks a scan that reads every file's text over the trigram index
                # (17 ms instead of 1 ms at 1,000 files). Hide the b-tree columns
                # ("|| ''", "IS NOT TRUE") and rule out the sequential scan, so the
                # trigram index is the only way in.
                conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
                scope_col, path_col = files.c.scope.concat(""), files.c.path.concat("")
                live = files.c.deleted.is_not(True)
            cond = [scope_col == scope, live]
            if base != "/" and self._is_live_file(conn, scope, base):
                cond.append(path_col == base)
            else:
                # An anchored glob's literal directories narrow the range scan.
                lit = literal_prefix(glob) if glob else ""
                lo, hi = _prefix_range(prefix + (lit + "/" if lit else ""))
                cond += [path_col >= lo, path_col < hi]
            if narrow is not None:
                cond.append(narrow)
            needle = _names_only(mode, regex, keep) if pg_narrow else None
            if needle is not None:
                # The LIKE above is the exact answer for a case-sensitive literal: ship
                # the names, not every matching file's text (most of the time at 30 %
                # of 10,000 files); scan then sees the literal as each file's text.
                try:
                    names = conn.execute(select(path_col).where(and_(*cond)).order_by(path_col))
                except DBAPIError as exc:
                    if not _timed_out(exc):
                        raise
                    return GrepResult(mode=mode, limit=limit, cut=_DB_CUT)
                found_names = ((row[0], needle) for row in _until_timeout(names) if req.in_glob(row[0]))
                return scan(found_names, regex, mode, limit, None, req.deadline)
            query = select(files.c.path, files.c.content).where(and_(*cond)).order_by(files.c.path)
            if not pg_narrow:
                # Stream, so that a capped answer stops reading early. (Not for Postgres
                # with a pre-filter: a cursor would favour a path-ordered plan.)
                conn = conn.execution_options(yield_per=256)
            try:
                rows = conn.execute(query)
            except DBAPIError as exc:
                if not _timed_out(exc):
                    raise
                return GrepResult(mode=mode, limit=limit, cut=_DB_CUT)
            found = ((p, c) for p, c in _until_timeout(rows) if req.in_glob(p))
            return scan(found, regex, mode, limit, keep, req.deadline)

    def _is_live_file(self, conn: Connection, scope: str, path: str) -> bool:
        return conn.execute(
            select(files.c.id).where(
                files.c.scope == scope, files.c.path == path, files.c.deleted.is_(False)
            )
        ).first() is not None

    def _grep_plain(self, scope: str, pattern: str, *, path: str = "/", glob: str | None = None,
                    output_mode: str = "files_with_matches", case_insensitive: bool = False,
                    fixed_strings: bool = False, limit: int = DEFAULT_LIMIT) -> GrepResult:
        """The reference grep: every file of the range into Python, ``scan_plain``.

        No index, no shortcut; tests/test_fastpaths.py checks ``grep`` against it.
        """
        req = search.plan(pattern, path=path, glob=glob, output_mode=output_mode,
                          case_insensitive=case_insensitive, fixed_strings=fixed_strings, plain=True)
        base = req.base
        lo, hi = _prefix_range(req.prefix)
        with self._read() as conn:
            single = self._row(conn, scope, base) if base != "/" else None
            cond = [files.c.scope == scope, files.c.deleted.is_(False)]
            if single is not None and not single.deleted:
                cond.append(files.c.path == base)
            else:
                cond += [files.c.path >= lo, files.c.path < hi]
            rows = conn.execute(
                select(files.c.path, files.c.content).where(and_(*cond)).order_by(files.c.path)
            ).all()
        return scan_plain(((p, c) for p, c in rows if req.in_glob(p)), req.regex, req.mode, limit)

    # -- history ------------------------------------------------------------

    def _ever_row(self, conn: Connection, scope: str, path: str, shown: str) -> Any:
        """The file's row even when it is deleted (history, diff and revert need it)."""
        row = self._row(conn, scope, path)
        if row is None:
            raise NotFound(f"no file at {shown} has ever existed; use glob to find the right path")
        return row

    def history(self, scope: str, path: str, *, shown: str | None = None) -> list[Revision]:
        path = paths.normalize_file(path)
        with self._read() as conn:
            row = self._ever_row(conn, scope, path, shown or path)
            revs = conn.execute(
                select(revisions).where(revisions.c.file_id == row.id).order_by(revisions.c.version.desc())
            ).all()
        return [
            Revision(path, r.version, r.author, r.approval, r.message, r.deleted, r.size, r.created_at,
                     _origin(r))
            for r in revs
        ]

    def blame(self, scope: str, path: str, *, shown: str | None = None) -> list[BlameLine]:
        """Each line of the file's current text with the revision that last changed it."""
        path = paths.normalize_file(path)
        shown = shown or path
        with self._read() as conn:
            row = self._live(conn, scope, path, shown)
            revs = conn.execute(
                select(revisions).where(revisions.c.file_id == row.id)
                .order_by(revisions.c.version.desc()).limit(blaming.MAX_REVISIONS)
            ).all()
        return blaming.blame([
            blaming.RevisionText(r.version, None if r.deleted else r.content, r.author, r.approval,
                                 r.created_at, _origin(r), r.message)
            for r in reversed(revs)
        ])

    # -- ranked search --------------------------------------------------------

    def search(self, scopes: Sequence[str], query: str, *, k: int = 10,
               ranker: ranking.Ranker | None = None,
               mode: SearchMode = "lexical") -> list[ranking.Ranked]:
        """Live files of ``scopes`` ranked by relevance to ``query``: ``mode`` lexical
        (``vfs/ranking.py``, the store's default), semantic or hybrid
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

    def _revision(self, conn: Connection, file_row: Any, version: int, shown: str) -> Any:
        rev = conn.execute(
            select(revisions).where(revisions.c.file_id == file_row.id, revisions.c.version == version)
        ).first()
        if rev is None:
            raise RevisionNotFound(
                f"{shown} has no version {version}; it has versions 1 to {file_row.version} "
                f"(see `fs log {shown}`)"
            )
        return rev

    def revision_content(self, scope: str, path: str, version: int, *, shown: str | None = None) -> str | None:
        path = paths.normalize_file(path)
        shown = shown or path
        with self._read() as conn:
            row = self._ever_row(conn, scope, path, shown)
            rev = self._revision(conn, row, version, shown)
        return None if rev.deleted else rev.content

    def diff(self, scope: str, path: str, from_version: int, to_version: int | None = None, *,
             shown: str | None = None) -> str:
        path = paths.normalize_file(path)
        shown = shown or path
        with self._read() as conn:
            row = self._ever_row(conn, scope, path, shown)
            to_version = row.version if to_version is None else to_version
            a = self._revision(conn, row, from_version, shown)
            b = self._revision(conn, row, to_version, shown)
        return unified_diff(
            a.content if not a.deleted else None,
            b.content if not b.deleted else None,
            f"{shown}@{from_version}",
            f"{shown}@{to_version}",
        )

    # -- writing ------------------------------------------------------------

    def validate(self, path: str, content: str, *, shown: str | None = None) -> None:
        """Raise ``ValidationFailed`` if ``content`` may not be stored at ``path`` (named ``shown``)."""
        problems = self.validator(path, content)
        if problems:
            raise ValidationFailed(shown or path, problems)

    def _prepare(self, scope: str, path: str, shown: str | None, expected_version: int | None,
                 *, must_exist: bool) -> tuple[str, str, str | None, int]:
        """Normalise, read the file once, check the expected version: (path, shown, before, version).

        ``version`` is the version ``before`` was read at, 0 when the file is not live.
        A file that must exist and does not raises the error that says what is there.
        """
        path = paths.normalize_file(path)
        shown = shown or path
        _memory_scope(scope, shown)
        row = self._head(scope, path)
        live = row is not None and not row.deleted
        if must_exist and not live:
            with self._read() as conn:
                self._require_live(conn, scope, path, shown, row)
        have = row.version if row is not None and live else 0
        if expected_version is not None and expected_version != have:
            raise stale(shown, expected_version, row.version if row else None, live)
        if not live:
            with self._read() as conn:
                guard_new_file(conn, scope, path, shown)
        return path, shown, row.content if row is not None and live else None, have

    def prepare_write(self, scope: str, path: str, content: str, *, expected_version: int | None = None,
                      shown: str | None = None) -> PendingChange:
        """Check a write of ``content`` to ``path`` without storing it; ``commit`` stores it."""
        path, shown, before, version = self._prepare(scope, path, shown, expected_version, must_exist=False)
        self.validate(path, content, shown=shown)
        return PendingChange("write", scope, path, shown, before, content, version)

    def prepare_edit(self, scope: str, path: str, old_string: str, new_string: str, *,
                     replace_all: bool = False, expected_version: int | None = None,
                     shown: str | None = None) -> PendingChange:
        """Apply an exact-string edit in memory and check it; ``commit`` stores it."""
        path, shown, before, version = self._prepare(scope, path, shown, expected_version, must_exist=True)
        assert before is not None  # must_exist
        after = apply_edit(shown, before, old_string, new_string, replace_all)
        self.validate(path, after, shown=shown)
        return PendingChange("edit", scope, path, shown, before, after, version)

    def prepare_delete(self, scope: str, path: str, *, expected_version: int | None = None,
                       shown: str | None = None) -> PendingChange:
        """Check that ``path`` can be deleted; ``commit`` deletes it (history is kept)."""
        path, shown, before, version = self._prepare(scope, path, shown, expected_version, must_exist=True)
        return PendingChange("delete", scope, path, shown, before, None, version)

    def commit(self, pending: PendingChange, *, author: Author, approval: Approval, message: str = "",
               origin: Origin | None = None) -> Change:
        """Store a prepared change if the file is still at the version it was prepared from.

        Otherwise ``StaleVersion`` and nothing is stored. Content is not validated
        again (``prepare_*`` did); the message is scanned for secrets.
        """
        default = {"write": "write" if pending.before is not None else "create", "edit": "edit", "delete": "delete"}
        store_it = functools.partial(
            append, scope=pending.scope, path=pending.path, content=pending.after,
            expected=pending.expected_version, author=author, approval=approval,
            message=message or default[pending.op], shown=pending.shown, origin=origin)
        if pending.expected_version and self.engine.dialect.name == "postgresql":
            # An overwrite is one statement there (revisions.append): atomic on its own,
            # so no BEGIN and COMMIT round trips around it.
            with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                # The statement commits by itself. If its connection dies, the file still
                # at the version it expected proves it did not commit (it moves the
                # version; versions never go back), so _RECONNECTING may run it again.
                db.committing(proof=functools.partial(self._unchanged, pending), what=pending.shown)
                version = store_it(conn)
                conn.commit()  # no round trip; tells the engine's listeners (vfs/pending.py)
            return Change(pending.path, version, pending.before, pending.after)
        with self._write() as conn:
            if pending.expected_version == 0:
                # Someone may have made a directory here, or a file above, since.
                guard_new_file(conn, pending.scope, pending.path, pending.shown)
            version = store_it(conn)
        return Change(pending.path, version, pending.before, pending.after)

    def _unchanged(self, pending: PendingChange) -> bool:
        """Whether ``pending``'s file is still live at the version it was prepared from."""
        row = self._head(pending.scope, pending.path)
        return row is not None and not row.deleted and row.version == pending.expected_version

    def write(self, scope: str, path: str, content: str, *, expected_version: int | None = None,
              author: Author = "cli", approval: Approval = "cli", message: str = "",
              origin: Origin | None = None) -> Change:
        pending = self.prepare_write(scope, path, content, expected_version=expected_version)
        return self.commit(pending, author=author, approval=approval, message=message, origin=origin)

    def edit(self, scope: str, path: str, old_string: str, new_string: str, *,
             replace_all: bool = False, expected_version: int | None = None,
             author: Author = "cli", approval: Approval = "cli", message: str = "",
             origin: Origin | None = None) -> Change:
        pending = self.prepare_edit(scope, path, old_string, new_string, replace_all=replace_all,
                                    expected_version=expected_version)
        return self.commit(pending, author=author, approval=approval, message=message, origin=origin)

    def delete(self, scope: str, path: str, *, expected_version: int | None = None,
               author: Author = "cli", approval: Approval = "cli", message: str = "",
               origin: Origin | None = None) -> Change:
        pending = self.prepare_delete(scope, path, expected_version=expected_version)
        return self.commit(pending, author=author, approval=approval, message=message, origin=origin)

    def move(self, scope: str, src: str, dst: str, *, author: Author = "cli",
             approval: Approval = "cli", message: str = "", mount: str = "",
             origin: Origin | None = None, expected_version: int | None = None) -> Change:
        """Move a file: a delete and a create revision in one transaction. With
        ``expected_version`` (the source version the mover read) a source that changed
        since raises ``StaleVersion`` and nothing is stored. Writers call
        ``vfs.writes.move``, which asks the policy first."""
        src = paths.normalize_file(src)
        dst = paths.normalize_file(dst)
        shown_src, shown_dst = mount + src, mount + dst
        _memory_scope(scope, shown_src)
        if src == dst:
            raise AlreadyExists(f"{shown_src} and {shown_dst} are the same file; give another destination")
        with self._write() as conn:
            row = self._live(conn, scope, src, shown_src)
            if expected_version is not None and row.version != expected_version:
                raise StaleVersion(f"{shown_src} changed since it was read (version {expected_version}, now "
                                   f"version {row.version}); nothing was moved: read it again and retry")
            self.validate(dst, row.content, shown=shown_dst)
            target = self._row(conn, scope, dst)
            if target is not None and not target.deleted:
                raise AlreadyExists(
                    f"{shown_dst} already exists; remove it first or choose another destination"
                )
            guard_new_file(conn, scope, dst, shown_dst)
            append(conn, scope, src, None, expected=row.version, author=author, approval=approval,
                   message=message or f"moved to {dst}", shown=shown_src, origin=origin)
            version = append(conn, scope, dst, row.content, expected=0, author=author, approval=approval,
                             message=message or f"moved from {src}", shown=shown_dst, origin=origin)
        return Change(dst, version, None, row.content)

    def revert(self, scope: str, path: str, to_version: int, *, author: Author = "cli",
               approval: Approval = "cli", message: str = "", shown: str | None = None,
               origin: Origin | None = None) -> Change:
        path = paths.normalize_file(path)
        shown = shown or path
        _memory_scope(scope, shown)
        with self._write() as conn:
            row = self._ever_row(conn, scope, path, shown)
            rev = self._revision(conn, row, to_version, shown)
            if rev.deleted:
                raise RevisionNotFound(
                    f"version {to_version} of {shown} is a deletion; to delete the file use rm, "
                    "or revert to a version that has content"
                )
            self.validate(path, rev.content, shown=shown)
            if row.deleted:
                guard_new_file(conn, scope, path, shown)
            version = append(conn, scope, path, rev.content, expected=0 if row.deleted else row.version,
                             author=author, approval=approval,
                             message=message or f"revert to version {to_version}", shown=shown,
                             origin=origin)
        return Change(path, version, None if row.deleted else row.content, rev.content)

    def bulk_write(self, scope: str, files: Mapping[str, str], *, author: Author = "import",
                   approval: Approval = "cli", message: str = "", origin: Origin | None = None,
                   expected_versions: Mapping[str, int] | None = None, create: bool = False) -> list[Change]:
        """Create or overwrite many files in one transaction, one revision each.

        All or nothing: every path and content is checked first (see ``vfs.bulk``).
        ``expected_versions`` (path -> the version the caller read, 0 for no file)
        makes the batch versioned: if any file named there changed, appeared or was
        deleted since, ``bulk.ChangedSince`` names it and nothing is stored.
        ``create`` creates the agent of the scope (``agent:<name>``) in the same
        transaction (``AlreadyExists`` if it exists), so an interrupted import leaves
        either no agent or the agent with all its files.
        Returns the changes in path order.
        """
        _memory_scope(scope, "/")
        batch = bulk.normalize_batch(files)
        expected = None if expected_versions is None else bulk.normalize_expected(expected_versions, batch)
        name = _agent_of(scope) if create else None
        for path in sorted(batch):
            self.validate(path, batch[path])
        try:
            with self._write() as conn:
                if name is not None:
                    _insert_agent(conn, name)
                return bulk.write_batch(conn, scope, batch, author=author, approval=approval, message=message,
                                        origin=origin, expected=expected)
        except (StaleVersion, IntegrityError):
            if expected is None:
                raise
            # A writer committed between the batch's check and its write (or ChangedSince
            # itself): name the files that moved, as they are now.
            with self._read() as conn:
                changed = bulk.find_drifts(conn, scope, expected)
            if changed:
                raise bulk.ChangedSince(changed) from None
            raise


def _agent_of(scope: str) -> str:
    """The agent name of an ``agent:<name>`` scope (bulk_write's ``create``)."""
    kind, _, name = scope.partition(":")
    if kind != "agent":
        raise VfsError(f"only an agent can be created with its files; {scope!r} is not an agent's scope")
    return check_agent_name(name)


def _insert_agent(conn: Connection, name: str) -> None:
    """Insert the agent row inside the caller's write transaction (files follow in it)."""
    try:
        conn.execute(insert(agents).values(name=name, created_at=now()))
    except IntegrityError:
        raise AlreadyExists(f"agent {name!r} already exists; pick another name") from None


# Every public method, and whether it writes: the outermost one retries on a new
# connection when the server dropped its connection (vfs/db.py:reconnecting). Wrapped
# here rather than decorated one by one so that the table is the only list;
# tests/test_reconnect.py checks that it covers every method of ``Store``.
_RECONNECTING: dict[str, db.Kind] = {
    "list_agents": "read", "require_agent": "read", "exists": "read", "stat": "read", "read": "read",
    "generation": "read", "all_files": "read", "ls": "read", "glob": "read", "grep": "read",
    "_grep_plain": "read", "history": "read", "blame": "read", "search": "read",
    "revision_content": "read", "diff": "read", "prepare_write": "read", "prepare_edit": "read",
    "prepare_delete": "read",
    "create_agent": "write", "commit": "write", "write": "write", "edit": "write", "delete": "write",
    "move": "write", "revert": "write", "bulk_write": "write",
}
for _name, _kind in _RECONNECTING.items():
    setattr(SqlStore, _name, db.reconnecting(_kind, lambda store: store.engine)(getattr(SqlStore, _name)))
del _name, _kind


class _Head(NamedTuple):
    content: str | None
    version: int
    deleted: bool


_HEAD_SQL = "SELECT content, version, deleted FROM files WHERE scope = ? AND path = ?"
_HEAD_SQL_PG = "SELECT content, version, deleted FROM files WHERE scope = %s AND path = %s"

# Ranges per ls query for the files between a directory's subdirectories (SQLite
# allows 500 terms in a compound SELECT).
_GAPS_PER_QUERY = 200


# ls's two queries as SQL text: building them as Core statements on every call cost
# more than running them (the text is compiled once per shape and cached).
_LS_DIRS = text("SELECT path, files FROM dirs WHERE scope = :scope AND depth = :depth "
                "AND path >= :lo AND path < :hi")


# Postgres: _ls_entries's two steps as one statement. The gaps between the child
# directories' ranges come from the directories themselves (each gap ends where the
# next directory's range begins and starts past the previous one's), and each gap
# is one range of the listing index.
_LS_PG = text("""
WITH d AS (
  SELECT path, files FROM dirs WHERE scope = :scope AND depth = :depth AND path >= :lo AND path < :hi),
b AS (
  SELECT (path || '/') COLLATE "C" AS below, (path || '0') COLLATE "C" AS past FROM d),
g AS (
  SELECT coalesce(lag(past) OVER (ORDER BY below), CAST(:lo AS text) COLLATE "C") AS g_lo, below AS g_hi FROM b
  UNION ALL
  SELECT coalesce((SELECT past FROM b ORDER BY below DESC LIMIT 1), CAST(:lo AS text) COLLATE "C"),
         CAST(:hi AS text) COLLATE "C")
SELECT path, files AS n, true AS dir FROM d
UNION ALL
SELECT f.path, f.size, false FROM g CROSS JOIN LATERAL (
  SELECT path, size FROM files
  WHERE scope = :scope AND path >= g.g_lo AND path < g.g_hi AND deleted = false) AS f
""")


@functools.lru_cache(maxsize=64)
def _ls_files_query(ranges: int) -> TextClause:
    """The live files in ``ranges`` ranges of paths (bounds ``lo0``/``hi0``...), one UNION ALL."""
    return text(" UNION ALL ".join(
        f"SELECT path, size FROM files WHERE scope = :scope AND path >= :lo{i} AND path < :hi{i} "
        "AND deleted = :live" for i in range(ranges)))


def _ls_entries(conn: Connection, args: dict[str, Any], cut: int) -> list[Entry]:
    """A folder's entries, unsorted: ``args`` has scope, depth, lo and hi (its range)."""
    # The child directories and their file counts: one range of the dirs index
    # (migration 0006), however many files lie below.
    subdirs = conn.execute(_LS_DIRS, args).all()
    out = [Entry(p[cut:], True, int(n)) for p, n in subdirs]
    # The files directly here lie in the gaps between the child directories'
    # ranges: read those ranges of the listing index only.
    gaps, start = [], args["lo"]
    for below in sorted(p + "/" for p, _ in subdirs):  # by range, not name: "a.b/" < "a/"
        gaps.append((start, below))
        start = below[:-1] + "0"  # "0" follows "/": past every path below
    gaps.append((start, args["hi"]))
    for i in range(0, len(gaps), _GAPS_PER_QUERY):
        chunk = gaps[i : i + _GAPS_PER_QUERY]
        query: dict[str, Any] = {"scope": args["scope"], "live": False}
        for j, (g_lo, g_hi) in enumerate(chunk):
            query[f"lo{j}"], query[f"hi{j}"] = g_lo, g_hi
        out += [Entry(p[cut:], False, int(size)) for p, size in conn.execute(_ls_files_query(len(chunk)), query)]
    return out


def _names_only(mode: str, regex: re.Pattern[str], keep: Any) -> str | None:
    """The literal whose ``LIKE`` pre-filter is already grep's exact answer for file names.

    Only for ``files_with_matches``, a pattern that is a case-sensitive literal without
    a newline (``search.exact_literal``), and whose every character ``fts.like_pattern``
    keeps as itself (no ``_`` wildcard), so ``LIKE '%lit%'`` holds exactly when a line
    contains it.
    """
    if mode != "files_with_matches" or keep is not None:
        return None
    lit = search.exact_literal(regex)
    from memagent.vfs.regexinfo import MIN_RUN, Needle, info, safe_char

    if lit is None or len(lit) < MIN_RUN or not all(safe_char(ch, False) for ch in lit):
        return None
    # The pre-filter built from the pattern must be that one LIKE (fts.candidates).
    return lit if info(regex).required == Needle(lit, False) else None


# Postgres' SQLSTATE for a statement cancelled by statement_timeout.
_QUERY_CANCELED = "57014"
_DB_CUT = ("grep stopped: the database's search (its regex pre-filter) ran past grep's time limit; "
           "simplify the pattern, or narrow the path or the glob")


def _timed_out(exc: DBAPIError) -> bool:
    return getattr(exc.orig, "sqlstate", None) == _QUERY_CANCELED


def _until_timeout(rows: Iterable[Any]) -> Iterator[tuple[str, str]]:
    """grep's rows; a statement timeout while streaming them ends the scan with a note."""
    try:
        yield from rows
    except DBAPIError as exc:
        if not _timed_out(exc):
            raise
        raise search.Cut(_DB_CUT) from None


_prefix_range = prefix_range


def _origin(row: Any) -> Origin | None:
    """A revision row's provenance (None for revisions stored before it was recorded)."""
    if row.origin is None:
        return None
    return Origin(row.origin, row.origin_thread, row.origin_turn, row.origin_run, row.origin_detail or "")


