"""A Postgres server that drops the store's connections: every store call reconnects.

A restart, a failover or ``pg_terminate_backend`` ends every session at once, and
the pool still holds them. Each kind of store call, made right after that, must
succeed on a new connection (``vfs/db.py:reconnecting``); a write runs again only
while nothing of it can have committed, and otherwise says so in one line.

Three ways the drop is seen, each deterministic:
- ``waited``: the backends have exited (``pg_terminate_backend(pid, timeout)``
  returns when they are gone), so the pool's checkout test notices the closed socket;
- ``blind``: the same, but the checkout's socket test is told nothing arrived, as
  when the server's goodbye is still on its way: the call's first query fails on the
  dead connection and the call must run again;
- ``at once``: the call follows the kill without waiting, as a user's call would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Literal

import pytest
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url

from memagent.vfs import SqlStore, db, open_store
from memagent.vfs.errors import DatabaseUnavailable
from memagent.vfs.files.store import Store

S = "agent:a"
Mode = Literal["waited", "blind", "at once"]


@pytest.fixture
def admin(fresh_pg_url: str) -> Iterator[Engine]:
    engine = create_engine(make_url(fresh_pg_url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    yield engine
    engine.dispose()


def kill_all(admin: Engine, url: str, *, wait: bool) -> int:
    """End every session of ``url``'s database; with ``wait``, return once they are gone."""
    # pg_terminate_backend(pid, timeout) waits for the process to exit (Postgres 14+).
    call = "pg_terminate_backend(pid, 60000)" if wait else "pg_terminate_backend(pid)"
    with admin.connect() as conn:
        killed = conn.execute(text(f"SELECT count(*) FILTER (WHERE {call}) FROM pg_stat_activity "
                                   "WHERE datname = :db AND pid <> pg_backend_pid()"),
                              {"db": make_url(url).database}).scalar()
    return int(killed or 0)


def _calls(st: SqlStore) -> list[tuple[str, Callable[[], Any]]]:
    """Every kind of store call, each one valid on the state the calls before it left."""
    def commit_edit() -> Any:
        pending = st.prepare_edit(S, "/k.md", "one", "two")
        return st.commit(pending, author="cli", approval="cli")

    return [
        ("list_agents", lambda: st.list_agents() == ["a"]),
        ("require_agent", lambda: st.require_agent("a") is None),
        ("exists", lambda: st.exists(S, "/k.md")),
        ("stat", lambda: st.stat(S, "/k.md").version == 1),
        ("read", lambda: st.read(S, "/k.md").content == "one\n"),
        ("ls", lambda: [e.name for e in st.ls(S, "/")] == ["d", "k.md"]),
        ("glob", lambda: st.glob(S, "**/*.md") == ["/d/x.md", "/k.md"]),
        ("grep", lambda: st.grep(S, "one").files == ["/k.md"]),
        ("grep_plain", lambda: st._grep_plain(S, "one").files == ["/k.md"]),
        ("search", lambda: [r.path for r in st.search([S], "one")] == ["/k.md"]),
        ("history", lambda: [r.version for r in st.history(S, "/k.md")] == [1]),
        ("blame", lambda: len(st.blame(S, "/k.md")) == 1),
        ("revision_content", lambda: st.revision_content(S, "/k.md", 1) == "one\n"),
        ("diff", lambda: "one" in st.diff(S, "/d/x.md", 1) or st.diff(S, "/k.md", 1) == ""),
        ("all_files", lambda: [f.path for f in st.all_files(S)] == ["/d/x.md", "/k.md"]),
        ("generation", lambda: st.generation(S) == 2),
        ("prepare_write", lambda: st.prepare_write(S, "/k.md", "x\n").expected_version == 1),
        ("prepare_delete", lambda: st.prepare_delete(S, "/k.md").expected_version == 1),
        ("prepare_edit+commit", lambda: commit_edit().version == 2),
        ("write overwrite", lambda: st.write(S, "/k.md", "three\n", expected_version=2).version == 3),
        ("write create", lambda: st.write(S, "/new.md", "new\n").version == 1),
        ("edit", lambda: st.edit(S, "/k.md", "three", "four").version == 4),
        ("move", lambda: st.move(S, "/new.md", "/moved.md").version == 1),
        ("delete", lambda: st.delete(S, "/moved.md").version == 2),
        ("revert", lambda: st.revert(S, "/moved.md", 1).version == 3),
        ("bulk_write", lambda: [c.version for c in st.bulk_write(S, {"/b1.md": "b\n", "/k.md": "bulk\n"})]
         == [1, 5]),
        ("create_agent", lambda: st.create_agent("b", {"/hello.md": "hi\n"}) is None),
        ("list_agents after", lambda: st.list_agents() == ["a", "b"]),
        ("read after", lambda: st.read(S, "/k.md").content == "bulk\n"),
    ]


