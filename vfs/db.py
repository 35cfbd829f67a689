"""Opening a database: engine options per dialect, and migrations to head.

Invariants:
- SQLite connections run in WAL mode with foreign keys on and a busy timeout, and a
  transaction that will write starts with ``BEGIN IMMEDIATE`` (see ``WRITE``), so two
  processes never both read a snapshot and then fail to upgrade it to a write lock.
- ``connect`` leaves the schema at the newest migration: Alembic runs only when the
  recorded revision differs from head, so a warm start costs one small query.
- Migrations never run twice at once: on Postgres a transaction-level advisory lock
  (fixed key ``MIGRATION_LOCK``) is taken first in the very transaction that runs
  Alembic, and the revision is read again once it is held, so processes that start
  together on an empty database wait for the first one instead of racing it; on
  SQLite the ``BEGIN IMMEDIATE`` write lock does the same.
- No session state a transaction-pooling connection pooler (PgBouncer) would break:
  no prepared statements unless the connection is proven to reach the Postgres server
  itself, no advisory lock held across transactions, no ``SET`` without ``LOCAL``.
  Each transaction may run on a different server session. Proof of a direct line: a
  TCP connection whose peer address and port are the ones the server reports as its
  own (``inet_server_addr``/``inet_server_port``); a pooler answers from another
  port or address, and a Unix socket proves nothing, so those run unprepared.
- Connection failures surface as ``DatabaseUnavailable`` with the password masked,
  saying which step failed (opening the database, or migrating it).
- A dropped connection is never handed out twice: once a caller has seen one die
  (``is_disconnect``; a server restart or ``pg_terminate_backend`` ends every session
  at once), ``distrust_pool`` makes each pooled connection that was idle before that
  moment be tested at its next checkout and replaced if it is dead too. Retrying the
  call is the caller's decision (``SqlStore`` retries reads, and writes it can prove
  uncommitted).
- Diagnostics go to the ``memagent.vfs`` logger (database chosen, migrations run);
  this package configures no handler, so it is silent unless the CLI enables it.
"""

from __future__ import annotations

import logging
import select
import time
import weakref
from collections.abc import Callable
from contextvars import ContextVar
from functools import wraps
from pathlib import Path
from typing import Any, Literal, ParamSpec, TypeVar, cast

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

from memagent.vfs.backends import backend_for, backend_for_url
from memagent.vfs.backends.base import WRITE as WRITE  # the writing connections' option, re-exported
from memagent.vfs.errors import DatabaseUnavailable

MIGRATIONS = Path(__file__).parent / "migrations"
HEAD = "0013"
# Postgres advisory lock key held while migrating (any fixed 64-bit number; this
# one spells "memagent").
MIGRATION_LOCK = 0x6D656D6167656E74
# A pooled Postgres connection idle longer than this is tested before use (seconds).
PING_AFTER_IDLE = 2.0
# How long a process waits for another one's migration before giving up.
MIGRATION_WAIT_SECONDS = 300
# SQLSTATEs that mean the server ended the session: class 08 (connection exception),
# and admin_shutdown, crash_shutdown, cannot_connect_now (57P01-57P03).
_GONE_CLASS = "08"
_GONE_STATES = frozenset({"57P01", "57P02", "57P03"})

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
        backend = backend_for_url(parsed)
        # No backend: backend_for says "memagent does not run on ..." when the engine is used.
        engine = create_engine(url, pool_use_lifo=True) if backend is None else backend.create_engine(parsed, url)
        if backend is None or backend.drops_connections:
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

    A server that dropped its sessions may not have said so yet when a connection is
    checked out (``pg_terminate_backend`` returns before the backend writes its
    goodbye), so a connection can still fail on its first query; the caller that sees
    that calls ``distrust_pool``, and every connection idle since before then is
    tested at its next checkout, as if it had been idle long.
    """
    trust = _Trust()
    _TRUST[engine] = trust

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_conn: Any, record: Any) -> None:
        record.info["memagent_idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("memagent_idle_since")
        if since is None:
            return  # just opened
        if (time.monotonic() - since < PING_AFTER_IDLE and since > trust.distrusted_at
                and not _socket_has_news(dbapi_conn)):
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


class _Trust:
    """When a caller last saw one of the engine's connections die (monotonic seconds)."""

    def __init__(self) -> None:
        self.distrusted_at = float("-inf")


