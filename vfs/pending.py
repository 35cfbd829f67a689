"""Merging the full-text indexes' pending entries soon after writes.

A write does not re-index its file's text in the full-text indexes itself; the
database notes the change and ``PendingLists`` merges it later (the writer is
several times faster, and merging many writes at once costs less than each alone):

- Postgres (migration 0007): both GIN indexes of ``files`` (trigram, full text)
  take a write's entries into a pending list that every query using the index
  scans until it is merged into the index tree (slow for readers when long).
- SQLite (migration 0008): triggers record in ``fts_pending`` each changed row and
  the text the FTS5 indexes still hold for it; merging deletes that text from both
  indexes, indexes the rows' current text and empties the table. Until then grep
  adds the pending rows to its candidates (``vfs/fts.py``), and search merges first.

For one store:

- every commit on the store's engine marks them dirty; a background thread merges
  ``DELAY`` seconds after the last commit (at most ``MAX_DELAY`` after the first),
  so a burst of writes is merged once;
- ``flush()`` merges now if this store wrote since the last merge: ``search``
  first merges what it reads (Postgres: the full-text index's list; SQLite: any
  pending row, whoever wrote it), and ``close`` merges everything last (a
  short-lived ``memagent fs write`` leaves nothing pending behind);
- after each of its merges the thread runs ``background`` (the store embeds the
  files noted for new vectors, ``vfs/embeddings/index.py``, when its model is
  loaded); ``flush`` and ``close`` never run it.

Invariants: nothing here changes what any query returns (a pending entry is found
either way; only the speed differs). Each merge is one transaction of its own, on
its own pooled connection, never inside a caller's transaction; on SQLite it takes
the write lock like any writer. On Postgres only the index owner may merge: a
store whose role may not logs it once and stops trying; autovacuum and the list's
size limit (``gin_pending_list_limit``) still merge for it, and for writers that
are not memagent. An in-memory SQLite database (one connection per thread) has no
background thread: its merges happen in search and close.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, Engine, event, text
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from memagent.vfs.db import WRITE

log = logging.getLogger("memagent.vfs")

DELAY = 0.05
MAX_DELAY = 1.0

# Every GIN index of ``files``, looked up each time: a large bulk load drops and
# re-creates them (new OIDs), and a database without pg_trgm has only one.
_MERGE = text(
    "SELECT gin_clean_pending_list(c.oid) FROM pg_index i "
    "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
    "WHERE i.indrelid = to_regclass('files') AND a.amname = 'gin'"
)
# What ``search`` waits for: only the full-text index it reads (merging a list costs
# milliseconds per index even for one write's entries; grep's trigram list waits
# for the thread).
_MERGE_SEARCH = text("SELECT gin_clean_pending_list(to_regclass('ix_files_search_doc'))")
# SQLite: the text each FTS5 index holds for a pending row out, the row's current
# text in (migration 0008 states the invariant these keep).
SQLITE_MERGE = {
    "files_fts": (
        "INSERT INTO files_fts(files_fts, rowid, content) "
        "SELECT 'delete', id, content FROM fts_pending WHERE content IS NOT NULL",
        "INSERT INTO files_fts(rowid, content) SELECT f.id, f.content FROM fts_pending AS p "
        "JOIN files AS f ON f.id = p.id WHERE f.content IS NOT NULL",
    ),
    "files_search": (
        "INSERT INTO files_search(files_search, rowid, path, content) "
        "SELECT 'delete', id, path, content FROM fts_pending WHERE content IS NOT NULL",
        "INSERT INTO files_search(rowid, path, content) SELECT f.id, f.path, f.content "
        "FROM fts_pending AS p JOIN files AS f ON f.id = p.id WHERE f.content IS NOT NULL",
    ),
}
_SQLITE_TABLES = text("SELECT name FROM sqlite_master WHERE type = 'table' "
                      "AND name IN ('fts_pending', 'files_fts', 'files_search')")
_OWN = "memagent_pending_merge"  # execution option marking the merge's own connection
OWN_CONNECTION = _OWN  # for other background writers (vfs/embeddings/index.py)
_INSUFFICIENT_PRIVILEGE = "42501"


class PendingLists:
    """Merges the full-text indexes' pending entries after this engine's commits."""

    def __init__(self, engine: Engine, *, delay: float = DELAY, max_delay: float = MAX_DELAY,
                 background: Callable[[], None] | None = None) -> None:
        self._engine = engine
        self._background = background
        self._sqlite = engine.dialect.name == "sqlite"
        self._threaded = not (self._sqlite and engine.url.database in (None, "", ":memory:"))
        self.delay = delay
        self.max_delay = max_delay
        self._cond = threading.Condition()
        self._merging = threading.Lock()  # one merge at a time (thread, search, close)
        self._dirty_since: float | None = None
        self._search_dirty = False  # Postgres: the full-text list may hold this store's entries
        self._last_commit = 0.0
        self._thread: threading.Thread | None = None
        self._closed = False
        self.off = False  # set when the server refused a merge for good
        self.merges = 0  # merges run (for tests and the bench)
        event.listen(engine, "commit", self._on_commit)

    def _on_commit(self, conn: Any) -> None:
        if self.off or self._closed or conn.get_execution_options().get(_OWN):
            return
        with self._cond:
            now = time.monotonic()
            if self._dirty_since is None:
                self._dirty_since = now
            self._search_dirty = True
            self._last_commit = now
            if self._thread is None and self._threaded:
                self._thread = threading.Thread(target=self._run, name="memagent-index-merge", daemon=True)
                self._thread.start()
            self._cond.notify()

    @property
    def dirty(self) -> bool:
        return self._dirty_since is not None

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._dirty_since is None and not self._closed:
                    self._cond.wait()
                if self._closed or self._dirty_since is None:
                    return
                due = min(self._last_commit + self.delay, self._dirty_since + self.max_delay)
                wait = due - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
            self.flush()
            if self._background is not None:
                self._background()

    def flush(self, *, search_only: bool = False) -> None:
        """Merge now what this store left pending.

        ``search_only``: what ``search`` reads. On Postgres that is the full-text
        index's list, if this store wrote since its last merge; on SQLite every
        pending row, whoever wrote it (the table says, at the cost of one lookup).
        """
        with self._merging:
            with self._cond:
                if self.off:
                    return
                if not (self._sqlite and search_only) and not (
                        self._search_dirty if search_only else self.dirty):
                    return
                self._search_dirty = False
                if self._sqlite or not search_only:
                    self._dirty_since = None
            try:
                if self._sqlite:
                    merged = self._merge_sqlite()
                else:
                    with self._engine.connect().execution_options(
                            isolation_level="AUTOCOMMIT", **{_OWN: True}) as conn:
                        conn.execute(_MERGE_SEARCH if search_only else _MERGE).all()
                    merged = True
                self.merges += merged
            except DBAPIError as exc:
                code = getattr(exc.orig, "sqlstate", None)
                if code == _INSUFFICIENT_PRIVILEGE:
                    self.off = True
                    log.info("cannot merge the search indexes' pending lists (%s); "
                             "autovacuum will do it", str(exc.orig).strip().splitlines()[0])
                else:
                    log.debug("merging the search indexes' pending entries failed: %s", exc.orig)
            except SQLAlchemyError as exc:  # pool or connection trouble: try again after the next write
                log.debug("merging the search indexes' pending entries failed: %s", exc)

    def _merge_sqlite(self) -> bool:
        with self._engine.connect().execution_options(**{_OWN: True}) as conn:
            tables = set(conn.scalars(_SQLITE_TABLES))
            if "fts_pending" not in tables or not _has_pending(conn):
                return False  # a schema before 0008, or nothing to merge: no write lock taken
        with self._engine.connect().execution_options(**{WRITE: True, _OWN: True}) as conn, conn.begin():
            for index, statements in SQLITE_MERGE.items():
                if index in tables:
                    for statement in statements:
                        conn.exec_driver_sql(statement)
            conn.exec_driver_sql("DELETE FROM fts_pending")
        return True

    def close(self) -> None:
        """Merge what this store left pending, stop the thread, and stop listening."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        thread = self._thread
        if thread is not None:
            thread.join()
        self.flush()
        if event.contains(self._engine, "commit", self._on_commit):
            event.remove(self._engine, "commit", self._on_commit)


def _has_pending(conn: Connection) -> bool:
    return conn.exec_driver_sql("SELECT EXISTS (SELECT 1 FROM fts_pending)").scalar() == 1
