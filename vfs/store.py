"""The store: every agent's, user's and org's files, versioned, in one database.

``Store`` is the one interface; ``SqlStore`` implements it over SQLAlchemy for SQLite
and Postgres alike. Invariants:

- Paths go through ``paths.normalize``; content through the validators (whoever
  calls: CLI, tools, revert, move, import) before anything is written.
- Each mutation is one transaction that updates ``files`` and appends exactly one
  revision; a refused mutation (stale version, invalid content, missing file) leaves
  the database as it was.
- Concurrency is optimistic: ``UPDATE ... WHERE version = <read version>`` decides
  which of two writers wins; the other gets ``StaleVersion`` and loses nothing it
  could not re-apply. Creating a file races on the (scope, path) unique key.
- Deleting keeps the row (``deleted``, content NULL) and its history, so a deleted
  file can be reverted and re-creating it continues its version numbers.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

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
    update,
)
from sqlalchemy.exc import IntegrityError

from memagent.vfs import db, paths, regexfilter, regexinfo
from memagent.vfs.errors import (
    AgentNotFound,
    AlreadyExists,
    EditMismatch,
    InvalidPath,
    IsADirectory,
    NotFound,
    RevisionNotFound,
    StaleVersion,
    ValidationFailed,
    VfsError,
)
from memagent.vfs.fts import Features, candidates, detect
from memagent.vfs.globbing import compile_glob, literal_prefix
from memagent.vfs.models import agents, files, revisions
from memagent.vfs.search import DEFAULT_LIMIT, check_mode, compile_pattern, scan, scan_plain
from memagent.vfs.types import (
    Change,
    Entry,
    FileContent,
    FileInfo,
    GrepResult,
    Revision,
)

if TYPE_CHECKING:
    from memagent.validators import Problem

Validator = Callable[[str, str], "Sequence[Problem]"]

AGENT_NAME_HELP = "agent names are 1-64 characters of a-z, 0-9, '-' and '_', starting with a letter or digit"


def _now() -> datetime:
    return datetime.now(UTC)


def _sha(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def _count_lines(content: str) -> int:
    if not content:
        return 0
    return content.count("\n") + (0 if content.endswith("\n") else 1)


def check_agent_name(name: str) -> str:
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", name or ""):
        raise VfsError(f"invalid agent name {name!r}: {AGENT_NAME_HELP}")
    return name


def _default_validator(path: str, content: str) -> Sequence[Problem]:
    from memagent.validators import validate

    return validate(path, content)


class Store(Protocol):
    """What the CLI, the tools and the benchmarks rely on."""

    def create_agent(self, name: str, files: dict[str, str] | None = None, *,
                     author: str = "cli", approval: str = "cli") -> None: ...
    def list_agents(self) -> list[str]: ...
    def require_agent(self, name: str) -> None: ...
    def exists(self, scope: str, path: str) -> bool: ...
    def stat(self, scope: str, path: str) -> FileInfo: ...
    def read(self, scope: str, path: str, *, offset: int = 0, limit: int | None = None) -> FileContent: ...
    def write(self, scope: str, path: str, content: str, *, expected_version: int | None = None,
              author: str = "cli", approval: str = "cli", message: str = "") -> Change: ...
    def edit(self, scope: str, path: str, old_string: str, new_string: str, *,
             replace_all: bool = False, expected_version: int | None = None,
             author: str = "cli", approval: str = "cli", message: str = "") -> Change: ...
    def delete(self, scope: str, path: str, *, expected_version: int | None = None,
               author: str = "cli", approval: str = "cli", message: str = "") -> Change: ...
    def move(self, scope: str, src: str, dst: str, *, author: str = "cli",
             approval: str = "cli", message: str = "") -> Change: ...
    def revert(self, scope: str, path: str, to_version: int, *, author: str = "cli",
               approval: str = "cli", message: str = "") -> Change: ...
    def ls(self, scope: str, path: str = "/") -> list[Entry]: ...
    def glob(self, scope: str, pattern: str, path: str = "/") -> list[str]: ...
    def grep(self, scope: str, pattern: str, *, path: str = "/", glob: str | None = None,
             output_mode: str = "files_with_matches", case_insensitive: bool = False,
             fixed_strings: bool = False, limit: int = DEFAULT_LIMIT) -> GrepResult: ...
    def history(self, scope: str, path: str) -> list[Revision]: ...
    def revision_content(self, scope: str, path: str, version: int) -> str | None: ...
    def diff(self, scope: str, path: str, from_version: int, to_version: int | None = None) -> str: ...
    def all_files(self, scope: str) -> list[FileInfo]: ...
    def validate(self, path: str, content: str) -> None: ...
    def generation(self, *scopes: str) -> int: ...
    def bulk_write(self, scope: str, files: Mapping[str, str], *, author: str = "import",
                   approval: str = "cli", message: str = "") -> list[Change]: ...


class SqlStore:
    """``Store`` over a SQLAlchemy engine (SQLite or Postgres)."""

    def __init__(self, engine: Engine, *, validator: Validator | None = None) -> None:
        self.engine = engine
        self.validator: Validator = validator or _default_validator
        self._read_options: dict[str, Any] = (
            {"isolation_level": "AUTOCOMMIT"} if engine.dialect.name == "postgresql" else {})
        # Which search indexes the database has; read on first use (see vfs/fts.py).
        self._search_features: Features | None = None

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
                     author: str = "cli", approval: str = "cli") -> None:
        """Create an agent and its starting files in one transaction (all or nothing)."""
        check_agent_name(name)
        start = {paths.normalize_file(p): c for p, c in (files or {}).items()}
        for path, content in start.items():
            self._validate(path, content)
        try:
            with self._write() as conn:
                conn.execute(insert(agents).values(name=name, created_at=_now()))
                for path, content in sorted(start.items()):
                    self._commit(conn, f"agent:{name}", path, None, content, author=author,
                                 approval=approval, message="init")
        except IntegrityError:
            raise AlreadyExists(f"agent {name!r} already exists; pick another name") from None

    def list_agents(self) -> list[str]:
        with self._read() as conn:
            return list(conn.scalars(select(agents.c.name).order_by(agents.c.name)))

    def require_agent(self, name: str) -> None:
        with self._read() as conn:
            found = conn.scalar(select(agents.c.id).where(agents.c.name == name))
        if found is None:
            raise AgentNotFound(
                f"no agent named {name!r}; create it with `memagent init {name}` "
                "or list agents with `memagent agents`"
            )

    # -- reading ------------------------------------------------------------

    def _row(self, conn: Connection, scope: str, path: str) -> Any:
        return conn.execute(
            select(files).where(files.c.scope == scope, files.c.path == path)
        ).first()

    def _live(self, conn: Connection, scope: str, path: str) -> Any:
        row = self._row(conn, scope, path)
        if row is None or row.deleted:
            if self._has_children(conn, scope, path):
                raise IsADirectory(f"{path} is a directory; use ls to see what is in it")
            raise NotFound(self._missing(conn, scope, path, row))
        return row

    def _missing(self, conn: Connection, scope: str, path: str, row: Any) -> str:
        if row is not None and row.deleted:
            return (
                f"{path} was deleted (version {row.version}); see its history with "
                f"`fs log {path}` and bring it back with `fs revert {path} --to N`"
            )
        return f"no file at {path}; use ls or glob to find the right path"

    def _has_children(self, conn: Connection, scope: str, path: str) -> bool:
        lo, hi = _prefix_range(paths.dir_prefix(path))
        return (
            conn.execute(
                select(files.c.id).where(
                    files.c.scope == scope,
                    files.c.path >= lo,
                    files.c.path < hi,
                    files.c.deleted.is_(False),
                ).limit(1)
            ).first()
            is not None
        )

    def exists(self, scope: str, path: str) -> bool:
        path = paths.normalize(path)
        with self._read() as conn:
            row = self._row(conn, scope, path)
            return row is not None and not row.deleted

    def stat(self, scope: str, path: str) -> FileInfo:
        path = paths.normalize_file(path)
        with self._read() as conn:
            row = self._live(conn, scope, path)
        return FileInfo(path, row.size, row.version, row.updated_at)

    def read(self, scope: str, path: str, *, offset: int = 0, limit: int | None = None) -> FileContent:
        path = paths.normalize_file(path)
        with self._read() as conn:
            row = self._live(conn, scope, path)
        content: str = row.content
        total = _count_lines(content)
        if offset < 0 or (limit is not None and limit < 0):
            raise VfsError("offset and limit must be zero or positive line counts")
        if offset == 0 and (limit is None or limit >= total):
            return FileContent(path, content, row.version, total, 0, total)
        if offset and offset >= total:
            raise VfsError(
                f"offset {offset} is past the end of {path}, which has {total} lines; "
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
            self._search_features = detect(conn)
        return self._search_features

    def ls(self, scope: str, path: str = "/") -> list[Entry]:
        path = paths.normalize(path)
        prefix = paths.dir_prefix(path)
        lo, hi = _prefix_range(prefix)
        with self._read() as conn:
            groups = conn.execute(
                _ls_query(conn.dialect.name),
                {"scope": scope, "lo": lo, "hi": hi, "start": len(prefix) + 1},
            ).all()
            if not groups and path != "/":
                row = conn.execute(
                    select(files.c.size).where(
                        files.c.scope == scope, files.c.path == path, files.c.deleted.is_(False)
                    )
                ).first()
                if row is not None:
                    return [Entry(paths.basename(path), False, row.size)]
                raise NotFound(f"no directory or file at {path}; use ls / to see the top level")
        out = [Entry(name, bool(is_dir), int(n if is_dir else size))
               for name, is_dir, n, size in groups]
        out.sort(key=lambda e: e.name)
        return out

    def glob(self, scope: str, pattern: str, path: str = "/") -> list[str]:
        base = paths.normalize(path)
        if pattern.startswith("/"):
            base, pattern = "/", pattern[1:]
        regex = compile_glob(pattern)
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
        return [p for p in rows if regex.match(p[cut:])]

    def grep(self, scope: str, pattern: str, *, path: str = "/", glob: str | None = None,
             output_mode: str = "files_with_matches", case_insensitive: bool = False,
             fixed_strings: bool = False, limit: int = DEFAULT_LIMIT) -> GrepResult:
        mode = check_mode(output_mode)
        regex = compile_pattern(pattern, case_insensitive=case_insensitive,
                                fixed_strings=fixed_strings)
        base = paths.normalize(path)
        prefix = paths.dir_prefix(base)
        glob_re = compile_glob(glob) if glob else None
        with self._read(transaction=True) as conn:
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
            query = select(files.c.path, files.c.content).where(and_(*cond)).order_by(files.c.path)
            if not pg_narrow:
                # Stream, so that a capped answer stops reading early. (Not for Postgres
                # with a pre-filter: a cursor would favour a path-ordered plan.)
                conn = conn.execution_options(yield_per=256)
            rows = conn.execute(query)
            cut = len(prefix)
            found = (
                (p, c) for p, c in rows
                if glob_re is None or glob_re.match(p[cut:] or paths.basename(p))
            )
            return scan(found, regex, mode, limit, keep)

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
        mode = check_mode(output_mode)
        regex = compile_pattern(pattern, case_insensitive=case_insensitive,
                                fixed_strings=fixed_strings)
        base = paths.normalize(path)
        prefix = paths.dir_prefix(base)
        glob_re = compile_glob(glob) if glob else None
        lo, hi = _prefix_range(prefix)
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
        cut = len(prefix)
        found = (
            (p, c) for p, c in rows if glob_re is None or glob_re.match(p[cut:] or paths.basename(p))
        )
        return scan_plain(found, regex, mode, limit)

    # -- history ------------------------------------------------------------

    def _ever_row(self, conn: Connection, scope: str, path: str) -> Any:
        """The file's row even when it is deleted (history, diff and revert need it)."""
        row = self._row(conn, scope, path)
        if row is None:
            raise NotFound(f"no file at {path} has ever existed; use glob to find the right path")
        return row

    def history(self, scope: str, path: str) -> list[Revision]:
        path = paths.normalize_file(path)
        with self._read() as conn:
            row = self._ever_row(conn, scope, path)
            revs = conn.execute(
                select(revisions).where(revisions.c.file_id == row.id).order_by(revisions.c.version.desc())
            ).all()
        return [
            Revision(path, r.version, r.author, r.approval, r.message, r.deleted, r.size, r.created_at)
            for r in revs
        ]

    def _revision(self, conn: Connection, file_row: Any, version: int, path: str) -> Any:
        rev = conn.execute(
            select(revisions).where(revisions.c.file_id == file_row.id, revisions.c.version == version)
        ).first()
        if rev is None:
            raise RevisionNotFound(
                f"{path} has no version {version}; it has versions 1 to {file_row.version} "
                f"(see `fs log {path}`)"
            )
        return rev

    def revision_content(self, scope: str, path: str, version: int) -> str | None:
        path = paths.normalize_file(path)
        with self._read() as conn:
            row = self._ever_row(conn, scope, path)
            rev = self._revision(conn, row, version, path)
        return None if rev.deleted else rev.content

    def diff(self, scope: str, path: str, from_version: int, to_version: int | None = None) -> str:
        path = paths.normalize_file(path)
        with self._read() as conn:
            row = self._ever_row(conn, scope, path)
            to_version = row.version if to_version is None else to_version
            a = self._revision(conn, row, from_version, path)
            b = self._revision(conn, row, to_version, path)
        return unified_diff(
            a.content if not a.deleted else None,
            b.content if not b.deleted else None,
            f"{path}@{from_version}",
            f"{path}@{to_version}",
        )

    # -- writing ------------------------------------------------------------

    def validate(self, path: str, content: str) -> None:
        """Raise ``ValidationFailed`` if ``content`` may not be stored at ``path``."""
        self._validate(path, content)

    def _validate(self, path: str, content: str) -> None:
        problems = self.validator(path, content)
        if problems:
            raise ValidationFailed(path, problems)

    def _check_expected(self, path: str, current: int, live: bool, expected: int | None) -> None:
        if expected is None:
            return
        have = current if live else 0
        if expected != have:
            if expected == 0:
                raise StaleVersion(
                    f"{path} already exists (version {current}); read it first and write "
                    "over the version you read"
                )
            raise StaleVersion(
                f"{path} changed since you read it (you read version {expected}, it is now "
                f"{'version ' + str(current) if live else 'deleted'}); read it again and "
                "re-apply your change"
            )

    def _commit(self, conn: Connection, scope: str, path: str, row: Any, content: str | None,
                *, author: str, approval: str, message: str) -> Change:
        """Append one revision (``content`` None = tombstone) after the row ``row``."""
        now = _now()
        size = len(content.encode("utf-8")) if content is not None else 0
        if row is None:
            try:
                file_id = conn.execute(
                    insert(files).values(
                        scope=scope, path=path, content=content, size=size,
                        sha256=_sha(content) if content is not None else None,
                        version=1, deleted=content is None, created_at=now, updated_at=now,
                    ).returning(files.c.id)
                ).scalar_one()
            except IntegrityError:
                raise StaleVersion(
                    f"{path} was created by someone else while you were writing it; "
                    "read it and re-apply your change"
                ) from None
            version, before = 1, None
        else:
            version = row.version + 1
            done = conn.execute(
                update(files)
                .where(files.c.id == row.id, files.c.version == row.version)
                .values(
                    content=content, size=size,
                    sha256=_sha(content) if content is not None else None,
                    version=version, deleted=content is None, updated_at=now,
                )
            )
            if done.rowcount != 1:
                raise StaleVersion(
                    f"{path} changed since you read it (version {row.version} is no longer "
                    "current); read it again and re-apply your change"
                )
            file_id = row.id
            before = None if row.deleted else row.content
        conn.execute(
            insert(revisions).values(
                file_id=file_id, version=version, author=author, approval=approval,
                message=message, content=content, deleted=content is None, size=size,
                created_at=now,
            )
        )
        return Change(path, version, before, content)

    def _guard_dir(self, conn: Connection, scope: str, path: str) -> None:
        if self._has_children(conn, scope, path):
            raise IsADirectory(f"{path} is a directory; write to a file path inside it")

    def write(self, scope: str, path: str, content: str, *, expected_version: int | None = None,
              author: str = "cli", approval: str = "cli", message: str = "") -> Change:
        path = paths.normalize_file(path)
        self._validate(path, content)
        with self._write() as conn:
            row = self._row(conn, scope, path)
            live = row is not None and not row.deleted
            self._check_expected(path, row.version if row else 0, live, expected_version)
            if not live:
                self._guard_dir(conn, scope, path)
                _guard_parents(conn, scope, path)
            return self._commit(conn, scope, path, row, content, author=author,
                                approval=approval, message=message or ("create" if not live else "write"))

    def edit(self, scope: str, path: str, old_string: str, new_string: str, *,
             replace_all: bool = False, expected_version: int | None = None,
             author: str = "cli", approval: str = "cli", message: str = "") -> Change:
        path = paths.normalize_file(path)
        with self._write() as conn:
            row = self._live(conn, scope, path)
            self._check_expected(path, row.version, True, expected_version)
            new = apply_edit(path, row.content, old_string, new_string, replace_all)
            self._validate(path, new)
            return self._commit(conn, scope, path, row, new, author=author,
                                approval=approval, message=message or "edit")

    def delete(self, scope: str, path: str, *, expected_version: int | None = None,
               author: str = "cli", approval: str = "cli", message: str = "") -> Change:
        path = paths.normalize_file(path)
        with self._write() as conn:
            row = self._live(conn, scope, path)
            self._check_expected(path, row.version, True, expected_version)
            return self._commit(conn, scope, path, row, None, author=author,
                                approval=approval, message=message or "delete")

    def move(self, scope: str, src: str, dst: str, *, author: str = "cli",
             approval: str = "cli", message: str = "") -> Change:
        src = paths.normalize_file(src)
        dst = paths.normalize_file(dst)
        if src == dst:
            raise AlreadyExists(f"{src} and {dst} are the same file; give another destination")
        with self._write() as conn:
            row = self._live(conn, scope, src)
            self._validate(dst, row.content)
            target = self._row(conn, scope, dst)
            if target is not None and not target.deleted:
                raise AlreadyExists(
                    f"{dst} already exists; remove it first or choose another destination"
                )
            self._guard_dir(conn, scope, dst)
            _guard_parents(conn, scope, dst)
            self._commit(conn, scope, src, row, None, author=author, approval=approval,
                         message=message or f"moved to {dst}")
            return self._commit(conn, scope, dst, target, row.content, author=author,
                                approval=approval, message=message or f"moved from {src}")

    def revert(self, scope: str, path: str, to_version: int, *, author: str = "cli",
               approval: str = "cli", message: str = "") -> Change:
        path = paths.normalize_file(path)
        with self._write() as conn:
            row = self._ever_row(conn, scope, path)
            rev = self._revision(conn, row, to_version, path)
            if rev.deleted:
                raise RevisionNotFound(
                    f"version {to_version} of {path} is a deletion; to delete the file use rm, "
                    "or revert to a version that has content"
                )
            self._validate(path, rev.content)
            if row.deleted:
                self._guard_dir(conn, scope, path)
            return self._commit(conn, scope, path, row, rev.content, author=author,
                                approval=approval, message=message or f"revert to version {to_version}")

    def bulk_write(self, scope: str, files: Mapping[str, str], *, author: str = "import",
                   approval: str = "cli", message: str = "") -> list[Change]:
        """Create or overwrite many files in one transaction, one revision each.

        All or nothing: every path and content is checked first (see ``vfs.bulk``).
        Returns the changes in path order.
        """
        from memagent.vfs.bulk import bulk_write

        return bulk_write(self, scope, files, author=author, approval=approval, message=message)


