"""Migrations: an empty database reaches head, with the tables the store needs."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect

from memagent.vfs import db, open_store


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
    store.engine.dispose()


def test_sqlite_pragmas(tmp_path: object) -> None:
    store = open_store(f"sqlite:///{tmp_path}/p.db")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
