"""The full-text indexes' pending entries (migrations 0007 and 0008, ``vfs/pending.py``).

Postgres's GIN pending lists:

- The migration turns the full-text index's pending list on and compresses
  contents with lz4 where the server has it; its downgrade empties the list and
  turns it off again.
- A store merges the lists it filled: in the background soon after its writes,
  the full-text one before its own search, both when it closes.
- A role that may not merge (not the owner) still writes and searches; the store
  just stops trying.

SQLite's ``fts_pending``: grep sees rows the indexes lag behind, search merges
them first, close and the background thread merge them, and after any mix of
changes and merges FTS5's own integrity check finds both indexes equal to
``files``.

The Postgres probe ``gin_clean_pending_list`` returns how many pending pages it merged, so
0 means the list was already empty (the probe itself empties it: each test reads
it once, at the point that matters).
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from memagent.vfs import SqlStore, db, open_store

S = "agent:a"
BODY = "".join(f"line {i}: the pending list holds words like zebra{i} and quartz{i}\n" for i in range(80))


def _pending(url: str) -> dict[str, int]:
    """Pages each GIN index of ``files`` had pending (and merges them)."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT c.relname, gin_clean_pending_list(c.oid) FROM pg_index i "
                "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
                "WHERE i.indrelid = 'files'::regclass AND a.amname = 'gin'"))
            return {str(name): int(n) for name, n in rows}
    finally:
        engine.dispose()


def _store(url: str, **timing: float) -> SqlStore:
    store = open_store(url)
    assert store._pending is not None
    for name, value in timing.items():
        setattr(store._pending, name, value)
    store.create_agent("a")
    return store


def _write_some(store: SqlStore, n: int = 5) -> None:
    for i in range(n):
        store.write(S, f"/notes/n{i}.md", f"# note {i}\nkiwi{i} only here\n{BODY}")


def test_the_background_merge_empties_both_lists_soon_after_writes(fresh_pg_url: str) -> None:
    store = _store(fresh_pg_url)
    try:
        _write_some(store)
        deadline = time.monotonic() + 600  # a hang guard: a loaded machine merges late, not never
        while store._pending is not None and store._pending.dirty and time.monotonic() < deadline:
            time.sleep(0.02)
        assert store._pending is not None and not store._pending.dirty
        assert _pending(fresh_pg_url) == {"ix_files_content_trgm": 0, "ix_files_search_doc": 0}
        assert [h.path for h in store.search([S], "kiwi3")] == ["/notes/n3.md"]
    finally:
        store.close()


def test_search_merges_its_own_list_first_and_close_merges_the_rest(fresh_pg_url: str) -> None:
    # The thread waits a minute: what is merged below is merged by search and close.
    store = _store(fresh_pg_url, delay=60.0, max_delay=60.0)
    try:
        _write_some(store)
        assert store._pending is not None and store._pending.dirty
        hits = store.search([S], "quartz7 zebra7")
        assert {h.path for h in hits} == {f"/notes/n{i}.md" for i in range(5)}
        left = _pending(fresh_pg_url)
        assert left["ix_files_search_doc"] == 0  # merged by the search
        assert left["ix_files_content_trgm"] > 0  # grep's list waits for the thread (the control)
        _write_some(store, 2)
        assert store.grep(S, "kiwi1 only", fixed_strings=True).files == ["/notes/n1.md"]
    finally:
        store.close()
    assert _pending(fresh_pg_url) == {"ix_files_content_trgm": 0, "ix_files_search_doc": 0}


