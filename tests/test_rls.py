"""Roles per user and row-level security on Postgres (migration 0010, ``memagent db role/grant``).

For every table holding memory, revisions, threads, proposals or vectors, another
user's role sees none of its rows and changes none of them, with raw SQL; the same
holds through the real ``memagent`` command logging in as the role; ``/user/`` and
``/org/`` are reachable as granted; a revoke takes access away; every command works
as a role. Roles are cluster-wide: each test makes its own, uniquely named, and
drops it. SQLite refuses the commands in one line (exit 2).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import DBAPIError

from bench.fake_messages_api import FakeMessagesAPI
from memagent.vfs import open_store
from memagent.vfs.backends import postgres_roles as roles
from memagent.vfs.errors import VfsError
from memagent.vfs.scopes import AgentView
from tests.cli_helpers import MEMAGENT, err, out, run
from tests.pg_roles import PASSWORD, role_maker, role_url

ALICE_AGENT = "alice_notes"
BOB_AGENT = "bob_notes"
# Tables every role shares or only reads (no memory in them, or the grants themselves).
NOT_FILTERED = {"alembic_version", "memagent_grants", "memagent_roles", "embedding_state"}




@pytest.fixture
def team(fresh_pg_url: str) -> Iterator[Callable[[str], str]]:
    """``new_role(label)`` creates a uniquely named login role and returns its URL; all dropped after."""
    owner = open_store(fresh_pg_url)  # migrates to head as the owner
    owner.close()
    with role_maker(fresh_pg_url) as new_role:
        yield new_role


def as_role(owner_url: str, role: str) -> Engine:
    return create_engine(role_url(owner_url, role))


# -- raw SQL, table by table ----------------------------------------------------------

def seed_alice(owner_url: str) -> dict[str, Any]:
    """Owner-written rows of agent ALICE_AGENT in every filtered table; their ids."""
    store = open_store(owner_url)
    try:
        store.create_agent(ALICE_AGENT, {"/AGENTS.md": "# Alice\n", "/notes/todo.md": "buy milk\n"})
        store.write(f"agent:{ALICE_AGENT}", "/notes/todo.md", "buy milk and tea\n")
    finally:
        store.close()
    engine = create_engine(owner_url)
    tid = str(uuid.uuid4())
    with engine.begin() as c:
        fid = c.scalar(text("SELECT id FROM files WHERE scope = :s AND path = '/notes/todo.md'"),
                       {"s": f"agent:{ALICE_AGENT}"})
        c.execute(text("INSERT INTO threads(id, agent, title, model, created_at, updated_at, stale) "
                       "VALUES (:t, :a, 'x', 'm', now(), now(), false)"), {"t": tid, "a": ALICE_AGENT})
        c.execute(text("INSERT INTO messages(thread_id, seq, role, content, created_at) "
                       "VALUES (:t, 1, 'user', '\"hi\"', now())"), {"t": tid})
        c.execute(text("INSERT INTO thread_events(thread_id, kind, data, created_at) "
                       "VALUES (:t, 'tool', '{}', now())"), {"t": tid})
        c.execute(text("INSERT INTO thread_summaries(thread_id, upto_seq, text, method, created_at) "
                       "VALUES (:t, 1, 'said hi', 'model', now())"), {"t": tid})
        run_id = c.scalar(text(
            "INSERT INTO reflection_runs(agent, status, holder, started_at, heartbeat_at, proposals, model, note) "
            "VALUES (:a, 'done', '', now(), now(), 1, 'm', '') RETURNING id"), {"a": ALICE_AGENT})
        c.execute(text(
            "INSERT INTO proposals(agent, run_id, scope, path, shown, op, base_version, after, reason, status, "
            "feedback, created_at) VALUES (:a, :r, :s, '/AGENTS.md', '/AGENTS.md', 'edit', 1, 'x', 'r', "
            "'pending', '', now())"), {"a": ALICE_AGENT, "r": run_id, "s": f"agent:{ALICE_AGENT}"})
        c.execute(text("INSERT INTO embeddings(file_id, scope, chunk, model, dim, version, gen, vector) "
                       "VALUES (:f, :s, 0, 'm', 1, 2, 1, '\\x00000000')"), {"f": fid, "s": f"agent:{ALICE_AGENT}"})
        counts = {t: c.scalar(text(f"SELECT count(*) FROM {t}")) for t in roles.APP_TABLES}
    engine.dispose()
    assert all(counts.values()), counts  # every filtered table holds some of alice's rows
    return {"file": fid, "thread": tid, "run": run_id, "counts": counts}


# One INSERT per table that would put a row into alice's agent.
INSERTS = {
    "agents": "INSERT INTO agents(name, created_at) VALUES ('alice_notes2', now())",
    "files": "INSERT INTO files(scope, path, content, size, version, deleted, created_at, updated_at) "
             "VALUES ('agent:alice_notes', '/evil.md', 'x', 1, 1, false, now(), now())",
    "dirs": "INSERT INTO dirs(scope, path, depth, files) VALUES ('agent:alice_notes', '/evil', 1, 1)",
    "revisions": "INSERT INTO revisions(file_id, version, author, approval, message, content, deleted, size, "
                 "created_at) VALUES (:file, 99, 'cli', 'cli', '', 'x', false, 1, now())",
    "threads": "INSERT INTO threads(id, agent, title, model, created_at, updated_at, stale) "
               "VALUES ('evil', 'alice_notes', '', '', now(), now(), false)",
    "messages": "INSERT INTO messages(thread_id, seq, role, content, created_at) "
                "VALUES (:thread, 9, 'user', '\"x\"', now())",
    "thread_events": "INSERT INTO thread_events(thread_id, kind, data, created_at) "
                     "VALUES (:thread, 'x', '{}', now())",
    "thread_summaries": "INSERT INTO thread_summaries(thread_id, upto_seq, text, method, created_at) "
                        "VALUES (:thread, 1, 'x', 'model', now())",
    "reflection_runs": "INSERT INTO reflection_runs(agent, status, holder, started_at, heartbeat_at, proposals, "
                       "model, note) VALUES ('alice_notes', 'done', '', now(), now(), 0, '', '')",
    "proposals": "INSERT INTO proposals(agent, run_id, scope, path, shown, op, base_version, reason, status, "
                 "feedback, created_at) VALUES ('alice_notes', :run, 'agent:alice_notes', '/x', '/x', 'write', "
                 "0, '', 'pending', '', now())",
    "embeddings": "INSERT INTO embeddings(file_id, scope, chunk, model, dim, version, gen, vector) "
                  "VALUES (:file, 'agent:alice_notes', 1, 'm', 1, 2, 1, '\\x00000000')",
    "embedding_pending": "INSERT INTO embedding_pending(file_id, seq) VALUES (:file, 1) "
                         "ON CONFLICT (file_id) DO UPDATE SET seq = 2",
}
# A column each UPDATE rewrites to itself (the statement only has to touch the rows).
SOME_COLUMN = {"dirs": "files", "embedding_pending": "seq", "threads": "title"}


def test_every_table_with_memory_has_row_level_security(fresh_pg_url: str) -> None:
    open_store(fresh_pg_url).close()
    engine = create_engine(fresh_pg_url)
    with engine.connect() as c:
        rows = c.execute(text("SELECT relname, relrowsecurity, relforcerowsecurity FROM pg_class "
                              "WHERE relnamespace = to_regnamespace(current_schema()) AND relkind = 'r'")).all()
    engine.dispose()
    tables = {r.relname: (r.relrowsecurity, r.relforcerowsecurity) for r in rows}
    # A new table must be filtered (listed in APP_TABLES) or be named here as holding no memory.
    assert set(tables) - NOT_FILTERED == set(roles.APP_TABLES) == set(INSERTS)
    for name in roles.APP_TABLES:
        assert tables[name] == (True, False), name  # enabled, not forced: the owner keeps full access
    assert tables["memagent_grants"][0] and tables["memagent_roles"][0]


def test_another_users_role_sees_no_row_and_changes_none_with_raw_sql(
        fresh_pg_url: str, team: Callable[[str], str]) -> None:
    ids = seed_alice(fresh_pg_url)
    owner = create_engine(fresh_pg_url)
    alice, bob = team("alice"), team("bob")
    roles.grant(owner, alice, "agent", ALICE_AGENT, write=True)
    roles.grant(owner, bob, "agent", BOB_AGENT, write=True)
    params = {"file": ids["file"], "thread": ids["thread"], "run": ids["run"]}
    a, b = as_role(fresh_pg_url, alice), as_role(fresh_pg_url, bob)
    try:
        for table in roles.APP_TABLES:
            with a.connect() as c:  # the positive control: alice's role sees all of hers
                assert c.scalar(text(f"SELECT count(*) FROM {table}")) == ids["counts"][table], table
            with b.begin() as c:
                assert c.scalar(text(f"SELECT count(*) FROM {table}")) == 0, table
                col = SOME_COLUMN.get(table, "id")
                assert c.execute(text(f"UPDATE {table} SET {col} = {col}")).rowcount == 0, table
                assert c.execute(text(f"DELETE FROM {table}")).rowcount == 0, table
            with b.connect() as c, pytest.raises(DBAPIError, match="row-level security") as refused:
                c.execute(text(INSERTS[table]), params)
            assert getattr(refused.value.orig, "sqlstate", None) == "42501", table
        with b.connect() as c:
            # Nor does bob learn who else was granted what, nor grant himself anything.
            assert [r.scope for r in c.execute(text("SELECT scope FROM memagent_grants"))] == [
                f"agent:{BOB_AGENT}", f"conversations:{BOB_AGENT}", f"settings:{BOB_AGENT}"]
            with pytest.raises(DBAPIError, match="permission denied"):
                c.execute(text("INSERT INTO memagent_grants VALUES (:r, 'agent:alice_notes', true)"), {"r": bob})
        with owner.connect() as c:  # nothing bob ran changed anything
            assert {t: c.scalar(text(f"SELECT count(*) FROM {t}")) for t in roles.APP_TABLES} == ids["counts"]
    finally:
        a.dispose()
        b.dispose()
        owner.dispose()


def test_user_and_org_scopes_as_granted_and_revoke(fresh_pg_url: str, team: Callable[[str], str]) -> None:
    owner_store = open_store(fresh_pg_url)
    owner_store.write("org:acme", "/policy.md", "be kind\n")
    owner_store.write("user:bob", "/prefs.md", "tea\n")
    owner_store.write("user:carol", "/prefs.md", "coffee\n")
    owner_store.close()
    owner = create_engine(fresh_pg_url)
    bob = team("bob")
    roles.grant(owner, bob, "user", "bob", write=True)
    store = open_store(role_url(fresh_pg_url, bob))
    try:
        assert store.read("user:bob", "/prefs.md").content == "tea\n"
        store.write("user:bob", "/prefs.md", "green tea\n")
        with pytest.raises(VfsError, match="no file"):
            store.read("user:carol", "/prefs.md")
        with pytest.raises(roles.PermissionDenied, match="row-level security"):
            store.write("user:carol", "/new.md", "mine now\n")
        with pytest.raises(VfsError, match="no file"):
            store.read("org:acme", "/policy.md")
        roles.grant(owner, bob, "org", "acme", write=False)
        assert store.read("org:acme", "/policy.md").content == "be kind\n"
        with pytest.raises(roles.PermissionDenied, match="/policy.md is read-only to this database role"):
            store.write("org:acme", "/policy.md", "be mean\n")
        with pytest.raises(roles.PermissionDenied, match="row-level security"):
            store.write("org:acme", "/new.md", "mine\n")
        roles.grant(owner, bob, "org", "acme", write=True)
        store.write("org:acme", "/policy.md", "be very kind\n")
        # revoke --org acme --write: the right to change it goes, reading stays.
        assert roles.revoke(owner, bob, "org", "acme", write_only=True) == 1
        assert store.read("org:acme", "/policy.md").content == "be very kind\n"
        with pytest.raises(roles.PermissionDenied, match="read-only to this database role"):
            store.write("org:acme", "/policy.md", "be mean\n")
        assert roles.revoke(owner, bob, "org", "acme", write_only=True) == 0
        assert roles.revoke(owner, bob, "org", "acme") == 1
        with pytest.raises(VfsError, match="no file"):
            store.read("org:acme", "/policy.md")
        assert roles.revoke(owner, bob, "org", "acme") == 0
    finally:
        store.close()
        owner.dispose()
    check = open_store(fresh_pg_url)
    try:
        assert check.read("org:acme", "/policy.md").content == "be very kind\n"
        assert check.read("user:carol", "/prefs.md").content == "coffee\n"
        assert not check.exists("user:carol", "/new.md")
    finally:
        check.close()


def test_scram_verifier_is_the_one_postgres_checks(fresh_pg_url: str, team: Callable[[str], str]) -> None:
    name = team("scram")
    owner = create_engine(fresh_pg_url)
    try:
        with owner.begin() as c:  # the server's own verifier for the same password (then re-derived here)
            c.exec_driver_sql(f"ALTER ROLE {name} PASSWORD 'hunter2 é'")
            stored = c.scalar(text("SELECT rolpassword FROM pg_authid WHERE rolname = :n"), {"n": name})
    finally:
        owner.dispose()
    head, _, _keys = stored.partition("$")[2].partition("$")
    iterations, salt = head.split(":")
    assert roles.scram_verifier("hunter2 é", salt=base64.b64decode(salt), iterations=int(iterations)) == stored


# -- through memagent -------------------------------------------------------------------

@pytest.fixture
def owner_env(fresh_pg_url: str, chat_env: None, tmp_path: Path) -> dict[str, str]:
    return {"MEMAGENT_DB": fresh_pg_url}


def memagent_as(url: str, *args: str, stdin: str | None = None, **env: str) -> Any:
    return run(*args, stdin=stdin, env={"MEMAGENT_DB": url, **env}, timeout=120)


def test_commands_refuse_sqlite_and_usage_mistakes_in_one_line(tmp_path: Path, fresh_pg_url: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    sqlite = f"sqlite:///{tmp_path / 'm.db'}"
    for args in (("db", "role", "create", "bob", "--password-env", "PW"), ("db", "grant", "bob", "--agent", "a"),
                 ("db", "revoke", "bob", "--user", "u"), ("db", "grants")):
        p = memagent_as(sqlite, *args, PW="x")
        assert p.returncode == 2, (args, err(p))
        assert err(p) == ("memagent: roles and row-level security need Postgres; this database is sqlite "
                          "(point --db / MEMAGENT_DB at a postgresql+psycopg:// URL)\n")
    assert not (tmp_path / "m.db").exists()  # nothing created
    mistakes = {
        ("db", "role", "create", "bob", "--password-env", "NO_SUCH_VAR_H2"): "$NO_SUCH_VAR_H2 is not set or empty",
        ("db", "role", "create", "Bob; drop", "--password-env", "PW"): "role name 'Bob; drop' is not allowed",
        ("db", "grant", "pg_bob", "--agent", "a"): "role name 'pg_bob' is not allowed",
        ("db", "grant", "bob"): "exactly one of --agent AGENT, --user USER_ID, --org ORG_ID",
        ("db", "grant", "bob", "--agent", "a", "--user", "u"): "exactly one of",
        ("db", "grant", "bob", "--user", "u", "--read-only"): "--read-only goes with --agent",
        ("db", "grant", "bob", "--agent", "a", "--write"): "--write goes with --org",
        ("db", "revoke", "bob", "--org", ""): "is empty",
        ("db", "revoke", "bob", "--user", "u", "--read-only"): "--read-only goes with --agent",
        ("db", "revoke", "bob", "--agent", "a", "--write"): "--write goes with --org",
        ("db", "grant", "bob", "--agent", "My Agent"): "invalid agent name 'My Agent'",
        ("db", "grant", "bob", "--user", "a b"): "invalid user id 'a b'",
        ("db", "role", "create", "pg_x", "--password-env", "NO_SUCH_VAR_H2"): "role name 'pg_x' is not allowed",
    }
    for args, says in mistakes.items():
        p = memagent_as(fresh_pg_url, *args, PW="x")
        assert p.returncode == 2 and says in err(p) and len(err(p).splitlines()) == 1, (args, err(p))


def test_through_memagent_a_role_lists_and_reads_only_its_grants(
        fresh_pg_url: str, team: Callable[[str], str], chat_env: None) -> None:
    seed_alice(fresh_pg_url)
    bob = team("bob")
    owner = fresh_pg_url
    for args in (("db", "grant", bob, "--agent", BOB_AGENT), ("db", "grant", bob, "--user", "bob")):
        p = memagent_as(owner, *args)
        assert p.returncode == 0, err(p)
    p = memagent_as(owner, "db", "grants", bob)
    assert out(p).split("\n")[0].split("\t") == [bob, f"agent:{BOB_AGENT}", "read-write"]
    url = role_url(owner, bob)
    assert memagent_as(url, "init", BOB_AGENT).returncode == 0
    p = memagent_as(url, "agents")
    assert p.returncode == 0 and BOB_AGENT in out(p) and ALICE_AGENT not in out(p), out(p)
    p = memagent_as(url, "fs", "cat", "/AGENTS.md", "-a", ALICE_AGENT)
    assert p.returncode == 1 and err(p).startswith(f"memagent: no agent named '{ALICE_AGENT}'")
    assert f"`memagent db grant {bob} --agent {ALICE_AGENT}`" in err(p)  # not "init": it exists, hidden
    assert len(err(p).splitlines()) == 1
    p = memagent_as(url, "fs", "grep", "milk", "/", "-a", BOB_AGENT)
    assert p.returncode == 1 and out(p) == ""  # alice's todo is not a candidate
    # /user/ is bob's own: a write to someone else's /user/ is refused in one line.
    p = memagent_as(url, "fs", "write", "/user/prefs.md", "-a", BOB_AGENT, stdin="tea\n", MEMAGENT_USER="carol")
    assert p.returncode == 1 and "may not do this" in err(p) and len(err(p).splitlines()) == 1, err(p)
    assert "Traceback" not in err(p)
    p = memagent_as(url, "fs", "write", "/user/prefs.md", "-a", BOB_AGENT, stdin="tea\n", MEMAGENT_USER="bob")
    assert p.returncode == 0, err(p)
    # A role may not grant: only the owner does.
    p = memagent_as(url, "db", "grant", bob, "--agent", ALICE_AGENT)
    assert p.returncode == 1 and "only the database owner grants" in err(p)
    # Revoke takes the agent away (the grant's own arguments are accepted: --read-only too).
    p = memagent_as(owner, "db", "revoke", bob, "--agent", BOB_AGENT, "--read-only")
    assert p.returncode == 0 and out(p) == f"revoked {bob}'s access to agent {BOB_AGENT}\n", out(p)
    p = memagent_as(url, "agents")
    assert BOB_AGENT not in out(p)
    p = memagent_as(url, "fs", "ls", "/", "-a", BOB_AGENT)
    assert p.returncode == 1 and f"no agent named '{BOB_AGENT}'" in err(p)
    # Nor may a role make or drop roles; the owner is told when there is nothing to do.
    for args, says in ((("db", "role", "create", "t_other", "--password-env", "PW"),
                        "only the database owner creates roles"),
                       (("db", "role", "drop", bob), "only the database owner drops roles")):
        p = memagent_as(url, *args, PW="pw")
        assert p.returncode == 1 and says in err(p) and len(err(p).splitlines()) == 1, err(p)
    assert memagent_as(owner, "db", "revoke", bob, "--user", "bob").returncode == 0
    p = memagent_as(owner, "db", "grants", bob)
    assert p.returncode == 0 and out(p) == "" and f"{bob} has no grants" in err(p), err(p)
    p = memagent_as(owner, "db", "role", "drop", "t_nobody_here")
    assert p.returncode == 0 and out(p) == "no role t_nobody_here; nothing changed\n", out(p)


@contextlib.asynccontextmanager
async def mcp_session(url: str, agent: str) -> AsyncIterator[Client]:
    env = {**os.environ, "MEMAGENT_DB": url}
    params = StdioServerParameters(command=MEMAGENT, args=["mcp", "serve", agent], env=env)
    async with Client(stdio_client(params)) as c:
        yield c


def test_every_command_works_as_a_role(fresh_pg_url: str, team: Callable[[str], str], chat_env: None,
                                       api: FakeMessagesAPI, tmp_path: Path) -> None:
    bob = team("bob")
    for args in (("db", "grant", bob, "--agent", BOB_AGENT), ("db", "grant", bob, "--user", "bob"),
                 ("db", "grant", bob, "--agent", "bob_copy")):
        assert memagent_as(fresh_pg_url, *args).returncode == 0
    url = role_url(fresh_pg_url, bob)
    model = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.base_url, "MEMAGENT_STREAM": "0",
             "MEMAGENT_USER": "bob"}

    def ok(*args: str, stdin: str | None = None) -> str:
        p = memagent_as(url, *args, stdin=stdin, **model)
        assert p.returncode == 0, (args, err(p))
        assert "Traceback" not in err(p)
        return out(p)

    ok("init", BOB_AGENT)
    ok("fs", "write", "/notes.md", "-a", BOB_AGENT, stdin="- buy milk\n")
    ok("fs", "edit", "/notes.md", "milk", "oat milk", "-a", BOB_AGENT)
    assert "notes.md" in ok("fs", "ls", "/", "-a", BOB_AGENT)
    assert ok("fs", "cat", "/notes.md", "-a", BOB_AGENT) == "- buy oat milk\n"
    assert "oat milk" in ok("fs", "grep", "oat", "/", "-a", BOB_AGENT)
    assert "notes.md" in ok("fs", "search", "oat milk", "-a", BOB_AGENT)
    assert "v2" in ok("fs", "log", "/notes.md", "-a", BOB_AGENT)

    api.enqueue_tool_use("write_file", {"file_path": "/user/prefs.md", "content": "Likes tea.\n",
                                        "reason": "the user said so"})
    api.enqueue_text("Noted.")
    ok("chat", BOB_AGENT, "--yolo", stdin="I like tea.\n")
    assert ok("fs", "cat", "/user/prefs.md", "-a", BOB_AGENT) == "Likes tea.\n"

    api.enqueue_tool_use("write_file", {"file_path": "/todo.md", "content": "- call mum\n", "reason": "task"})
    api.enqueue_text("Done.")
    ok("run", BOB_AGENT, "note: call mum", "--yolo")
    assert ok("fs", "cat", "/todo.md", "-a", BOB_AGENT) == "- call mum\n"
    assert BOB_AGENT in ok("agents")
    assert ok("threads", BOB_AGENT).strip()

    api.enqueue_tool_use("edit_file", {"file_path": "/notes.md", "old_string": "- buy oat milk\n",
                                       "new_string": "- buy oat milk\n- be brief\n", "reason": "remembered"})
    api.enqueue_text("Remembered.")
    ok("remember", BOB_AGENT, "be brief", "--yolo")

    api.enqueue_tool_use("edit_file", {"file_path": "/notes.md", "old_string": "- be brief\n",
                                       "new_string": "- be very brief\n", "reason": "reflected"})
    api.enqueue_text("Proposed.")
    assert "proposal #" in ok("reflect", BOB_AGENT)
    assert "1 applied" in ok("review", BOB_AGENT, stdin="y\n")
    assert "be very brief" in ok("fs", "cat", "/notes.md", "-a", BOB_AGENT)

    ok("approval", "add", BOB_AGENT, "write_file(/drafts/**)", "queue")  # kept in settings:
    assert "/drafts/**" in ok("approval", "list", BOB_AGENT)

    exported = tmp_path / "export"
    ok("export", BOB_AGENT, str(exported))
    assert (exported / "notes.md").read_text() == "- buy oat milk\n- be very brief\n"
    ok("import", str(exported), "--as", "bob_copy", "--yes")
    assert ok("fs", "cat", "/notes.md", "-a", "bob_copy") == "- buy oat milk\n- be very brief\n"
    assert ok("validate", BOB_AGENT) is not None

    async def mcp_body() -> None:
        async with mcp_session(url, BOB_AGENT) as c:
            r = await c.call_tool("read_file", {"file_path": "/todo.md"})
            assert not r.is_error and "call mum" in "".join(getattr(b, "text", "") for b in r.content)
            r = await c.call_tool("write_file", {"file_path": "/mcp.md", "content": "from mcp\n",
                                                 "reason": "a client wrote it"})
            assert not r.is_error, r.content

    asyncio.run(asyncio.wait_for(mcp_body(), 120))
    assert ok("fs", "cat", "/mcp.md", "-a", BOB_AGENT) == "from mcp\n"
    # The owner sees it all happened in bob's agent and nowhere else.
    owner = open_store(fresh_pg_url)
    try:
        assert owner.list_agents() == sorted([BOB_AGENT, "bob_copy"])
        assert AgentView(owner, BOB_AGENT).read("/notes.md").content == "- buy oat milk\n- be very brief\n"
    finally:
        owner.close()


def test_a_read_only_agent_grant_reads_everything_and_changes_nothing(
        fresh_pg_url: str, team: Callable[[str], str], chat_env: None) -> None:
    seed_alice(fresh_pg_url)
    store = open_store(fresh_pg_url)
    store.create_agent("big", {f"/k/{i:03d}.md": f"note {i}\n" for i in range(40)})  # a bulk batch
    store.close()
    owner = create_engine(fresh_pg_url)
    with owner.begin() as c:  # a thread whose conversation file a look would render (a write)
        c.execute(text("UPDATE threads SET stale = true, conversation_path = '/said-hi.md'"))
    owner.dispose()
    bob = team("bob")
    assert memagent_as(fresh_pg_url, "db", "grant", bob, "--agent", ALICE_AGENT, "--read-only").returncode == 0
    url = role_url(fresh_pg_url, bob)

    def ok(*args: str) -> str:
        p = memagent_as(url, *args, "-a", ALICE_AGENT)
        assert p.returncode == 0 and "Traceback" not in err(p), (args, err(p))
        return out(p)

    assert ALICE_AGENT in out(memagent_as(url, "agents"))
    assert ok("fs", "cat", "/notes/todo.md") == "buy milk and tea\n"
    assert "notes/" in ok("fs", "ls", "/")
    assert "todo.md" in ok("fs", "grep", "tea", "/")
    assert "todo.md" in ok("fs", "search", "milk")
    assert "v2" in ok("fs", "log", "/notes/todo.md")
    ok("fs", "ls", "/conversations/")
    for args, stdin in ((("fs", "write", "/notes/todo.md"), "mine\n"), (("fs", "write", "/new.md"), "mine\n"),
                        (("fs", "rm", "/notes/todo.md"), None)):
        p = memagent_as(url, *args, "-a", ALICE_AGENT, stdin=stdin)
        assert p.returncode == 1 and "Traceback" not in err(p), (args, err(p))
        assert len(err(p).splitlines()) == 1 and "database role" in err(p), (args, err(p))
    check = open_store(fresh_pg_url)
    try:
        assert check.read(f"agent:{ALICE_AGENT}", "/notes/todo.md").content == "buy milk and tea\n"
        assert not check.exists(f"agent:{ALICE_AGENT}", "/new.md")
    finally:
        check.close()


def test_a_large_import_as_a_role_keeps_the_owners_indexes(
        fresh_pg_url: str, team: Callable[[str], str], chat_env: None, tmp_path: Path) -> None:
    bob = team("bob")
    assert memagent_as(fresh_pg_url, "db", "grant", bob, "--agent", BOB_AGENT).returncode == 0
    folder = tmp_path / "many"
    (folder / "k").mkdir(parents=True)
    for i in range(60):  # the whole table: the owner's import would rebuild the GIN indexes
        (folder / "k" / f"{i:03d}.md").write_text(f"fact {i}\n")
    url = role_url(fresh_pg_url, bob)
    p = memagent_as(url, "import", str(folder), "--as", BOB_AGENT, "--yes")
    assert p.returncode == 0, err(p)
    assert PASSWORD not in out(p) + err(p)
    p = memagent_as(url, "fs", "grep", "fact 42", "/", "-a", BOB_AGENT)
    assert p.returncode == 0 and "k/042.md" in out(p), err(p)


def test_only_a_users_role_is_filtered(fresh_pg_url: str, team: Callable[[str], str]) -> None:
    """The owner reads past the policies (nothing changes for a single user); a role does not,
    and its grep then narrows by the (scope, path) index, not the trigram index it cannot use."""
    bob = team("bob")
    owner, role = create_engine(fresh_pg_url), as_role(fresh_pg_url, bob)
    try:
        with owner.connect() as c:
            assert roles.filtered(c) is False
        with role.connect() as c:
            assert roles.filtered(c) is True
    finally:
        owner.dispose()
        role.dispose()


def test_a_role_memagent_does_not_manage_is_not_filtered_until_granted(fresh_pg_url: str) -> None:
    """A role the owner gives table privileges by hand reads what they allow (as in any
    Postgres database); the first ``db grant`` puts it under the policies."""
    seed_alice(fresh_pg_url)
    owner = create_engine(fresh_pg_url, isolation_level="AUTOCOMMIT")
    name = f"t_byhand_{uuid.uuid4().hex[:8]}"
    with owner.connect() as conn:
        conn.execute(text(f"CREATE ROLE {name} LOGIN PASSWORD '{PASSWORD}'"))
        conn.execute(text(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {name}"))
    try:
        by_hand = as_role(fresh_pg_url, name)
        with by_hand.connect() as c:
            assert c.scalar(text("SELECT count(*) FROM files WHERE scope = :s"), {"s": f"agent:{ALICE_AGENT}"}) > 0
        roles.grant(owner, name, "agent", BOB_AGENT, write=False)
        with by_hand.connect() as c:
            assert c.scalar(text("SELECT count(*) FROM files WHERE scope = :s"), {"s": f"agent:{ALICE_AGENT}"}) == 0
            assert c.scalar(text("SELECT count(*) FROM memagent_roles")) == 1  # its own row only
        by_hand.dispose()
    finally:
        roles.drop_role(owner, name)
        owner.dispose()
