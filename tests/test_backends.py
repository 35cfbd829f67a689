"""The backend seam: both backends implement ``Backend`` and behave alike; nothing else branches.

- Every operation of ``vfs/backends/base.py:Backend`` runs here on a real SQLite file
  and a real Postgres server (the ``store`` fixture), and answers the same on both.
- ``Database`` (``store.db``) is what thread and proposal stores take; an engine
  still works (wrapped).
- No product code (``vfs/``, ``agent/``, ``integrations/``) outside ``vfs/backends/``
  and ``vfs/migrations/`` looks at which database it talks to: no ``.dialect.name``,
  no ``get_backend_name()``, no comparison with "sqlite"/"postgresql". ``bench/`` is
  not scanned: its ``--backends`` labels are the runner's own names ("sqlite",
  "postgres") and a few measurements there read the database's internals on purpose.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlalchemy import Insert, create_engine, func, insert, select, text, update
from sqlalchemy.exc import DBAPIError

from memagent.vfs import SqlStore
from memagent.vfs.backends import BACKENDS, POSTGRES, SQLITE, WRITE, Database, backend_for, backend_for_url
from memagent.vfs.backends.base import Backend, Features
from memagent.vfs.errors import DatabaseUnavailable
from memagent.vfs.models import agents, files, messages, revisions, threads
from memagent.vfs.records.queue import ProposalStore
from memagent.vfs.records.threads import ThreadStore

S = "agent:a"
ROOT = Path(__file__).resolve().parent.parent


def _new_agent(name: str) -> Insert:
    return insert(agents).values(name=name, created_at=datetime.now(UTC))


def _protocol_members() -> set[str]:
    return {n for n in vars(Backend) if not n.startswith("_")} - {"register"}


# -- the protocol ------------------------------------------------------------------


def test_both_backends_implement_the_protocol() -> None:
    members = _protocol_members()
    assert {"head", "overwrite", "ls_entries", "grep_deadline", "search_features", "rank_index",
            "merge_pending", "bulk_upkeep", "migration_lock"} <= members
    for backend in (SQLITE, POSTGRES):
        assert isinstance(backend, Backend)
        for name in members:
            mine = getattr(type(backend), name)
            assert mine is not getattr(Backend, name), f"{backend.name} does not define {name}"
            if inspect.isfunction(mine):  # same parameters as the protocol says
                want = inspect.signature(getattr(Backend, name))
                got = inspect.signature(mine)
                assert list(got.parameters) == list(want.parameters), (backend.name, name)
    assert {b.name for b in BACKENDS.values()} == {"sqlite", "postgresql"}


def test_a_store_exposes_its_database_and_other_stores_take_it(store: SqlStore) -> None:
    assert store.db.engine is store.engine
    assert store.db.backend is backend_for(store.engine)
    assert Database.of(store.db) is store.db
    for other in (ThreadStore(store.db), ProposalStore(store.db)):
        assert other.db is store.db and other.engine is store.engine
    # An engine still works: it is wrapped in a Database of the same backend.
    wrapped = ThreadStore(store.engine)
    assert wrapped.db.engine is store.engine and wrapped.db.backend is store.db.backend
    tid = wrapped.create("a", "m")
    assert ThreadStore(store.db).get("a", tid).id == tid
    assert SqlStore(store.db).db is store.db  # a store can be made from a Database too


def test_a_database_memagent_has_no_backend_for_is_one_clear_error() -> None:
    with pytest.raises(DatabaseUnavailable, match="memagent does not run on oracle"):
        backend_for(SimpleNamespace(dialect=SimpleNamespace(name="oracle")))
    from sqlalchemy.engine import make_url

    assert backend_for_url(make_url("sqlite:///x.db")) is SQLITE
    assert backend_for_url(make_url("postgresql+psycopg://u@h/d")) is POSTGRES
    assert backend_for_url(make_url("mysql://u@h/d")) is None


# -- each operation, on both databases -----------------------------------------------


def _head(store: SqlStore, scope: str, path: str) -> tuple[object, ...] | None:
    raw = store.engine.raw_connection()
    try:
        return store.db.backend.head(raw.driver_connection, scope, path)
    finally:
        raw.close()


def test_head_reads_a_row_and_hands_the_connection_back_transactional(store: SqlStore) -> None:
    store.write(S, "/n.md", "one\n")
    store.write(S, "/gone.md", "x\n")
    store.delete(S, "/gone.md")
    assert tuple(_head(store, S, "/n.md") or ()) == ("one\n", 1, False)
    content, version, deleted = _head(store, S, "/gone.md") or ()
    assert (content, version, bool(deleted)) == (None, 2, True)
    assert _head(store, S, "/none.md") is None
    # The pooled connection is transactional again: a rolled-back insert is not kept.
    with store.engine.connect() as conn:
        conn.execute(_new_agent("rolled"))
        conn.rollback()
    assert "rolled" not in store.list_agents()


def test_overwrite_moves_a_live_file_at_its_version_and_appends_one_revision(store: SqlStore) -> None:
    store.write(S, "/n.md", "one\n")
    backend = store.db.backend
    state = {"content": "two\n", "size": 4, "sha256": "0" * 64, "deleted": False,
             "updated_at": store.stat(S, "/n.md").updated_at}
    revision = {"author": "cli", "approval": "cli", "message": "m", "content": "two\n", "deleted": False,
                "size": 4, "created_at": state["updated_at"], "origin": "cli", "origin_thread": None,
                "origin_turn": None, "origin_run": None, "origin_detail": None}
    with store.engine.connect().execution_options(**{WRITE: True}) as conn, conn.begin():
        stale = backend.overwrite(conn, {"w_scope": S, "w_path": "/n.md", "w_expected": 5}, state, revision)
        assert stale is None  # not at version 5: nothing written
        assert backend.overwrite(conn, {"w_scope": S, "w_path": "/n.md", "w_expected": 1}, state,
                                 revision) == 2
    assert store.read(S, "/n.md").content == "two\n"
    assert [r.version for r in store.history(S, "/n.md")] == [2, 1]
    with store.engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(revisions)) == 2


def test_ls_entries_lists_subdirectories_with_counts_and_files_with_sizes(store: SqlStore) -> None:
    store.bulk_write(S, {"/a.md": "a\n", "/d/x.md": "x\n", "/d/y.md": "yy\n", "/d.b/z.md": "z\n",
                         "/d/e/w.md": "w\n"})
    with store.engine.connect() as conn:
        got = store.db.backend.ls_entries(conn, {"scope": S, "depth": 1, "lo": "/", "hi": "0"}, 1)
        inner = store.db.backend.ls_entries(conn, {"scope": S, "depth": 2, "lo": "/d/", "hi": "/d0"}, 3)
    assert sorted((e.name, e.is_dir, e.size) for e in got) == [
        ("a.md", False, 2), ("d", True, 3), ("d.b", True, 1)]
    assert sorted((e.name, e.is_dir, e.size) for e in inner) == [
        ("e", True, 1), ("x.md", False, 2), ("y.md", False, 3)]


def _statement_timeout(conn: object, backend: Backend) -> str | None:
    if backend is POSTGRES:
        return str(conn.scalar(text("SELECT current_setting('statement_timeout')")))  # type: ignore[attr-defined]
    return None


def test_grep_settings_last_only_for_their_transaction(store: SqlStore) -> None:
    store.write(S, "/n.md", "needle here\n")
    backend = store.db.backend
    with store.engine.connect() as conn:
        before = _statement_timeout(conn, backend)
        conn.commit()
        with conn.begin():
            backend.grep_deadline(conn, 5000)
            index_only = backend.grep_index_only(conn)
            assert isinstance(index_only, bool)
            found = conn.scalars(select(files.c.path).where(files.c.content.like("%needle%"))).all()
            assert found == ["/n.md"]  # the transaction still answers
        # Nothing is left on the session a pooler would hand to someone else.
        assert _statement_timeout(conn, backend) == before
    assert store.grep(S, "needle").files == ["/n.md"]


def test_search_features_and_rank_index_name_the_indexes_the_migrations_made(store: SqlStore) -> None:
    backend = store.db.backend
    with store.engine.connect() as conn:
        features = backend.search_features(conn)
        kind = backend.rank_index(conn)
    assert isinstance(features, Features) and features.dialect == backend.name
    # A migrated database has a grep pre-filter index and a full-text ranking index.
    assert features.sqlite_fts or features.pg_trgm
    assert kind in ("fts5", "tsvector")


def test_merge_pending_leaves_search_answering_the_written_file(store: SqlStore) -> None:
    store._pending.off = True  # this test merges by hand; the store's thread stays out
    store.write(S, "/animals.md", "the numbat eats termites\n")
    backend = store.db.backend
    merged = backend.merge_pending(store.engine, search_only=True, own="test_merge")
    assert isinstance(merged, bool)
    assert backend.merge_pending(store.engine, search_only=False, own="test_merge") in (True, False)
    if backend.pending_shared:  # the database's own table lists what is left: nothing now
        with store.engine.connect() as conn:
            assert conn.scalar(text("SELECT count(*) FROM fts_pending")) == 0
    assert [h.path for h in store.search([S], "numbat")] == ["/animals.md"]
    assert backend.merges_in_background(store.engine) is True


def test_an_in_memory_sqlite_database_merges_in_the_caller_only(tmp_path: Path) -> None:
    # One connection per thread there: a background thread would see another database.
    assert SQLITE.merges_in_background(create_engine("sqlite://")) is False
    assert SQLITE.merges_in_background(create_engine(f"sqlite:///{tmp_path / 'x.db'}")) is True


def test_bulk_upkeep_pauses_the_triggers_and_indexes_the_batch(store: SqlStore) -> None:
    backend = store.db.backend
    with (store.engine.connect().execution_options(**{WRITE: True}) as conn, conn.begin(),
          backend.bulk_upkeep(conn, 50, rebuild_min=10**9) as paused):
        assert paused is True  # a migrated database lets a batch pause its triggers
    batch = {f"/kb/n{i:02d}.md": f"walrus {i}\n" for i in range(40)}
    store.bulk_write(S, batch)  # above BATCH_UPKEEP_MIN: the paused path
    assert [(e.name, e.size) for e in store.ls(S, "/")] == [("kb", 40)]
    assert len(store.grep(S, "walrus").files) == 40
    assert len(store.search([S], "walrus", k=50)) == 40


def test_the_migration_lock_is_released_with_its_transaction(store: SqlStore) -> None:
    backend = store.db.backend
    for _ in range(2):  # taken, released by the commit, taken again
        with store.engine.connect().execution_options(**{WRITE: True}) as conn, conn.begin():
            backend.migration_lock(conn, 30, 0x6D656D6167656E74 + 1)


def test_the_migration_lock_keeps_a_second_migrator_waiting_on_postgres(store: SqlStore) -> None:
    if store.db.backend is not POSTGRES:
        pytest.skip("SQLite's BEGIN IMMEDIATE is the lock: a second writer waits in BEGIN")
    key = 0x6D656D6167656E74 + 2
    with store.engine.connect() as holder, holder.begin():
        POSTGRES.migration_lock(holder, 30, key)
        with store.engine.connect() as other, other.begin(), pytest.raises(DBAPIError):
            POSTGRES.migration_lock(other, 1, key)


def test_small_and_locking_writes_store_together_or_not_at_all(store: SqlStore) -> None:
    backend = store.db.backend
    with backend.small_write(store.engine) as conn:
        conn.execute(_new_agent("small"))
    with pytest.raises(RuntimeError), backend.locking_write(store.engine) as conn:
        conn.execute(_new_agent("undone"))
        raise RuntimeError("abandon")
    with backend.locking_write(store.engine) as conn:
        conn.execute(_new_agent("locked"))
    assert {"small", "locked"} <= set(store.list_agents()) and "undone" not in store.list_agents()


def test_append_message_inserts_the_message_and_marks_its_thread(store: SqlStore) -> None:
    ts = ThreadStore(store.db)
    tid = ts.create("a", "m")
    backend = store.db.backend
    now = ts.get("a", tid).created_at
    with backend.small_write(store.engine) as conn:
        row = insert(messages).values(thread_id=tid, seq=1, role="user", content="hello", usage=None,
                                      cost_usd=None, created_at=now)
        backend.append_message(conn, row, update(threads).values(stale=True, title="hello"), tid)
    assert ts.load(tid) == [{"role": "user", "content": "hello"}]
    with store.engine.connect() as conn:
        assert conn.execute(select(threads.c.stale, threads.c.title).where(threads.c.id == tid)).one() == (
            True, "hello")


def test_note_every_file_and_sql_false(store: SqlStore) -> None:
    store.bulk_write(S, {"/a.md": "a\n", "/b.md": "b\n", "/c.md": "c\n"})
    store.delete(S, "/c.md")
    backend = store.db.backend
    with store.engine.connect().execution_options(**{WRITE: True}) as conn, conn.begin():
        conn.execute(text("DELETE FROM embedding_pending"))
        backend.note_every_file(conn)
        backend.note_every_file(conn)  # again: one note per file, not two
    with store.engine.connect() as conn:
        assert conn.scalar(text("SELECT count(*) FROM embedding_pending")) == 2
        live = conn.scalar(text(f"SELECT count(*) FROM files WHERE deleted = {backend.sql_false}"))
    assert live == len(store.all_files(S)) == 2


def test_read_options_run_single_reads(store: SqlStore) -> None:
    store.write(S, "/n.md", "one\n")
    with store.engine.connect().execution_options(**store.db.backend.read_options) as conn:
        assert conn.scalar(select(files.c.version).where(files.c.path == "/n.md")) == 1


# -- the enforcement -----------------------------------------------------------------

DIALECT_NAMES = frozenset({"sqlite", "postgresql", "postgres"})
SCANNED = ("vfs", "agent", "integrations")
EXEMPT = ("vfs/backends/", "vfs/migrations/")
# One database's own modules and backend objects: only the backends package uses them.
# (``postgres_roles`` is not here: a Postgres-only feature, the role commands, that refuses
# another database's URL itself, not a branch of code both databases run.)
ONE_DATABASE_MODULES = frozenset({"sqlite", "postgres", "sqlite_fts"})
BACKEND_OBJECTS = frozenset({"SQLITE", "POSTGRES"})
# Features fields that name one database's index: read by that backend only.
ONE_DATABASE_FEATURES = frozenset({"sqlite_fts", "sqlite_pending", "pg_trgm"})


def _names_a_dialect(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.lower() in DIALECT_NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_a_dialect(e) for e in node.elts)
    return False


def _imports_one_database(node: ast.ImportFrom) -> bool:
    parts = (node.module or "").split(".")
    if "backends" not in parts:
        return False
    below = parts[parts.index("backends") + 1:]
    if below:
        return below[0] in ONE_DATABASE_MODULES
    return any(alias.name in ONE_DATABASE_MODULES | BACKEND_OBJECTS for alias in node.names)


def dialect_branches(source: str, filename: str) -> list[str]:
    """``file:line: what`` for each place ``source`` looks at which database it talks to."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        what = None
        if isinstance(node, ast.Attribute) and node.attr == "name" and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "dialect":
            what = ".dialect.name"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "get_backend_name":
            what = "get_backend_name()"
        elif isinstance(node, ast.Compare) and any(_names_a_dialect(x) for x in [node.left, *node.comparators]):
            what = "a comparison with a database's name"
        elif isinstance(node, ast.Compare) and any(isinstance(x, ast.Name) and x.id in BACKEND_OBJECTS
                                                   for x in [node.left, *node.comparators]):
            what = "a comparison with one database's backend"
        elif isinstance(node, ast.ImportFrom) and _imports_one_database(node):
            what = "an import of one database's backend module"
        elif isinstance(node, ast.Attribute) and node.attr in ONE_DATABASE_FEATURES:
            what = f"a look at one database's index (.{node.attr})"
        if what is not None:
            found.append(f"{filename}:{node.lineno}: {what}")
    return found