def test_without_the_right_to_merge_writes_and_searches_still_work(fresh_pg_url: str) -> None:
    open_store(fresh_pg_url).close()  # migrated by the owner
    role = "memagent_limited_" + uuid.uuid4().hex[:8]
    admin = create_engine(fresh_pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE ROLE {role} LOGIN"))
        conn.execute(text(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}"))
        conn.execute(text(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}"))
    limited = make_url(fresh_pg_url).set(username=role, password=None).render_as_string(hide_password=False)
    try:
        store = _store(limited)
        try:
            _write_some(store, 3)
            assert [h.path for h in store.search([S], "kiwi2")] == ["/notes/n2.md"]
            assert store._pending is not None and store._pending.off
            store.write(S, "/notes/later.md", "kiwi2 again\n")
            assert {h.path for h in store.search([S], "kiwi2")} == {"/notes/n2.md", "/notes/later.md"}
        finally:
            store.close()
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP OWNED BY {role}"))  # its grants, so the role can go
            conn.execute(text(f"DROP ROLE {role}"))
        admin.dispose()


@pytest.fixture
def migrated(fresh_pg_url: str) -> Iterator[str]:
    open_store(fresh_pg_url).close()
    yield fresh_pg_url


def _options(url: str) -> tuple[list[str], dict[str, str]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            opts = conn.scalar(text("SELECT reloptions FROM pg_class WHERE relname = 'ix_files_search_doc'"))
            comp = dict(conn.execute(text(
                "SELECT attrelid::regclass::text, attcompression::text FROM pg_attribute "
                "WHERE attname = 'content' AND attrelid IN ('files'::regclass, 'revisions'::regclass)")).all())
            return list(opts or []), comp
    finally:
        engine.dispose()


def test_the_migration_turns_the_list_on_and_its_downgrade_off(migrated: str) -> None:
    from tests.test_fastpaths import _migrate

    engine = create_engine(migrated)
    with engine.connect() as conn:
        lz4 = "lz4" in conn.scalar(text(
            "SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'"))
    engine.dispose()
    opts, comp = _options(migrated)
    assert "fastupdate=on" in opts
    assert comp == ({"files": "l", "revisions": "l"} if lz4 else {"files": "", "revisions": ""})
    store = _store(migrated, delay=60.0, max_delay=60.0)
    _write_some(store, 2)
    if store._pending is not None:
        store._pending.off = True  # leave the list full for the downgrade to empty
    store.close()
    _migrate(migrated, "0006", down=True)
    opts, comp = _options(migrated)
    assert "fastupdate=off" in opts and comp == {"files": "", "revisions": ""}
    assert _pending(migrated)["ix_files_search_doc"] == 0
    _migrate(migrated, "head")
    assert db.current_revision(db.create(migrated)) == db.HEAD


# -- SQLite: fts_pending (migration 0008) ---------------------------------------


def _sqlite(tmp_path: Path, **timing: float) -> SqlStore:
    store = open_store(f"sqlite:///{tmp_path / 'm.db'}")
    for name, value in timing.items():
        setattr(store._pending, name, value)
    store.create_agent("a")
    return store


def _pending_rows(store: SqlStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.scalar(text("SELECT count(*) FROM fts_pending")) or 0)


def _indexes_exact(store: SqlStore) -> None:
    """FTS5's own checks: the trigram index holds exactly what ``files.content`` holds
    (rank 1 compares with the content table), the word index is consistent in itself
    (rank 1 cannot apply to it: it also indexes ``path``, and deleted rows keep their
    path but are not indexed; searches compare it with the files instead)."""
    with store.engine.begin() as conn:
        conn.execute(text("INSERT INTO files_fts(files_fts, rank) VALUES ('integrity-check', 1)"))
        conn.execute(text("INSERT INTO files_search(files_search) VALUES ('integrity-check')"))


def test_sqlite_grep_sees_pending_rows_and_search_merges_them(tmp_path: Path) -> None:
    store = _sqlite(tmp_path, delay=60.0, max_delay=60.0)
    try:
        _write_some(store)
        _indexes_exact_fails = False
        assert _pending_rows(store) == 5
        try:
            _indexes_exact(store)
        except Exception:
            _indexes_exact_fails = True
        assert _indexes_exact_fails  # the control: the indexes lag behind until merged
        assert store.grep(S, "kiwi3 only", fixed_strings=True).files == ["/notes/n3.md"]
        store.edit(S, "/notes/n3.md", "kiwi3 only", "mango3 now")
        assert store.grep(S, "kiwi3 only", fixed_strings=True).files == []
        assert store.grep(S, "mango3").files == ["/notes/n3.md"]
        assert _pending_rows(store) == 5
        assert [h.path for h in store.search([S], "mango3")] == ["/notes/n3.md"]
        assert _pending_rows(store) == 0
        _indexes_exact(store)
        store.delete(S, "/notes/n3.md")
        store.move(S, "/notes/n4.md", "/moved/n4.md")
        assert store.grep(S, "mango3").files == []
        assert store.grep(S, "kiwi4").files == ["/moved/n4.md"]
    finally:
        store.close()
    store = open_store(f"sqlite:///{tmp_path / 'm.db'}")
    try:
        assert _pending_rows(store) == 0  # close merged
        _indexes_exact(store)
        assert [h.path for h in store.search([S], "kiwi4")] == ["/moved/n4.md"]
        assert store.search([S], "mango3") == []
    finally:
        store.close()


def test_sqlite_background_merge(tmp_path: Path) -> None:
    store = _sqlite(tmp_path)
    try:
        _write_some(store)
        deadline = time.monotonic() + 600  # a hang guard: a loaded machine merges late, not never
        while (store._pending.dirty or _pending_rows(store)) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _pending_rows(store) == 0 and store._pending.merges >= 1
        _indexes_exact(store)
    finally:
        store.close()


def test_sqlite_random_changes_keep_both_indexes_exact(tmp_path: Path) -> None:
    """Writes, edits, deletes, moves, reverts and bulk loads in random order, merged at
    random points: grep always equals a scan of the live files, and after every merge
    FTS5 finds both indexes equal to ``files``."""
    rng = random.Random(16)
    words = [f"w{i:02d}" for i in range(40)]
    store = _sqlite(tmp_path, delay=60.0, max_delay=60.0)
    try:
        live: dict[str, str] = {}

        def text_() -> str:
            return " ".join(rng.choice(words) for _ in range(rng.randint(1, 30))) + "\n"

        for step in range(300):
            op = rng.random()
            path = f"/d{rng.randint(0, 3)}/f{rng.randint(0, 12)}.md"
            if op < 0.35 or not live:
                store.write(S, path, text_())
            elif op < 0.5:
                p = rng.choice(sorted(live))
                old = live[p].split()[0]
                store.edit(S, p, old, rng.choice(words), replace_all=True)
            elif op < 0.6:
                store.delete(S, rng.choice(sorted(live)))
            elif op < 0.68:
                src = rng.choice(sorted(live))
                if path not in live:
                    store.move(S, src, path)
            elif op < 0.74:
                p = rng.choice(sorted(live))
                if store.stat(S, p).version > 1:
                    store.revert(S, p, 1)
            elif op < 0.78:
                batch = {f"/bulk{step}/b{i}.md": text_() for i in range(rng.choice([3, 25]))}
                store.bulk_write(S, batch)
            elif op < 0.88:
                store._pending._dirty_since = time.monotonic()
                store._pending.flush()
                assert _pending_rows(store) == 0
                _indexes_exact(store)
            live = {p: store.read(S, p).content for p in store.glob(S, "**")}
            word = rng.choice(words)
            expected = sorted(p for p, c in live.items() if word in c)
            assert store.grep(S, word, fixed_strings=True, limit=10**6).files == expected, step
            if step % 10 == 0:  # search merges first, then must agree with the files
                hits = {h.path for h in store.search([S], word, k=1000)}
                assert hits == {p for p, c in live.items() if word in c.split()}, step
        store._pending._dirty_since = time.monotonic()
        store._pending.flush()
        _indexes_exact(store)
        for word in words:
            hits = {h.path for h in store.search([S], word, k=1000)}
            assert hits == {p for p, c in live.items() if word in c.split()}, word
    finally:
        store.close()


def test_sqlite_migration_0008_down_merges_and_up_replaces_the_triggers(tmp_path: Path) -> None:
    from tests.test_fastpaths import _migrate

    url = f"sqlite:///{tmp_path / 'm.db'}"
    store = _sqlite(tmp_path, delay=60.0, max_delay=60.0)
    _write_some(store)
    store._pending.off = True  # leave the rows pending for the downgrade to merge
    store.close()

    def triggers() -> set[str]:
        engine = db.create(url)
        with engine.connect() as conn:
            names = set(conn.scalars(text("SELECT name FROM sqlite_master WHERE type IN ('trigger', 'table')")))
        engine.dispose()
        return names

    assert {"fts_pending", "files_index_pending_update"} <= triggers()
    _migrate(url, "0007", down=True)
    names = triggers()
    assert "fts_pending" not in names and "files_index_pending_update" not in names
    assert {"files_fts_insert", "files_fts_update", "files_search_delete"} <= names
    engine = db.create(url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO files_fts(files_fts, rank) VALUES ('integrity-check', 1)"))
    engine.dispose()
    _migrate(url, "head")
    assert "files_fts_insert" not in triggers()
    store = open_store(url)
    store._pending.delay = store._pending.max_delay = 60.0
    try:
        assert _pending_rows(store) == 0
        _indexes_exact(store)
        assert [h.path for h in store.search([S], "kiwi2")] == ["/notes/n2.md"]
        store.write(S, "/notes/n2.md", "papaya\n")
        assert _pending_rows(store) == 1
        assert store.grep(S, "papaya").files == ["/notes/n2.md"]
    finally:
        store.close()


def test_sqlite_read_then_write_transactions_wait_for_other_writers(tmp_path: Path) -> None:
    """A thread log's transaction reads, then writes. Another connection's commit in
    between (the merge thread, another process) must make it wait, not fail with
    "database is locked": it holds the write lock from its start (BEGIN IMMEDIATE)."""
    from sqlalchemy import select, update

    from memagent.vfs.models import threads
    from memagent.vfs.records.threads import ThreadStore

    store = _sqlite(tmp_path)
    other = db.create(f"sqlite:///{tmp_path / 'm.db'}")
    try:
        log = ThreadStore(store.engine)
        tid = log.create("a", "m")
        done: list[str] = []

        def meanwhile() -> None:
            with other.begin() as conn:
                conn.execute(update(threads).where(threads.c.id == tid).values(title="theirs"))
            done.append("theirs")

        with log._small_write() as conn:
            assert conn.execute(select(threads.c.title).where(threads.c.id == tid)).scalar() == ""
            writer = threading.Thread(target=meanwhile)
            writer.start()
            time.sleep(0.3)  # the other writer commits here if it can
            conn.execute(update(threads).where(threads.c.id == tid).values(title="mine"))
            assert done == []  # it waited for this transaction
        writer.join(10)
        assert done == ["theirs"]
        with store.engine.connect() as conn:
            assert conn.execute(select(threads.c.title).where(threads.c.id == tid)).scalar() == "theirs"
    finally:
        other.dispose()
        store.close()
