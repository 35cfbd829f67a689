"""The hot calls' shortcuts (issue 16) keep today's answers and survive a lost connection.

- ``read`` and every write's read go through one DBAPI ``SELECT`` (``SqlStore._head``):
  the same content, versions and errors as before, on both databases.
- Postgres ``grep`` for file names with a plain literal ships names only: the same
  answer as the reference grep, including globs, caps and paths that need escaping.
- Pooled Postgres connections are tested only after sitting idle: one the server
  closed meanwhile is replaced, and the caller never sees the failure.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from memagent.vfs import SqlStore, db
from memagent.vfs.errors import IsADirectory, NotFound, StaleVersion
from memagent.vfs.grep.engine import exact_literal

S = "agent:a"


def test_read_and_write_through_the_head_query(store: SqlStore) -> None:
    store.write(S, "/d/f.md", "one\ntwo\n")
    got = store.read(S, "/d/f.md")
    assert (got.content, got.version, got.total_lines) == ("one\ntwo\n", 1, 2)
    assert store.read(S, "/d/f.md", offset=1).content == "two\n"
    with pytest.raises(IsADirectory):
        store.read(S, "/d")
    with pytest.raises(NotFound, match="no file at /nope.md"):
        store.read(S, "/nope.md")
    store.delete(S, "/d/f.md")
    with pytest.raises(NotFound, match="was deleted"):
        store.read(S, "/d/f.md")
    assert store.write(S, "/d/f.md", "back\n").version == 3
    with pytest.raises(StaleVersion):
        store.write(S, "/d/f.md", "x\n", expected_version=1)
    assert store.edit(S, "/d/f.md", "back", "forth", expected_version=3).version == 4
    with pytest.raises(IsADirectory):
        store.write(S, "/d", "x\n")


@pytest.mark.parametrize("pattern, fixed", [
    ("zephyr", False), ("zep", False), ("a%b_c", True), ("50% off", True), (r"back\slash", True),
    ("ünïcode", False), ("Zephyr", False), ("(?i)zephyr", False), ("zephyr|quokka", False),
])
def test_names_only_grep_equals_the_reference(store: SqlStore, pattern: str, fixed: bool) -> None:
    files = {
        "/a/one.md": "a zephyr here\n", "/a/two.md": "Zephyr capital\n", "/b/three.md": "a%b_c and 50% off\n",
        "/b/four.md": "back\\slash\n", "/c/five.md": "ünïcode text\n", "/c/six.md": "nothing\n",
        "/c/seven.md": "zep\nzephyr\nquokka\n", "/skip.txt": "zephyr in a txt\n",
    }
    store.bulk_write(S, files)
    for kw in ({}, {"glob": "*.md"}, {"path": "/c"}, {"limit": 1}, {"output_mode": "count"}):
        got = store.grep(S, pattern, fixed_strings=fixed, **kw)  # type: ignore[arg-type]
        want = store._grep_plain(S, pattern, fixed_strings=fixed, **kw)  # type: ignore[arg-type]
        assert (got.files, got.lines, got.counts, got.truncated) == (
            want.files, want.lines, want.counts, want.truncated), kw


def test_exact_literal() -> None:
    import re

    assert exact_literal(re.compile("zephyr")) == "zephyr"
    assert exact_literal(re.compile(re.escape("a.b*c"))) == "a.b*c"
    for pattern, flags in (("zep+", 0), ("zephyr", re.I), ("(?i)zephyr", 0), ("a\nb", 0), ("", 0), ("a|b", 0)):
        assert exact_literal(re.compile(pattern, flags)) is None


def test_postgres_connection_closed_while_idle_is_replaced(fresh_pg_url: str, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    # Postgres only: SQLite has no server to drop the pool's connections.
    from memagent.vfs import open_store

    monkeypatch.setattr(db, "PING_AFTER_IDLE", 0.0)
    store = open_store(fresh_pg_url)
    store.create_agent("a")
    store.write(S, "/f.md", "hello\n")
    admin = db.create(fresh_pg_url)
    with admin.connect() as conn:  # every pooled connection of the store's, server-side
        conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE datname = current_database() AND pid <> pg_backend_pid()"))
    admin.dispose()
    assert store.read(S, "/f.md").content == "hello\n"  # the dead connection was tested and replaced
    assert store.write(S, "/f.md", "again\n").version == 2
    store.close()


def test_large_bulk_load_rebuilds_postgres_indexes(store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch that is most of the table takes the drop-and-rebuild path; same answers after."""
    from bench.corpus import RARE, generate
    from memagent.vfs.files import revisions

    monkeypatch.setattr(revisions, "GIN_REBUILD_MIN", 10)
    before = _gin_indexes(store)
    corpus = generate(200, seed=11)
    store.bulk_write(S, corpus.files)
    assert _gin_indexes(store) == before  # rebuilt, same names and definitions (none on SQLite)
    assert store.grep(S, RARE).files == corpus.truth["rare"]
    assert store.grep(S, RARE).files == store._grep_plain(S, RARE).files
    assert [r.path for r in store.search([S], "QUOKKA", k=3)] or not before
    with pytest.raises(IsADirectory):  # a refused batch leaves the indexes as they were
        store.bulk_write(S, {"/x.md": "ok\n", "/people": "a file where a folder is\n"})
    assert _gin_indexes(store) == before


def _gin_indexes(store: SqlStore) -> list[tuple[str, str]]:
    if store.engine.dialect.name != "postgresql":
        return []
    with store.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'files' "
            "AND indexdef LIKE '% USING gin %' ORDER BY 1"))]