def _guard_parents(conn: Connection, scope: str, path: str) -> None:
    """A file cannot be created below a path that is itself a live file."""
    parent = paths.parent(path)
    candidates = []
    while parent != "/":
        candidates.append(parent)
        parent = paths.parent(parent)
    if not candidates:
        return
    clash = conn.scalar(
        select(files.c.path).where(
            files.c.scope == scope, files.c.path.in_(candidates), files.c.deleted.is_(False)
        ).limit(1)
    )
    if clash:
        raise InvalidPath(f"{clash} is a file, so {path} cannot be created below it; choose another path")


_LS_SQL = """
SELECT CASE WHEN cut > 0 THEN substr(rest, 1, cut - 1) ELSE rest END AS name,
       cut > 0 AS is_dir, count(*) AS n, max(size) AS size
FROM (SELECT substr(path, :start) AS rest, {find}(substr(path, :start), '/') AS cut, size
      FROM files
      WHERE scope = :scope AND path >= :lo AND path < :hi AND deleted = {false}) AS below
GROUP BY 1, 2
"""


def _ls_query(dialect: str) -> TextClause:
    """One row per entry of a directory: (name, is_dir, files below, size of a file).

    Grouped in the database over the listing index, so ls returns a directory's
    entries without sending every path below it to Python.
    """
    if dialect == "postgresql":
        return text(_LS_SQL.format(find="strpos", false="false"))
    return text(_LS_SQL.format(find="instr", false="0"))