def test_no_dialect_branch_outside_the_backends() -> None:
    found = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(EXEMPT) or "/." in rel:
                continue
            found += dialect_branches(path.read_text("utf-8"), rel)
    assert not found, ("dialect-specific code belongs in vfs/backends/ (a Backend operation):\n"
                       + "\n".join(found))


def test_the_scan_catches_each_kind_of_dialect_branch() -> None:
    # Lines the store had before the seam, and the other spellings of the same thing.
    old = textwrap.dedent('''
        pg = self.engine.dialect.name == "postgresql"
        if conn.dialect.name == "postgresql":
            pass
        dialect = conn.dialect.name
        if parsed.get_backend_name() != "sqlite":
            pass
        sqlite = kind == "sqlite"
        ok = name in ("sqlite", "postgresql")
        url = PathType.with_variant(String(10), "postgresql")
    ''')
    found = dialect_branches(old, "old.py")
    assert [f.split(":")[1] for f in found].count("2") == 2  # the attribute and the comparison
    lines = {int(f.split(":")[1]) for f in found}
    assert lines == {2, 3, 5, 6, 8, 9}  # not 10: a type variant is schema, not a branch
    assert "old.py:6: get_backend_name()" in found


def test_the_scan_catches_the_forms_it_once_missed() -> None:
    # What vfs/db.py and the modules now at vfs/search/lexical.py, vfs/grep/fts.py and vfs/grep/prefilter.py
    # did before their code moved into the backends.
    old = textwrap.dedent('''
        from memagent.vfs.backends import POSTGRES, SQLITE, backend_for, postgres_roles
        from memagent.vfs.backends.postgres import PG_CANDIDATES
        from .backends import Features, backend_for, sqlite_fts
        if backend is SQLITE:
            pass
        if backend_for_url(parsed) is not POSTGRES:
            pass
        if features.sqlite_fts:
            pass
        from memagent.vfs.backends import backend_for, postgres_roles
        from memagent.vfs.backends.postgres_roles import PermissionDenied
    ''')
    lines = sorted(int(f.split(":")[1]) for f in dialect_branches(old, "old.py"))
    assert lines == [2, 3, 4, 5, 7, 9]  # not the role commands' module (11, 12)
