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
  adds the pending rows to its candidates (``vfs/grep/fts.py``), and search merges first.

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

from sqlalchemy import Engine, event
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from memagent.vfs.backends import backend_for

log = logging.getLogger("memagent.vfs")

DELAY = 0.05
MAX_DELAY = 1.0

_OWN = "memagent_pending_merge"  # execution option marking the merge's own connection
OWN_CONNECTION = _OWN  # for other background writers (vfs/embeddings/index.py)
_INSUFFICIENT_PRIVILEGE = "42501"


class PendingLists:
    """Merges the full-text indexes' pending entries after this engine's commits."""

    def __init__(self, engine: Engine, *, delay: float = DELAY, max_delay: float = MAX_DELAY,
                 background: Callable[[], None] | None = None) -> None:
        self._engine = engine
        self._background = background
        self._backend = backend_for(engine)
        # The database's own list says what anyone left pending (SQLite's fts_pending).
        self._shared = self._backend.pending_shared
        self._threaded = self._backend.merges_in_background(engine)
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
                if not (self._shared and search_only) and not (
                        self._search_dirty if search_only else self.dirty):
                    return
                self._search_dirty = False
                if self._shared or not search_only:
                    self._dirty_since = None
            try:
                merged = self._backend.merge_pending(self._engine, search_only=search_only, own=_OWN)
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