def _prefix_range(prefix: str) -> tuple[str, str]:
    """[lo, hi) bounds so that ``lo <= p < hi`` iff ``p`` starts with ``prefix`` (bytewise)."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


def apply_edit(path: str, content: str, old: str, new: str, replace_all: bool) -> str:
    if old == "":
        raise EditMismatch("old_string is empty; give the exact text to replace (use write_file to rewrite a file)")
    if old == new:
        raise EditMismatch("old_string and new_string are the same; nothing would change")
    count = content.count(old)
    if count == 0:
        raise EditMismatch(
            f"old_string was not found in {path} (0 matches); read the file and copy the "
            "exact text, including whitespace and line breaks"
        )
    if count > 1 and not replace_all:
        raise EditMismatch(
            f"old_string appears {count} times in {path}; add surrounding lines to make it "
            "unique, or set replace_all to replace every occurrence"
        )
    return content.replace(old, new)


def unified_diff(before: str | None, after: str | None, a: str, b: str) -> str:
    """A unified diff; a missing side (new or deleted file) diffs against nothing."""
    lines = difflib.unified_diff(
        (before or "").splitlines(keepends=True),
        (after or "").splitlines(keepends=True),
        fromfile=a if before is not None else "/dev/null",
        tofile=b if after is not None else "/dev/null",
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)