# Per engine (weakly: an engine that is gone takes its entry with it).
_TRUST: weakref.WeakKeyDictionary[Engine, _Trust] = weakref.WeakKeyDictionary()


def distrust_pool(engine: Engine) -> None:
    """Test every connection idle since before now at its next checkout.

    Called when one connection turned out dead: the server most likely ended the
    others at the same moment (a restart, a failover, ``pg_terminate_backend``), and
    the LIFO pool would otherwise hand them out one after another, each failing once.
    Connections opened from now on are not affected. (SQLite has nothing to drop.)
    """
    trust = _TRUST.get(engine)
    if trust is not None:
        trust.distrusted_at = time.monotonic()


def is_disconnect(exc: BaseException) -> bool:
    """Whether ``exc`` says the database connection is gone (not that a statement failed).

    SQLAlchemy flags what the dialect recognises (``connection_invalidated``); the
    driver's own errors (the raw-connection fast path) are recognised by SQLSTATE, or
    by the driver connection being closed or broken, which ``DisconnectionError``
    from a failed checkout ping, or a caller wrapping its raw connection, carries.
    """
    if isinstance(exc, DisconnectionError):
        return True
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        exc = exc.orig if exc.orig is not None else exc
    state = getattr(exc, "sqlstate", None)
    return isinstance(state, str) and (state.startswith(_GONE_CLASS) or state in _GONE_STATES)


def driver_is_dead(dbapi_conn: Any) -> bool:
    """Whether a driver connection is closed or broken (psycopg says so after losing it)."""
    return bool(getattr(dbapi_conn, "closed", False) or getattr(dbapi_conn, "broken", False))


# -- retrying a store call on a new connection -------------------------------------

Kind = Literal["read", "write"]
P = ParamSpec("P")
R = TypeVar("R")


class _Call:
    """One outermost store call: whether it has sent anything that may have committed."""

    __slots__ = ("may_have_committed", "proof", "what")

    def __init__(self) -> None:
        self.may_have_committed = False
        # A check, run on a new connection, that is True only if nothing of this call
        # committed (see ``committing``).
        self.proof: Callable[[], bool] | None = None
        self.what = ""


_CALL: ContextVar[_Call | None] = ContextVar("memagent_store_call", default=None)


def committing(*, proof: Callable[[], bool] | None = None, what: str = "") -> None:
    """Note that the current store call is about to send what may commit.

    A transaction's COMMIT is noted by itself (``watch_commits``); a statement run in
    autocommit must be noted by its caller before it is sent. ``proof`` (optional)
    tells afterwards, on a new connection, that nothing committed: an optimistic
    write's file still at the version it expected, for instance. ``what`` names the
    file in the error when neither holds.
    """
    call = _CALL.get()
    if call is not None:
        call.may_have_committed = True
        call.proof = proof
        call.what = what


def _on_commit(_conn: Any) -> None:
    # Fired before the DBAPI commit is sent: from here on the transaction may be stored.
    call = _CALL.get()
    if call is not None:
        call.may_have_committed = True


def watch_commits(engine: Engine) -> None:
    """Let ``reconnecting`` know when a call on ``engine`` sends a COMMIT."""
    if not event.contains(engine, "commit", _on_commit):
        event.listen(engine, "commit", _on_commit)


