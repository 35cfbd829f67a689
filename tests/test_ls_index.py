"""``ls`` from the directory index (migration 0006) equals the listing computed from ``glob("**")``.

On SQLite and Postgres: random trees changed by every kind of write (create,
overwrite, delete, move, revert, bulk import over existing and new files,
conversation-style direct inserts through the triggers), then every folder's
``ls`` is compared with what the full file list implies; and a database with files
written before 0006 gets a correct index from the migration's backfill.
"""

from __future__ import annotations

import random
from collections import defaultdict

import pytest
from sqlalchemy import text

from memagent.vfs import SqlStore, db, open_store
from memagent.vfs.errors import VfsError
from memagent.vfs.types import Entry

S = "agent:a"
NAMES = ["a", "b", "a.b", "a0", "a-b", "ab", "é", "z z", "people", "x.md"]


def expected_listing(store: SqlStore, scope: str) -> dict[str, list[Entry]]:
    """Every folder's entries as the list of live files implies them."""
    sizes = {f.path: f.size for f in store.all_files(scope)}
    assert sorted(sizes) == sorted(store.glob(scope, "**"))
    below: dict[str, dict[str, Entry]] = defaultdict(dict)
    below["/"] = {}
    for path, size in sizes.items():
        parts = path.strip("/").split("/")
        for depth in range(len(parts)):
            folder = "/" + "/".join(parts[:depth])
            name = parts[depth]
            if depth == len(parts) - 1:
                below[folder][name] = Entry(name, False, size)
            else:
                old = below[folder].get(name)
                below[folder][name] = Entry(name, True, (old.size if old else 0) + 1)
    return {folder: sorted(entries.values(), key=lambda e: e.name) for folder, entries in below.items()}


def check_every_folder(store: SqlStore, scope: str = S) -> None:
    for folder, entries in expected_listing(store, scope).items():
        assert store.ls(scope, folder) == entries, folder


def _random_path(rng: random.Random) -> str:
    depth = rng.randint(1, 4)
    return "/" + "/".join(rng.choice(NAMES) for _ in range(depth - 1)) + ("/" if depth > 1 else "") \
        + rng.choice(NAMES) + rng.choice(["", ".md", ".txt"])


def _mutate(store: SqlStore, rng: random.Random, steps: int) -> None:
    deleted: set[str] = set()
    for _ in range(steps):
        live = [f.path for f in store.all_files(S)]
        op = rng.random()
        try:
            if op < 0.45 or not live:
                store.write(S, _random_path(rng), "x" * rng.randint(0, 50) + "\n")
            elif op < 0.6:
                store.write(S, rng.choice(live), "y" * rng.randint(0, 50) + "\n")
            elif op < 0.75:
                victim = rng.choice(live)
                store.delete(S, victim)
                deleted.add(victim)
            elif op < 0.85:
                src = rng.choice(live)
                store.move(S, src, _random_path(rng))
                deleted.add(src)
            elif op < 0.92:
                # Revert a deleted (or moved-away) file, bringing its row back, or a live one.
                pool = sorted(deleted - set(live)) or live
                store.revert(S, rng.choice(pool), 1)
            else:
                batch = {_random_path(rng): "bulk\n" for _ in range(rng.randint(1, 6))}
                if live:
                    batch[rng.choice(live)] = "over\n"
                store.bulk_write(S, batch)
        except VfsError:
            pass  # a tree rule refused it (file below a file, file at a folder...): nothing changed


@pytest.mark.parametrize("seed", range(6))
def test_ls_of_every_folder_equals_the_glob_listing(store: SqlStore, seed: int) -> None:
    rng = random.Random(seed)
    _mutate(store, rng, 60)
    check_every_folder(store)
    # Deleting everything leaves no directory behind.
    for f in store.all_files(S):
        store.delete(S, f.path)
    assert store.ls(S, "/") == []
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM dirs WHERE scope = :s"), {"s": S}).scalar() == 0


def test_bulk_import_keeps_the_index(store: SqlStore) -> None:
    from bench.corpus import generate

    store.write(S, "/people/keep.md", "keep\n")
    store.bulk_write(S, generate(300, seed=5).files)
    check_every_folder(store)
    assert store.grep(S, "keep").files == ["/people/keep.md"]
    # Bulk-loaded files are searchable through both full-text indexes.
    one = sorted(generate(300, seed=5).files)[7]
    word = max((w for w in generate(300, seed=5).files[one].split() if w.isalpha()), key=len)
    assert one in store.grep(S, word, fixed_strings=True, limit=10**6).files
    assert store.search([S], word, k=1000)


def test_direct_inserts_are_indexed_too(store: SqlStore) -> None:
    """Writers that bypass the store (conversation files) are kept in step by the triggers."""
    with store.engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO files(scope, path, content, size, version, deleted, created_at, updated_at) "
            "VALUES (:s, '/conv/2026/one.md', 'hi', 2, 1, :f, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
        ), {"s": S, "f": False})
    assert store.ls(S, "/") == [Entry("conv", True, 1)]
    assert store.ls(S, "/conv/2026") == [Entry("one.md", False, 2)]


def test_ls_missing_folder_and_file(store: SqlStore) -> None:
    store.write(S, "/a/b.md", "hello\n")
    assert store.ls(S, "/a/b.md") == [Entry("b.md", False, 6)]
    with pytest.raises(VfsError, match="no directory or file at /nope"):
        store.ls(S, "/nope")
    with pytest.raises(VfsError, match="no directory or file at /a/b"):
        store.ls(S, "/a/b")


@pytest.mark.parametrize("db_url", ["sqlite", "postgres"], indirect=True)
def test_migration_0006_backfills_existing_files(db_url: str) -> None:
    from tests.test_fastpaths import _migrate

    _migrate(db_url, "0005")
    old = open_store(db_url, migrate=False)
    old.create_agent("a")
    _mutate(old, random.Random(42), 80)
    old.close()
    assert db.current_revision(db.create(db_url)) == "0005"
    store = open_store(db_url)  # migrates to head, backfilling dirs
    check_every_folder(store)
    _mutate(store, random.Random(43), 30)
    check_every_folder(store)
    store.close()
    _migrate(db_url, "0005", down=True)
    _migrate(db_url, "head")
    store = open_store(db_url)
    check_every_folder(store)
    store.close()


def test_bulk_import_at_the_top_level_only(store: SqlStore) -> None:
    store.bulk_write(S, {f"/top-{i}.md": f"{i}\n" for i in range(30)})
    check_every_folder(store)
