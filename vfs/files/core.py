"""What every part of the store shares: its database, transactions and file rows.

``StoreCore`` is the base of the store's parts (``vfs/files/listing.py``, ``vfs/files/grepping.py``,
``vfs/files/history.py``, ``vfs/files/mutations.py``), which ``vfs/files/store.py`` composes into
``SqlStore``. Invariants:

- Reads run on ``_read`` connections (the backend's ``read_options``: autocommit on
  Postgres), writes in one ``_write`` transaction each (``BEGIN IMMEDIATE`` on SQLite).
- ``_head`` is the one raw DBAPI read (content, version, deleted) of the hot paths;
  a connection it finds dead is dropped from the pool and reported as a disconnect,
  which each store method's ``db.retried`` retries.
- Nothing here branches on the database: what differs is ``self.db.backend``'s.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy import Connection, Engine, select
from sqlalchemy.exc import DisconnectionError

from memagent.vfs import db, paths
from memagent.vfs.backends import Database
from memagent.vfs.errors import IsADirectory, NotFound, ReadOnly, RevisionNotFound, ValidationFailed, VfsError
from memagent.vfs.files.revisions import has_children
from memagent.vfs.models import files, revisions
from memagent.vfs.types import Origin

if TYPE_CHECKING:
    from memagent.validators import Problem
    from memagent.vfs.embeddings.index import VectorIndex
    from memagent.vfs.grep.fts import Features
    from memagent.vfs.pending import PendingLists
    from memagent.vfs.search import lexical

Validator = Callable[[str, str], "Sequence[Problem]"]

AGENT_NAME_HELP = "agent names are 1-64 characters of a-z, 0-9, '-' and '_', starting with a letter or digit"

log = logging.getLogger("memagent.vfs")


def count_lines(content: str) -> int:
    if not content:
        return 0
    return content.count("\n") + (0 if content.endswith("\n") else 1)


def no_agent_message(name: str, *, role: str | None = None) -> str:
    """The one line for an agent that does not exist; `memagent init` is suggested only
    for a name it would accept. ``role``: the database role the caller logs in as, when
    it sees only what was granted to it (the agent may exist, hidden)."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", name or ""):
        return f"no agent named {name!r} ({AGENT_NAME_HELP}); list agents with `memagent agents`"
    if role is not None:
        return (f"no agent named {name!r} that the database role {role!r} may see; ask the database "
                f"owner to grant it (`memagent db grant {role} --agent {name}`) or list yours with "
                "`memagent agents`")
    return f"no agent named {name!r}; create it with `memagent init {name}` or list agents with `memagent agents`"


def check_agent_name(name: str) -> str:
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", name or ""):
        raise VfsError(f"invalid agent name {name!r}: {AGENT_NAME_HELP}")
    return name


def default_validator(path: str, content: str) -> Sequence[Problem]:
    from memagent.validators import validate

    return validate(path, content)


def memory_scope(scope: str, shown: str) -> None:
    """Memory writers never write a conversations scope: its files are derived from the
    thread's messages and kept by ``vfs/records/conversation_files.py`` alone (a file written here
    would also block the next render of a thread at that path)."""
    if scope.startswith(paths.scope_name("conversations", "")):
        raise ReadOnly(f"{shown} is read-only: /conversations/ holds past threads, kept by memagent; "
                       "write notes elsewhere, e.g. /knowledge/")


class _Head(NamedTuple):
    content: str | None
    version: int
    deleted: bool


def origin_of(row: Any) -> Origin | None:
    """A revision row's provenance (None for revisions stored before it was recorded)."""
    if row.origin is None:
        return None
    return Origin(row.origin, row.origin_thread, row.origin_turn, row.origin_run, row.origin_detail or "")


class StoreCore:
    """The database, transactions and row reads every part of ``SqlStore`` uses."""

    db: Database
    engine: Engine
    validator: Validator
    vectors: VectorIndex
    _pending: PendingLists
    _ranker: lexical.Ranker
    _search_features: Features | None

    # -- transactions -------------------------------------------------------

    @contextmanager
    def _read(self, *, transaction: bool = False) -> Iterator[Connection]:
        # Reads run in autocommit on Postgres: no BEGIN/ROLLBACK round trips around
        # a single SELECT (SQLite transactions are in-process and cost nothing).
        # grep needs a transaction there (server-side cursors, SET LOCAL).
        options = {} if transaction else self.db.backend.read_options
        with self.engine.connect().execution_options(**options) as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self.engine.connect().execution_options(**{db.WRITE: True}) as conn, conn.begin():
            yield conn

    # -- rows -------------------------------------------------------------

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
        try:
            got = self.db.backend.head(driver, scope, path)
        except Exception as exc:
            # Bypassing SQLAlchemy means noticing a dead connection here: drop it from
            # the pool (resetting a dead socket would only fail again, and hide this
            # error) and say it is a disconnect, which db.retried retries.
            if db.driver_is_dead(driver) or db.is_disconnect(exc):
                raw.invalidate(exc)
                raise DisconnectionError(f"the database dropped the connection ({type(exc).__name__})") from exc
            raise
        finally:
            raw.close()  # back to the pool; after invalidate() only the record returns
        return None if got is None else _Head(got[0], int(got[1]), bool(got[2]))

    def _ever_row(self, conn: Connection, scope: str, path: str, shown: str) -> Any:
        """The file's row even when it is deleted (history, diff and revert need it)."""
        row = self._row(conn, scope, path)
        if row is None:
            raise NotFound(f"no file at {shown} has ever existed; use glob to find the right path")
        return row

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

    def validate(self, path: str, content: str, *, shown: str | None = None) -> None:
        """Raise ``ValidationFailed`` if ``content`` may not be stored at ``path`` (named ``shown``)."""
        problems = self.validator(path, content)
        if problems:
            raise ValidationFailed(shown or path, problems)
