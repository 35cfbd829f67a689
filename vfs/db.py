"""Opening a database: engine options per dialect, and migrations to head.

Invariants:
- SQLite connections run in WAL mode with foreign keys on and a busy timeout, and a
  transaction that will write starts with ``BEGIN IMMEDIATE`` (see ``WRITE``), so two
  processes never both read a snapshot and then fail to upgrade it to a write lock.
- ``connect`` leaves the schema at the newest migration: Alembic runs only when the
  recorded revision differs from head, so a warm start costs one small query.
- Migrations never run twice at once: on Postgres a session advisory lock (fixed key
  ``MIGRATION_LOCK``, on a connection of its own) is held around the Alembic run and
  the revision is read again once it is held, so processes that start together on
  an empty database wait for the first one instead of racing it; on SQLite the
  ``BEGIN IMMEDIATE`` write lock does the same.
- Connection failures surface as ``DatabaseUnavailable`` with the password masked,
  saying which step failed (opening the database, or migrating it).
- Diagnostics go to the ``memagent.vfs`` logger (database chosen, migrations run);
  this package configures no handler, so it is silent unless the CLI enables it.
"""

from __future__ import annotations

import logging
import select
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    DisconnectionError,
    NoSuchModuleError,
    OperationalError,
    SQLAlchemyError,
)

from memagent.vfs.errors import DatabaseUnavailable

MIGRATIONS = Path(__file__).parent / "migrations"
HEAD = "0008"
# Execution option that marks a connection whose transaction will write.
WRITE = "memagent_write"
# Postgres advisory lock key held while migrating (any fixed 64-bit number; this
# one spells "memagent").
MIGRATION_LOCK = 0x6D656D6167656E74
# A pooled Postgres connection idle longer than this is tested before use (seconds).
PING_AFTER_IDLE = 2.0
# How long a process waits for another one's migration before giving up.
MIGRATION_WAIT_SECONDS = 300

log = logging.getLogger("memagent.vfs")


class MigrationFailed(SQLAlchemyError):
    """Migrating the schema failed; ``connect`` turns it into ``DatabaseUnavailable``."""

    def __init__(self, before: str | None, reason: str) -> None:
        self.before = before
        self.reason = reason
        super().__init__(reason)


def _shown(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def _sqlite_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": 30}, pool_use_lifo=True)  # see create()

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take over BEGIN from pysqlite so writes can start IMMEDIATE.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        if conn.get_execution_options().get(WRITE):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")

    return engine


def create(url: str) -> Engine:
    """An engine for ``url`` (not yet connected)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise DatabaseUnavailable(
            f"database URL {url!r} is not a SQLAlchemy URL; use sqlite:///PATH or "
            "postgresql+psycopg://USER@HOST/DB"
        ) from None
    try:
        if parsed.get_backend_name() == "sqlite":
            return _sqlite_engine(url)
        if parsed.get_backend_name() == "postgresql" and parsed.drivername == "postgresql":
            # Plain postgresql:// would pick psycopg2, which we do not ship.
            url = parsed.set(drivername="postgresql+psycopg").render_as_string(
                hide_password=False
            )
        # LIFO: the connection used last is used next, so a burst of calls runs on one
        # connection whose server process has its catalog caches, statement plans and
        # psycopg's prepared statements warm (FIFO rotated through every pooled one,
        # each cold: ls took 3 ms instead of 1).
        engine = create_engine(url, connect_args=_pg_args(parsed), pool_use_lifo=True)
        _ping_when_idle(engine)
        return engine
    except (NoSuchModuleError, ImportError) as exc:
        raise DatabaseUnavailable(
            f"no driver for database URL {_shown(url)} ({exc}); use sqlite:/// or "
            "postgresql+psycopg://"
        ) from None


def _ping_when_idle(engine: Engine) -> None:
    """Test a pooled connection before use only when it may have died.

    ``pool_pre_ping`` would send a query on every checkout: a round trip (~0.2 ms on
    loopback) on every read and two on every write, most of a hot call's cost.
    Instead a connection is tested when it sat idle for ``PING_AFTER_IDLE`` s, or
    when its socket has something to read although no query is running (a server
    that ends a session, on restart or an idle timeout, says so and closes the
    socket; noticing costs one non-blocking ``select``, no round trip). A dead one is
    replaced: ``DisconnectionError`` makes the pool open a new connection, as
    ``pool_pre_ping`` does.
    """

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_conn: Any, record: Any) -> None:
        record.info["memagent_idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("memagent_idle_since")
        if since is None:
            return  # just opened
        if time.monotonic() - since < PING_AFTER_IDLE and not _socket_has_news(dbapi_conn):
            return  # used a moment ago, and the server has not said anything since
        try:
            cur = dbapi_conn.cursor()
            try:
                cur.execute("SELECT 1")
            finally:
                cur.close()
            if not dbapi_conn.autocommit:
                dbapi_conn.rollback()  # end the transaction the ping began
        except Exception as exc:  # any driver error: the connection is unusable
            raise DisconnectionError(f"pooled connection is gone ({type(exc).__name__})") from exc


def _socket_has_news(dbapi_conn: Any) -> bool:
    """Whether an idle connection's socket is readable (or gone): the server spoke or hung up."""
    try:
        if dbapi_conn.closed or dbapi_conn.broken:
            return True
        readable, _, _ = select.select([dbapi_conn.fileno()], [], [], 0)
    except Exception:  # a closed socket, a driver without these attributes: test it
        return True
    return bool(readable)


def _pg_args(parsed: Any) -> dict[str, Any]:
    if parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
        return {"connect_timeout": 10}
    return {}


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        has = conn.dialect.has_table(conn, "alembic_version")
        if not has:
            return None
        row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
        return row[0] if row else None


@contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    """Hold the migration lock (Postgres; SQLite serialises writers by itself)."""
    if engine.dialect.name != "postgresql":
        yield
        return
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f"SET lock_timeout = '{MIGRATION_WAIT_SECONDS}s'"))
        log.debug("waiting for the migration lock")
        try:
            conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK})
        except DBAPIError:
            raise MigrationFailed(
                current_revision(engine),
                f"another process has been migrating it for over {MIGRATION_WAIT_SECONDS} s "
                "and still holds the migration lock",
            ) from None
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK})


