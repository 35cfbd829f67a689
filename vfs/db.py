"""Opening a database: engine options per dialect, and migrations to head.

Invariants:
- SQLite connections run in WAL mode with foreign keys on and a busy timeout, and a
  transaction that will write starts with ``BEGIN IMMEDIATE`` (see ``WRITE``), so two
  processes never both read a snapshot and then fail to upgrade it to a write lock.
- ``connect`` leaves the schema at the newest migration: Alembic runs only when the
  recorded revision differs from head, so a warm start costs one small query.
- Connection failures surface as ``DatabaseUnavailable`` with the password masked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError, SQLAlchemyError

from memagent.vfs.errors import DatabaseUnavailable

MIGRATIONS = Path(__file__).parent / "migrations"
HEAD = "0003"
# Execution option that marks a connection whose transaction will write.
WRITE = "memagent_write"


def _shown(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def _sqlite_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": 30})

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
        return create_engine(url, pool_pre_ping=True, connect_args=_pg_args(parsed))
    except (NoSuchModuleError, ImportError) as exc:
        raise DatabaseUnavailable(
            f"no driver for database URL {_shown(url)} ({exc}); use sqlite:/// or "
            "postgresql+psycopg://"
        ) from None


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


def upgrade(engine: Engine) -> str | None:
    """Apply migrations up to head; return the revision found before (None = empty)."""
    from alembic import command
    from alembic.config import Config

    before = current_revision(engine)
    if before == HEAD:
        return before
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.connect().execution_options(**{WRITE: True}) as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
        conn.commit()
    return before


def connect(url: str, *, migrate: bool = True) -> Engine:
    """Open ``url``, check it answers, and migrate it to head."""
    engine = create(url)
    try:
        if migrate:
            upgrade(engine)
        else:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
    except OperationalError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise DatabaseUnavailable(
            f"cannot open the database {_shown(url)}: {reason}; check --db / MEMAGENT_DB "
            "and that the server is running"
        ) from None
    except SQLAlchemyError as exc:
        raise DatabaseUnavailable(
            f"cannot use the database {_shown(url)}: {type(exc).__name__}; check --db / "
            "MEMAGENT_DB"
        ) from None
    return engine