def reconnecting(kind: Kind, engine_of: Callable[[Any], Engine]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Run a store method again, once, on a new connection when its connection died.

    Only the outermost call retries (``write`` calls ``prepare_write`` and ``commit``;
    the whole ``write`` is what runs again). A read always may. A write may only while
    nothing of it may have committed: no COMMIT was sent (a transaction the server
    lost before its COMMIT is rolled back), or its ``proof`` holds on a new
    connection. Otherwise the change may be stored or not, and the caller gets a
    one-line ``DatabaseUnavailable`` saying so, never a second copy of the change.
    ``engine_of`` finds the engine from the method's first argument (the store).
    """

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @wraps(fn)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            if _CALL.get() is not None:
                return fn(*args, **kwargs)  # inside a store call: the outermost one retries
            engine = engine_of(args[0])
            for attempt in (1, 2):
                state = _Call()
                token = _CALL.set(state)
                try:
                    return fn(*args, **kwargs)
                except Exception as exc:
                    if not is_disconnect(exc):
                        raise
                    distrust_pool(engine)
                    reason = _reason(exc)
                    if kind == "write" and state.may_have_committed and not _proved(state):
                        what = state.what or "the change"
                        raise DatabaseUnavailable(
                            f"the database connection was lost while committing {what} ({reason}); "
                            "it may or may not be stored: look at its history (`memagent fs log`) "
                            "before making the change again") from None
                    if attempt == 2:
                        raise DatabaseUnavailable(
                            f"the database connection was lost again after reconnecting ({reason}); "
                            "nothing was changed; check that the database server is running") from None
                    log.info("the database dropped a connection (%s); running %s again on a new one",
                             reason, getattr(fn, "__name__", "the call"))
                finally:
                    _CALL.reset(token)
            raise AssertionError("unreachable: the second attempt returns or raises")

        return call

    return wrap


def retried(kind: Kind) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """The store's retry seam, on each of its methods: ``reconnecting`` over the store's
    engine. Every method of ``Store`` carries it with the kind it is (``__retried__``,
    which tests/test_reconnect.py checks), so a new method cannot miss its retry."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        call = reconnecting(kind, _engine_of_store)(fn)
        call.__retried__ = kind  # type: ignore[attr-defined]
        return call

    return wrap


def _engine_of_store(store: Any) -> Engine:
    return cast(Engine, store.engine)


def _proved(state: _Call) -> bool:
    """Whether the call's proof shows, on a new connection, that nothing of it committed."""
    if state.proof is None:
        return False
    try:
        return state.proof()
    except Exception as exc:  # the proof could not be read: nothing is proved
        log.info("could not check whether a lost commit was stored (%s)", _reason(exc))
        return False


def _reason(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc.__cause__ or exc
    lines = str(orig).strip().splitlines()
    return f"{type(orig).__name__}: {lines[0]}" if lines else type(orig).__name__


def _socket_has_news(dbapi_conn: Any) -> bool:
    """Whether an idle connection's socket is readable (or gone): the server spoke or hung up."""
    try:
        if dbapi_conn.closed or dbapi_conn.broken:
            return True
        readable, _, _ = select.select([dbapi_conn.fileno()], [], [], 0)
    except Exception:  # a closed socket, a driver without these attributes: test it
        return True
    return bool(readable)


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return _revision_on(conn)


def _revision_on(conn: Any) -> str | None:
    if not conn.dialect.has_table(conn, "alembic_version"):
        return None
    row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
    return row[0] if row else None


def _take_migration_lock(conn: Any) -> None:
    """Postgres: wait (bounded) for the migration lock, held until ``conn``'s transaction ends.

    Transaction-scoped, so it works through a transaction-pooling PgBouncer and is
    released by the commit or rollback that ends the migration, whatever happens.
    SQLite needs nothing: its ``BEGIN IMMEDIATE`` already serialises writers.
    """
    log.debug("waiting for the migration lock")
    try:
        backend_for(conn).migration_lock(conn, MIGRATION_WAIT_SECONDS, MIGRATION_LOCK)
    except DBAPIError:
        raise MigrationFailed(
            None,
            f"another process has been migrating it for over {MIGRATION_WAIT_SECONDS} s "
            "and still holds the migration lock",
        ) from None


def upgrade(engine: Engine) -> str | None:
    """Apply migrations up to head; return the revision found before (None = empty)."""
    before = current_revision(engine)
    if before == HEAD:
        log.debug("schema is at revision %s (head)", HEAD)
        return before
    # Alembic (~0.3 s to import) only when there is something to migrate.
    from alembic import command
    from alembic.config import Config
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    try:
        with engine.connect().execution_options(**{WRITE: True}) as conn:
            _take_migration_lock(conn)
            # Another process may have migrated while this one waited for the lock.
            before = _revision_on(conn)
            if before == HEAD:
                log.debug("schema reached head %s while waiting for the migration lock", HEAD)
                conn.rollback()
                return before
            log.info("migrating the schema from %s to %s", before or "an empty database", HEAD)
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
            conn.commit()
    except MigrationFailed as exc:
        raise MigrationFailed(before, exc.reason) from None
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
    backend = backend_for_url(parsed)
    missing = backend.missing_database(parsed) if backend is not None else None
    if missing is not None:
        raise DatabaseMissing(
            f"no database at {missing} yet; create one with `memagent init AGENT` "
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
