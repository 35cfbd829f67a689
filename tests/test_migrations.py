"""Migrations: an empty database reaches head, with the tables the store needs, even
when several processes start on it at once; failures say what failed."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import inspect
from sqlalchemy.exc import IntegrityError

from memagent.vfs import db, open_store
from memagent.vfs.errors import DatabaseUnavailable


@pytest.mark.parametrize("db_url", ["sqlite", "postgres"], indirect=True)
def test_empty_to_head(db_url: str) -> None:
    engine = db.create(db_url)
    assert db.current_revision(engine) is None
    assert db.upgrade(engine) is None
    assert db.current_revision(engine) == db.HEAD
    tables = set(inspect(engine).get_table_names())
    assert {"agents", "files", "revisions", "threads", "messages", "alembic_version"} <= tables
    assert db.upgrade(engine) == db.HEAD  # second run is a no-op
    engine.dispose()
    store = open_store(db_url)  # and the store works on it
    store.create_agent("m", {"/AGENTS.md": "hello"})
    assert store.read("agent:m", "/AGENTS.md").content == "hello"
    store.close()


def test_sqlite_pragmas(tmp_path: object) -> None:
    store = open_store(f"sqlite:///{tmp_path}/p.db")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


# A child process: wait for "go" on stdin (so all start together), then open the
# database (which migrates it) and print one line saying how that went.
_OPENER = """
import sys
from memagent.vfs import open_store
url = sys.argv[1]
sys.stdin.readline()
try:
    with open_store(url) as st:
        print("ok" if st.list_agents() == [] else "not empty")
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}")
"""


def test_concurrent_first_start_on_postgres(fresh_pg_url: str) -> None:
    """Eight processes open one empty Postgres database at once: all of them succeed."""
    procs = [
        subprocess.Popen([sys.executable, "-c", _OPENER, fresh_pg_url], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(8)
    ]
    try:
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        # A hang fails this test (timeout), not the whole run.
        outcomes = [p.communicate(timeout=120)[0].strip() for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert outcomes == ["ok"] * 8
    engine = db.create(fresh_pg_url)
    assert db.current_revision(engine) == db.HEAD
    engine.dispose()


def test_failed_migration_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A migration that breaks is reported as a failed migration, not as a bad URL."""
    from alembic import command

    def broken(*_: object, **__: object) -> None:
        raise IntegrityError("CREATE TABLE agents", {}, Exception("duplicate key value violates unique constraint"))

    monkeypatch.setattr(command, "upgrade", broken)
    with pytest.raises(DatabaseUnavailable) as err:
        open_store(f"sqlite:///{tmp_path}/m.db")
    msg = str(err.value)
    assert f"migrating its schema from empty to {db.HEAD} failed" in msg
    assert "IntegrityError: duplicate key value" in msg and "\n" not in msg


def test_logs_database_and_migrations(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert logging.getLogger("memagent.vfs").handlers == []  # silent unless the CLI configures it
    parent = logging.getLogger("memagent")
    assert logging.getLogger("memagent.vfs").parent is parent
    url = "postgresql+psycopg://someone:s3cret@127.0.0.1:1/nowhere?connect_timeout=1"
    with caplog.at_level(logging.DEBUG, logger="memagent"), pytest.raises(DatabaseUnavailable):
        open_store(url)
    with caplog.at_level(logging.DEBUG, logger="memagent"):
        open_store(f"sqlite:///{tmp_path}/l.db").close()
    text = caplog.text
    assert "someone:***@127.0.0.1" in text and "s3cret" not in text
    assert f"migrating the schema from an empty database to {db.HEAD}" in text
    assert f"schema migrated to {db.HEAD}" in text
