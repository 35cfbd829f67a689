"""The virtual filesystem: versioned files in scopes, stored in SQLite or Postgres.

Entry point: ``open_store(url)`` migrates the database and returns a ``SqlStore``
(close it with ``close()``, or use it as a context manager). Changes take one path:
``prepare_*`` returns a ``PendingChange`` (types.py), ``commit`` stores it
(revisions.py). Diagnostics go to the ``memagent.vfs`` logger, silent unless the
application configures logging. This package never imports ``memagent.agent``.
"""

from __future__ import annotations

from memagent.vfs.db import connect, require_existing
from memagent.vfs.store import SqlStore, Store, Validator


def open_store(url: str, *, validator: Validator | None = None, migrate: bool = True,
               create: bool = True) -> SqlStore:
    """``create=False`` refuses a SQLite file that does not exist (``DatabaseUnavailable``)
    instead of creating it and its folder: for commands that only read."""
    if not create:
        require_existing(url)
    return SqlStore(connect(url, migrate=migrate), validator=validator)


__all__ = ["SqlStore", "Store", "open_store"]
