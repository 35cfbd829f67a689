"""Postgres tenants cannot block each other (issue #36).

A managed role holds only the table privileges its grants need: a role whose grants
are all read-only gets SELECT on the memory tables (and writes only the derived
vector tables), so ``LOCK TABLE files IN ACCESS EXCLUSIVE MODE`` is refused to it;
migration 0013 narrows roles granted before. A writing role still may lock a table
(Postgres ties that to UPDATE), so every memagent session waits for a lock at most
its lock timeout (``MEMAGENT_LOCK_TIMEOUT``; the role's own default through a
pooler) and then says so in one line: run here through the real ``memagent``
command, directly and through the transaction-pooling PgBouncer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from memagent.vfs import db, open_store
from memagent.vfs.backends import postgres_roles as roles
from tests.cli_helpers import err, out, run
from tests.pg_roles import role_maker, role_url

ALICE_AGENT = "alice_notes"
BOB_AGENT = "bob_notes"
# Short, so the blocked commands below end soon; nothing asserts how soon.
SHORT_WAIT = {"MEMAGENT_LOCK_TIMEOUT": "0.3"}




@pytest.fixture
def team(fresh_pg_url: str) -> Iterator[Callable[[str], str]]:
    """``new_role(label)`` creates a uniquely named login role; all dropped afterwards."""
    store = open_store(fresh_pg_url)  # migrates to head as the owner
    try:
        store.create_agent(ALICE_AGENT, {"/AGENTS.md": "# Alice\n"})
        store.create_agent(BOB_AGENT, {"/AGENTS.md": "# Bob\n", "/notes.md": "buy oat milk\n"})
    finally:
        store.close()
    with role_maker(fresh_pg_url) as new_role:
        yield new_role


def lock_refused(engine: Engine, table: str) -> bool:
    """Whether ``engine``'s role is refused an ACCESS EXCLUSIVE lock on ``table`` (permission denied)."""
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE NOWAIT")
    except DBAPIError as exc:
        assert getattr(exc.orig, "sqlstate", None) == "42501", exc
        return True
    return False


MEMORY_TABLES = ("files", "dirs", "revisions", "agents", "threads", "messages", "proposals")


def test_a_read_only_role_cannot_lock_a_table(fresh_pg_url: str, team: Callable[[str], str]) -> None:
    reader = team("reader")
    owner = create_engine(fresh_pg_url)
    roles.grant(owner, reader, "agent", ALICE_AGENT, write=False)
    roles.grant(owner, reader, "org", "acme", write=False)
    engine = create_engine(role_url(fresh_pg_url, reader))
    try:
        for table in MEMORY_TABLES:
            assert lock_refused(engine, table), table
        with engine.begin() as conn:  # what its reads need is still there
            conn.exec_driver_sql("LOCK TABLE files IN ACCESS SHARE MODE")
            assert conn.scalar(text("SELECT count(*) FROM files WHERE scope = :s"),
                               {"s": f"agent:{ALICE_AGENT}"}) == 1
    finally:
        engine.dispose()
        owner.dispose()


def test_privileges_follow_the_grants(fresh_pg_url: str, team: Callable[[str], str]) -> None:
    """A write grant gives the writing privileges; revoking the last one takes them back."""
    name = team("mixed")
    owner = create_engine(fresh_pg_url)
    engine = create_engine(role_url(fresh_pg_url, name))
    try:
        roles.grant(owner, name, "agent", ALICE_AGENT, write=False)
        assert lock_refused(engine, "files")
        roles.grant(owner, name, "org", "acme", write=True)
        assert not lock_refused(engine, "files")  # UPDATE: Postgres lets it lock (see the timeout below)
        roles.revoke(owner, name, "org", "acme", write_only=True)
        assert lock_refused(engine, "files")
        roles.grant(owner, name, "user", "mixed", write=True)  # a user grant always writes
        assert not lock_refused(engine, "files")
        roles.revoke(owner, name, "user", "mixed")
        assert lock_refused(engine, "files")
    finally:
        engine.dispose()
        owner.dispose()


