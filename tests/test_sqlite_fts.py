"""SQLite's full-text entries per scope (migration 0012, vfs/backends/sqlite_fts.py).

Each scope's entries are one rowid block of its bucket's tables; scopes fill buckets
of about ``BUCKET_FILES`` live files. These tests make buckets small so that a few
agents span several, and check against FTS5's own ``integrity-check`` (rank 1: each
table against its view of ``files``) and against grep and search answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from memagent.vfs import SqlStore, open_store
from memagent.vfs.backends import sqlite_fts
from memagent.vfs.paths import scope_name
from tests.test_fastpaths import _migrate


def _exact(store: SqlStore) -> None:
    """Every bucket's tables hold exactly what their views say (FTS5 checks itself)."""
    with store.engine.begin() as conn:
        buckets = list(conn.scalars(text("SELECT DISTINCT bucket FROM fts_scopes"))) or [0]
        for bucket in buckets:
            for kind in sqlite_fts.KINDS:
                t = sqlite_fts.table(kind, bucket)
                conn.execute(text(f"INSERT INTO {t}({t}, rank) VALUES ('integrity-check', 1)"))


@pytest.fixture
def small_buckets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[SqlStore]:
    monkeypatch.setattr(sqlite_fts, "BUCKET_FILES", 4)
    store = open_store(f"sqlite:///{tmp_path / 'm.db'}")
    store._pending.delay = store._pending.max_delay = 60.0  # merged by flush() below
    try:
        yield store
    finally:
        store.close()


def _agent(i: int) -> str:
    return scope_name("agent", f"a{i}")


def test_agents_fill_buckets_and_each_reads_its_own_block(small_buckets: SqlStore) -> None:
    store = small_buckets
    for i in range(6):
        store.create_agent(f"a{i}")
        for j in range(3):
            store.write(_agent(i), f"/k/n{j}.md", f"shared zephyr words, agent {i} note {j}, token{i}x{j}\n")
    store._pending.flush()
    with store.engine.connect() as conn:
        buckets = {r[0]: r[1] for r in conn.execute(text("SELECT scope, bucket FROM fts_scopes"))}
    assert len(set(buckets.values())) >= 3  # 4 files a bucket, 3-4 files an agent
    _exact(store)
    for i in range(6):
        assert store.grep(_agent(i), "zephyr").files == ["/k/n0.md", "/k/n1.md", "/k/n2.md"]
        assert store.grep(_agent(i), f"token{i}x1").files == ["/k/n1.md"]
        assert store.grep(_agent(i), "token9").files == []
        hits = store.search([_agent(i)], "zephyr note")
        assert {h.path for h in hits} == {"/k/n0.md", "/k/n1.md", "/k/n2.md"}
        assert {h.scope for h in hits} == {_agent(i)}
    # A search over scopes in different buckets merges them.
    both = store.search([_agent(0), _agent(5)], "token0x2 token5x0")
    assert {(h.scope, h.path) for h in both} == {(_agent(0), "/k/n2.md"), (_agent(5), "/k/n0.md")}


def test_edits_moves_deletes_and_reverts_keep_every_bucket_exact(small_buckets: SqlStore) -> None:
    store = small_buckets
    for i in range(4):
        store.create_agent(f"a{i}")
        for j in range(3):
            store.write(_agent(i), f"/n{j}.md", f"alpha {i} {j}\n")
    store._pending.flush()
    for i in range(4):
        store.edit(_agent(i), "/n0.md", "alpha", "omega")
        store.move(_agent(i), "/n1.md", "/moved/n1.md")
        store.delete(_agent(i), "/n2.md")
    store.revert(_agent(3), "/n2.md", 1)
    with store.engine.connect() as conn:
        assert conn.scalar(text("SELECT count(*) FROM fts_pending")) > 0
    # Pending rows are grep candidates before the merge...
    assert store.grep(_agent(1), "omega").files == ["/n0.md"]
    store._pending.flush()
    _exact(store)
    for i in range(4):
        assert store.grep(_agent(i), "alpha").files == (["/moved/n1.md", "/n2.md"] if i == 3 else ["/moved/n1.md"])
        assert [h.path for h in store.search([_agent(i)], "omega")] == ["/n0.md"]
        assert store.search([_agent(i)], "moved") and store.search([_agent(i)], "moved")[0].path == "/moved/n1.md"


def test_a_reused_row_id_in_another_scope_is_indexed_there(small_buckets: SqlStore) -> None:
    """A removed row's id taken by a row of another scope: the merge removes the old
    entry from the old scope's block and indexes the new one in the new scope's."""
    store = small_buckets
    for i in range(3):
        store.create_agent(f"a{i}")
        for j in range(3):
            store.write(_agent(i), f"/x{j}.md", f"kiwi{i}\n")
    store._pending.flush()
    with store.engine.begin() as conn:
        old = conn.scalar(text("SELECT max(id) FROM files"))
        scope = conn.scalar(text("SELECT scope FROM files WHERE id = :i"), {"i": old})
        conn.execute(text("DELETE FROM revisions WHERE file_id = :i"), {"i": old})
        conn.execute(text("DELETE FROM files WHERE id = :i"), {"i": old})
        conn.execute(text(
            "INSERT INTO files(id, scope, path, content, size, version, deleted, created_at, updated_at) "
            "VALUES (:i, :s, '/y.md', 'papaya\n', 7, 1, 0, '2026-01-01', '2026-01-01')"),
            {"i": old, "s": _agent(0)})
    with store.engine.connect() as conn:
        bucket = dict(conn.execute(text("SELECT scope, bucket FROM fts_scopes")).all())
    assert bucket[scope] != bucket[_agent(0)]  # the id moves between buckets
    store._pending.flush()
    _exact(store)
    assert store.grep(_agent(0), "papaya").files == ["/y.md"]
    assert store.grep(scope, "kiwi").files == ["/x0.md", "/x1.md"]  # its /x2.md went with the id


def test_migration_0012_down_and_up_with_many_buckets(small_buckets: SqlStore, tmp_path: Path) -> None:
    store = small_buckets
    for i in range(5):
        store.create_agent(f"a{i}")
        for j in range(3):
            store.write(_agent(i), f"/n{j}.md", f"beta {i} {j}\n")
    store._pending.flush()
    store.close()
    url = f"sqlite:///{tmp_path / 'm.db'}"
    _migrate(url, "0011", down=True)
    again = open_store(url)  # upgrades to head: one bucket (fewer than 5,000 files)
    try:
        with again.engine.connect() as conn:
            assert set(conn.scalars(text("SELECT bucket FROM fts_scopes"))) == {0}
            left = set(conn.scalars(text("SELECT name FROM sqlite_master WHERE name GLOB 'files_fts_*'")))
        assert not {n for n in left if n[len("files_fts_"):].isdigit()}
        _exact(again)
        for i in range(5):
            assert again.grep(_agent(i), "beta").files == ["/n0.md", "/n1.md", "/n2.md"]
            assert {h.scope for h in again.search([_agent(i)], "beta")} == {_agent(i)}
    finally:
        again.close()
