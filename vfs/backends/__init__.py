"""The databases memagent runs on, each one backend module behind ``base.Backend``.

``backend_for`` maps an engine or connection to its backend; ``Database`` is an
engine with its backend, the object the store hands to the thread and proposal
stores. Invariant: this package is the only code outside ``vfs/migrations/`` that
looks at which database it is talking to (``tests/test_backends.py`` enforces it);
a third database is one more module here and its migrations.

``postgres_roles``: database roles per user and row-level security grants (Postgres only).
``sqlite_fts``: SQLite's full-text tables, per-scope rowid blocks in buckets (SQLite only).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL

from memagent.vfs.backends.base import WRITE, Backend, Features
from memagent.vfs.backends.postgres import POSTGRES
from memagent.vfs.backends.sqlite import SQLITE
from memagent.vfs.errors import DatabaseUnavailable

__all__ = ["BACKENDS", "POSTGRES", "SQLITE", "WRITE", "Backend", "Database", "Features", "backend_for",
           "backend_for_url"]

# Every backend by SQLAlchemy dialect name.
BACKENDS: dict[str, Backend] = {SQLITE.name: SQLITE, POSTGRES.name: POSTGRES}


def backend_for(bind: Engine | Connection | Any) -> Backend:
    """The backend of an engine or connection (anything with a SQLAlchemy ``dialect``)."""
    found = BACKENDS.get(bind.dialect.name)
    if found is None:
        raise DatabaseUnavailable(f"memagent does not run on {bind.dialect.name}; use SQLite or Postgres")
    return found


def backend_for_url(url: URL) -> Backend | None:
    """The backend a parsed database URL names (None: a database memagent has no backend for)."""
    return BACKENDS.get(url.get_backend_name())


class Database:
    """An engine and its backend: what the store, its threads and its proposals share."""

    __slots__ = ("backend", "engine")

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.backend = backend_for(engine)

    @classmethod
    def of(cls, bind: Database | Engine) -> Database:
        """``bind`` itself, or an engine wrapped (callers that still pass an engine)."""
        return bind if isinstance(bind, Database) else cls(bind)

    def __repr__(self) -> str:
        return f"Database({self.backend.name}, {self.engine.url.render_as_string(hide_password=True)!r})"