def test_migration_0013_narrows_roles_granted_before(fresh_pg_url: str, team: Callable[[str], str]) -> None:
    reader, writer = team("reader"), team("writer")
    owner = create_engine(fresh_pg_url)
    roles.grant(owner, reader, "agent", ALICE_AGENT, write=False)
    roles.grant(owner, writer, "agent", BOB_AGENT, write=True)
    tables = ", ".join(roles.APP_TABLES)
    with owner.begin() as conn:  # as `db grant` left them before 0013, at schema 0012
        for role in (reader, writer):
            conn.exec_driver_sql(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {tables} TO {role}")
            conn.exec_driver_sql(f"ALTER ROLE {role} IN DATABASE {make_url(fresh_pg_url).database} "
                                 "RESET lock_timeout")
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0012'")
    owner.dispose()
    reading, writing = (create_engine(role_url(fresh_pg_url, r)) for r in (reader, writer))
    try:
        assert not lock_refused(reading, "files")
        open_store(fresh_pg_url).close()  # the owner's next start migrates
        assert lock_refused(reading, "files")
        assert not lock_refused(writing, "files")
        for engine in (reading, writing):
            engine.dispose()  # a new session takes the role's default
            with engine.connect() as conn:
                assert conn.scalar(text("SHOW lock_timeout")) == f"{roles.LOCK_TIMEOUT_SECONDS}s"
    finally:
        reading.dispose()
        writing.dispose()


def one_line_lock_error(p: Any) -> None:
    assert p.returncode == 1, (out(p), err(p))
    lines = err(p).splitlines()
    assert len(lines) == 1 and "Traceback" not in err(p), err(p)
    assert lines[0].startswith("memagent: the database is locked by another session"), lines[0]
    assert "files" in lines[0], lines[0]


@pytest.mark.parametrize("via", ["direct", "pgbouncer"])
def test_a_writers_table_lock_does_not_hang_another_tenant(
        via: str, fresh_pg_url: str, team: Callable[[str], str], chat_env: None,
        request: pytest.FixtureRequest) -> None:
    base = fresh_pg_url if via == "direct" else str(request.getfixturevalue("fresh_pgbouncer_url"))
    mallory, bob = team("mallory"), team("bob")
    owner = create_engine(fresh_pg_url)
    roles.grant(owner, mallory, "agent", ALICE_AGENT, write=True)
    roles.grant(owner, bob, "agent", BOB_AGENT, write=True)
    owner.dispose()
    attacker = create_engine(role_url(fresh_pg_url, mallory))
    env = {"MEMAGENT_DB": role_url(base, bob), **SHORT_WAIT}
    try:
        with attacker.connect() as conn:
            conn.exec_driver_sql("BEGIN")
            conn.exec_driver_sql("LOCK TABLE files IN ACCESS EXCLUSIVE MODE")
            # The old code waits here forever: run's own timeout then fails the test.
            one_line_lock_error(run("fs", "cat", "/notes.md", "-a", BOB_AGENT, env=env, timeout=120))
            conn.exec_driver_sql("ROLLBACK")
        p = run("fs", "cat", "/notes.md", "-a", BOB_AGENT, env=env, timeout=120)
        assert p.returncode == 0 and out(p) == "buy oat milk\n", err(p)
    finally:
        attacker.dispose()


def test_a_tenants_lock_does_not_hang_the_owner(
        fresh_pg_url: str, team: Callable[[str], str], chat_env: None) -> None:
    mallory = team("mallory")
    owner = create_engine(fresh_pg_url)
    roles.grant(owner, mallory, "user", "mallory", write=True)
    owner.dispose()
    attacker = create_engine(role_url(fresh_pg_url, mallory))
    env = {"MEMAGENT_DB": fresh_pg_url, **SHORT_WAIT}
    try:
        with attacker.connect() as conn:
            conn.exec_driver_sql("BEGIN")
            conn.exec_driver_sql("LOCK TABLE files IN ACCESS EXCLUSIVE MODE")
            one_line_lock_error(run("fs", "cat", "/notes.md", "-a", BOB_AGENT, env=env, timeout=120))
            p = run("fs", "write", "/notes.md", "-a", BOB_AGENT, stdin="mine\n", env=env, timeout=120)
            one_line_lock_error(p)
            conn.exec_driver_sql("ROLLBACK")
    finally:
        attacker.dispose()


def test_a_bad_lock_timeout_is_one_line(fresh_pg_url: str, chat_env: None) -> None:
    open_store(fresh_pg_url).close()
    for bad in ("soon", "0", "-1", "nan"):
        p = run("agents", env={"MEMAGENT_DB": fresh_pg_url, "MEMAGENT_LOCK_TIMEOUT": bad})
        assert p.returncode == 1 and len(err(p).splitlines()) == 1, (bad, err(p))
        assert "MEMAGENT_LOCK_TIMEOUT" in err(p) and "Traceback" not in err(p), (bad, err(p))


def test_the_session_timeout_is_set_only_on_a_direct_line(
        fresh_pg_url: str, fresh_pgbouncer_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A direct session sets the lock timeout once; through PgBouncer only each transaction
    does (SET LOCAL), so no server session keeps memagent's value for another client."""
    monkeypatch.setenv("MEMAGENT_LOCK_TIMEOUT", "1.5")
    open_store(fresh_pg_url).close()
    direct = db.connect(fresh_pg_url)
    pooled = db.connect(fresh_pgbouncer_url)
    plain = create_engine(fresh_pgbouncer_url, connect_args={"prepare_threshold": None})
    try:
        with direct.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            assert conn.scalar(text("SHOW lock_timeout")) == "1500ms"
        for _ in range(3):  # every pooled server session (the bouncer hands out any)
            with pooled.begin() as conn:
                assert conn.scalar(text("SHOW lock_timeout")) == "1500ms"
            with pooled.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                assert conn.scalar(text("SHOW lock_timeout")) == "0"  # the owner's default
        with plain.connect() as conn:
            assert conn.scalar(text("SHOW lock_timeout")) == "0"
    finally:
        for engine in (direct, pooled, plain):
            engine.dispose()