@pytest.mark.parametrize("mode", ["waited", "blind", "at once"])
def test_every_store_call_survives_dropped_connections(
        mode: Mode, fresh_pg_url: str, admin: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    if mode == "blind":
        # The server's goodbye has not arrived: checkout sees a quiet socket.
        monkeypatch.setattr(db, "_socket_has_news", lambda _conn: False)
    st = open_store(fresh_pg_url)
    try:
        st.create_agent("a")
        st.write(S, "/k.md", "one\n")
        st.write(S, "/d/x.md", "x\n")
        for name, call in _calls(st):
            killed = kill_all(admin, fresh_pg_url, wait=mode != "at once")
            assert killed >= 1, name  # the store held a connection, now dead
            assert call(), name
        # Every accepted write is exactly one revision: nothing ran twice.
        assert [r.version for r in st.history(S, "/k.md")] == [5, 4, 3, 2, 1]
        assert [r.version for r in st.history(S, "/moved.md")] == [3, 2, 1]
        assert st.read("agent:b", "/hello.md").content == "hi\n"
    finally:
        st.close()


WRITES = {"create_agent", "commit", "write", "edit", "delete", "move", "revert", "bulk_write"}


def test_every_store_method_retries_as_what_it_is() -> None:
    """A method added to ``Store`` must say whether it reads or writes (else no retry)."""
    methods = {n for n in vars(Store) if not n.startswith("_") and callable(getattr(Store, n))}
    methods -= {"validate", "close"}
    assert len(methods) > 20 and methods >= WRITES
    kinds = {n: getattr(getattr(SqlStore, n), "__retried__", None) for n in methods}
    assert kinds == {n: "write" if n in WRITES else "read" for n in methods}


def _kill_own_backend(admin: Engine, conn: Any) -> None:
    """End the server process behind a SQLAlchemy or DBAPI connection, and wait until it is gone."""
    dbapi = getattr(conn, "connection", conn)
    dbapi = getattr(dbapi, "dbapi_connection", dbapi)
    pid = dbapi.info.backend_pid
    with admin.connect() as a:
        assert a.execute(text("SELECT pg_terminate_backend(:pid, 60000)"), {"pid": pid}).scalar()


def test_overwrite_lost_in_flight_runs_again_once_proved_unstored(
        fresh_pg_url: str, admin: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The autocommit overwrite's connection dies as it is sent: the file still at the
    version it expected proves nothing committed, so it runs again, once."""
    monkeypatch.setattr(db, "_socket_has_news", lambda _conn: False)
    st = open_store(fresh_pg_url)
    try:
        st.create_agent("a")
        st.write(S, "/k.md", "one\n")
        armed = [True]

        @event.listens_for(st.engine, "before_cursor_execute")
        def _die(conn: Any, _cur: Any, statement: str, *_: Any) -> None:
            if armed[0] and "UPDATE files" in statement:
                armed[0] = False
                _kill_own_backend(admin, conn)

        assert st.write(S, "/k.md", "two\n", expected_version=1).version == 2
        assert not armed[0]  # the statement did meet a dead connection
        assert [r.version for r in st.history(S, "/k.md")] == [2, 1]
        assert st.read(S, "/k.md").content == "two\n"
    finally:
        st.close()


def test_lost_commit_is_never_run_twice(
        fresh_pg_url: str, admin: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """A move whose connection dies as its COMMIT is sent may or may not be stored: the
    caller is told so in one line, and the move is not made a second time."""
    monkeypatch.setattr(db, "_socket_has_news", lambda _conn: False)
    st = open_store(fresh_pg_url)
    try:
        st.create_agent("a")
        st.write(S, "/src.md", "one\n")
        armed = [True]

        @event.listens_for(st.engine, "commit")
        def _die(conn: Any) -> None:
            if armed[0]:
                armed[0] = False
                _kill_own_backend(admin, conn)

        with pytest.raises(DatabaseUnavailable, match="may or may not be stored") as err:
            st.move(S, "/src.md", "/dst.md")
        assert "\n" not in str(err.value)
        # The server lost the transaction before its COMMIT arrived: nothing moved, once.
        assert [r.version for r in st.history(S, "/src.md")] == [1]
        assert not st.exists(S, "/dst.md")
    finally:
        st.close()