def upgrade(engine: Engine) -> str | None:
    """Apply migrations up to head; return the revision found before (None = empty)."""
    before = current_revision(engine)
    if before == HEAD:
        log.debug("schema is at revision %s (head)", HEAD)
        return before
    # Alembic (~0.3 s to import) only when there is something to migrate.
    from alembic import command
    from alembic.config import Config
    with _migration_lock(engine):
        # Another process may have migrated while this one waited for the lock.
        before = current_revision(engine)
        if before == HEAD:
            log.debug("schema reached head %s while waiting for the migration lock", HEAD)
            return before
        log.info("migrating the schema from %s to %s", before or "an empty database", HEAD)
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        try:
            with engine.connect().execution_options(**{WRITE: True}) as conn:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
                conn.commit()
        except SQLAlchemyError as exc:
            detail = str(getattr(exc, "orig", None) or exc).strip()
            reason = type(exc).__name__ + (": " + detail.splitlines()[0] if detail else "")
            raise MigrationFailed(before, reason) from exc
        log.info("schema migrated to %s", HEAD)
    return before


class DatabaseMissing(DatabaseUnavailable):
    """A SQLite database file that does not exist (and was not to be created)."""


def require_existing(url: str) -> None:
    """Refuse a SQLite URL whose file does not exist, creating nothing (other URLs pass:
    a server database that is missing fails when it is opened)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return  # ``create`` reports a malformed URL
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return
    if not Path(parsed.database).expanduser().is_file():
        raise DatabaseMissing(
            f"no database at {parsed.database} yet; create one with `memagent init AGENT` "
            "(or point --db / MEMAGENT_DB at an existing one)"
        )


def connect(url: str, *, migrate: bool = True) -> Engine:
    """Open ``url``, check it answers, and migrate it to head."""
    engine = create(url)
    log.info("database %s", _shown(url))
    try:
        if migrate:
            upgrade(engine)
        else:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
    except MigrationFailed as exc:
        engine.dispose()
        raise DatabaseUnavailable(
            f"the database {_shown(url)} opened, but migrating its schema from "
            f"{exc.before or 'empty'} to {HEAD} failed ({exc.reason}); run `memagent db upgrade` "
            "to retry"
        ) from None
    except OperationalError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        engine.dispose()
        raise DatabaseUnavailable(
            f"cannot open the database {_shown(url)}: {reason}; check --db / MEMAGENT_DB "
            "and that the server is running"
        ) from None
    except SQLAlchemyError as exc:
        engine.dispose()
        raise DatabaseUnavailable(
            f"cannot use the database {_shown(url)}: {type(exc).__name__}; check --db / "
            "MEMAGENT_DB"
        ) from None
    return engine
