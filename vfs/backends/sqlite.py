"""SQLite: the statements and settings only SQLite understands.

Invariants: writers begin ``IMMEDIATE`` (the ``WRITE`` execution option), so a
transaction that reads before it writes holds the write lock from the start; one
writer at a time makes a batch's new row ids exactly ``max(id) + 1 ...`` (the bulk
upkeep relies on it); the FTS5 indexes lag behind ``files`` by ``fts_pending``
(migration 0008), which the merge empties.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal

from sqlalchemy import Connection, Engine, TextClause, event, text
from sqlalchemy.engine import URL

from memagent.vfs.backends.base import (
    INSERT_REVISION,
    UPDATE_LIVE,
    WRITE,
    Features,
    RankIndex,
    RankRow,
    in_scopes,
    raw_fetch_one,
)
from memagent.vfs.models import threads
from memagent.vfs.types import Entry

_HEAD_SQL = "SELECT content, version, deleted FROM files WHERE scope = ? AND path = ?"

# Ranges per ls query for the files between a directory's subdirectories (SQLite
# allows 500 terms in a compound SELECT).
_GAPS_PER_QUERY = 200

# ls's two queries as SQL text: building them as Core statements on every call cost
# more than running them (the text is compiled once per shape and cached).
_LS_DIRS = text("SELECT path, files FROM dirs WHERE scope = :scope AND depth = :depth "
                "AND path >= :lo AND path < :hi")

# The text each FTS5 index holds for a pending row out, the row's current text in
# (migration 0008 states the invariant these keep).
SQLITE_MERGE = {
    "files_fts": (
        "INSERT INTO files_fts(files_fts, rowid, content) "
        "SELECT 'delete', id, content FROM fts_pending WHERE content IS NOT NULL",
        "INSERT INTO files_fts(rowid, content) SELECT f.id, f.content FROM fts_pending AS p "
        "JOIN files AS f ON f.id = p.id WHERE f.content IS NOT NULL",
    ),
    "files_search": (
        "INSERT INTO files_search(files_search, rowid, path, content) "
        "SELECT 'delete', id, path, content FROM fts_pending WHERE content IS NOT NULL",
        "INSERT INTO files_search(rowid, path, content) SELECT f.id, f.path, f.content "
        "FROM fts_pending AS p JOIN files AS f ON f.id = p.id WHERE f.content IS NOT NULL",
    ),
}
_SQLITE_TABLES = text("SELECT name FROM sqlite_master WHERE type = 'table' "
                      "AND name IN ('fts_pending', 'files_fts', 'files_search')")


@functools.lru_cache(maxsize=64)
def _ls_files_query(ranges: int) -> TextClause:
    """The live files in ``ranges`` ranges of paths (bounds ``lo0``/``hi0``...), one UNION ALL."""
    return text(" UNION ALL ".join(
        f"SELECT path, size FROM files WHERE scope = :scope AND path >= :lo{i} AND path < :hi{i} "
        "AND deleted = :live" for i in range(ranges)))


# Ranked search: bm25 over the FTS5 table ``files_search`` (migration 0005), the path
# weighted ``weight`` against the text.
_SQLITE = """
SELECT f.scope, f.path, f.version, f.content, bm25(files_search, {weight}, 1.0) AS score
FROM files_search JOIN files AS f ON f.id = files_search.rowid
WHERE files_search MATCH :q AND f.scope IN ({scopes}) AND f.deleted = 0
ORDER BY score, f.path
LIMIT :k
"""


def fts5_match(words: Sequence[str]) -> str:
    """An FTS5 MATCH expression: the quoted words ORed (quotes doubled, so nothing is syntax)."""
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


_SQLITE_TOP = "SELECT rowid, bm25(files_search, {weight}, 1.0) AS score FROM files_search " \
    "WHERE files_search MATCH :q ORDER BY score LIMIT :n"


def _two_stage(conn: Connection, scopes: Sequence[str], match: str, k: int, weight: float) -> list[RankRow] | None:
    """The best ``k`` of ``scopes`` from the index alone, then their rows; None when unsure.

    Ranking inside FTS5 and joining only the top rows is several times faster than
    joining every match (3,000 matches: ~8 ms against ~30 ms). Rows of other scopes
    may take places in the top; when too few of ours survive and the index had more,
    the caller runs the full query (None).
    """
    n = 4 * k + 20
    top = conn.execute(text(_SQLITE_TOP.format(weight=weight)), {"q": match, "n": n}).all()
    if not top:
        return []
    score = {r.rowid: r.score for r in top}
    placeholders, params = in_scopes(scopes)
    ids = ", ".join(str(int(i)) for i in score)
    # The text only of the k kept (for their snippets): reading n files' text cost more.
    # With k or fewer in the top, one query reads everything.
    few = len(top) <= k
    rows = conn.execute(text(f"SELECT id, scope, path, version{', content' if few else ''} FROM files "
                             f"WHERE id IN ({ids}) AND scope IN ({placeholders}) AND deleted = 0"), params).all()
    if len(rows) < k and len(top) == n:
        return None
    found = sorted(rows, key=lambda r: (score[r.id], r.path))[:k]
    if few:
        content = {r.id: r.content for r in found}
    else:
        kept = ", ".join(str(int(r.id)) for r in found)
        content = {r.id: r.content for r in conn.execute(text(f"SELECT id, content FROM files WHERE id IN ({kept})"))}
    return [RankRow(r.scope, r.path, r.version, content[r.id], -float(score[r.id])) for r in found]



class SqliteBackend:
    """``Backend`` for SQLite (the pysqlite driver)."""

    name: Literal["sqlite"] = "sqlite"
    read_options: Mapping[str, Any] = {}
    atomic_overwrite = False
    pending_shared = True
    sql_false = "0"

    def engine_url(self, parsed: URL, url: str) -> str:
        return url  # the standard library's sqlite3

    def engine_setup(self, engine: Engine) -> None:
        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            # Take over BEGIN from pysqlite so writes can start IMMEDIATE.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Any) -> None:
            if conn.get_execution_options().get(WRITE):
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            else:
                conn.exec_driver_sql("BEGIN")

    def head(self, driver: Any, scope: str, path: str) -> tuple[Any, ...] | None:
        # A single SELECT runs in its own implicit transaction: nothing to set.
        return raw_fetch_one(driver, _HEAD_SQL, (scope, path))

    def overwrite(self, conn: Connection, where: Mapping[str, Any], state: Mapping[str, Any],
                  revision: Mapping[str, Any]) -> int | None:
        row = conn.execute(UPDATE_LIVE, {**where, **state}).first()
        if row is None:
            return None
        conn.execute(INSERT_REVISION, {"file_id": row.id, "version": row.version, **revision})
        return int(row.version)

    def ls_entries(self, conn: Connection, args: Mapping[str, Any], cut: int) -> list[Entry]:
        # The child directories and their file counts: one range of the dirs index
        # (migration 0006), however many files lie below.
        subdirs = conn.execute(_LS_DIRS, args).all()
        out = [Entry(p[cut:], True, int(n)) for p, n in subdirs]
        # The files directly here lie in the gaps between the child directories'
        # ranges: read those ranges of the listing index only.
        gaps, start = [], args["lo"]
        for below in sorted(p + "/" for p, _ in subdirs):  # by range, not name: "a.b/" < "a/"
            gaps.append((start, below))
            start = below[:-1] + "0"  # "0" follows "/": past every path below
        gaps.append((start, args["hi"]))
        for i in range(0, len(gaps), _GAPS_PER_QUERY):
            chunk = gaps[i : i + _GAPS_PER_QUERY]
            query: dict[str, Any] = {"scope": args["scope"], "live": False}
            for j, (g_lo, g_hi) in enumerate(chunk):
                query[f"lo{j}"], query[f"hi{j}"] = g_lo, g_hi
            out += [Entry(p[cut:], False, int(size))
                    for p, size in conn.execute(_ls_files_query(len(chunk)), query)]
        return out

    def grep_deadline(self, conn: Connection, ms: int) -> None:
        # SQLite runs in this process: grep's own deadline stops the scan between rows.
        return None

    def grep_index_only(self, conn: Connection) -> bool:
        return False  # SQLite's planner takes the FTS5 IN (...) as given

    def search_features(self, conn: Connection) -> Features:
        have = set(conn.scalars(text(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('files_fts', 'fts_pending')")))
        return Features(self.name, sqlite_fts="files_fts" in have, sqlite_pending="fts_pending" in have)

    def rank_index(self, conn: Connection) -> RankIndex:
        found = conn.exec_driver_sql(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'files_search'").first()
        return "fts5" if found else "scan"

    def rank_rows(self, conn: Connection, scopes: Sequence[str], words: Sequence[str],
                  stems: Sequence[str], k: int, *, path_weight: float) -> list[RankRow]:
        match = fts5_match(words)
        rows = _two_stage(conn, scopes, match, k, path_weight)
        if rows is not None:
            return rows
        placeholders, params = in_scopes(scopes)
        sql = text(_SQLITE.format(weight=path_weight, scopes=placeholders))
        # bm25 is lower-is-better and negative: flip it so higher is better.
        return [RankRow(r.scope, r.path, r.version, r.content, -float(r.score))
                for r in conn.execute(sql, {**params, "q": match, "k": k})]

    def merge_pending(self, engine: Engine, *, search_only: bool, own: str) -> bool:
        # search_only changes nothing here: fts_pending lists every writer's rows.
        with engine.connect().execution_options(**{own: True}) as conn:
            tables = set(conn.scalars(_SQLITE_TABLES))
            if "fts_pending" not in tables or not _has_pending(conn):
                return False  # a schema before 0008, or nothing to merge: no write lock taken
        with engine.connect().execution_options(**{WRITE: True, own: True}) as conn, conn.begin():
            for index, statements in SQLITE_MERGE.items():
                if index in tables:
                    for statement in statements:
                        conn.exec_driver_sql(statement)
            conn.exec_driver_sql("DELETE FROM fts_pending")
        return True

    def merges_in_background(self, engine: Engine) -> bool:
        # An in-memory database is one connection per thread: a thread would see another.
        return engine.url.database not in (None, "", ":memory:")

    @contextmanager
    def bulk_upkeep(self, conn: Connection, new_rows: int, *, rebuild_min: int = 0) -> Iterator[bool]:
        # A row in ``memagent_bulk`` (this transaction holds the only write lock, so no
        # other writer ever sees it) pauses the directory index and the two FTS5 insert
        # triggers, which are then fed by one INSERT ... SELECT each (FTS5 indexes a
        # batch many times faster than row by row). The FTS5 tables, not their
        # triggers: since 0008 one pending trigger feeds both.
        have = set(conn.scalars(text(
            "SELECT name FROM sqlite_master WHERE name IN "
            "('memagent_bulk', 'files_fts', 'files_search', 'fts_pending')")))
        if "memagent_bulk" not in have:
            yield False
            return
        first = conn.scalar(text("SELECT coalesce(max(id), 0) FROM files"))
        conn.execute(text("INSERT INTO memagent_bulk(flag) VALUES (1)"))
        try:
            yield True
        finally:
            conn.execute(text("DELETE FROM memagent_bulk"))
        # Rows above ``first`` are exactly this batch: SQLite numbers new rows max(id) + 1
        # and no other writer can insert until this transaction ends.
        # A new row whose id is pending (an id a removed row had) is the merge's to index.
        fresh = "id > :first AND content IS NOT NULL" + (
            " AND id NOT IN (SELECT id FROM fts_pending)" if "fts_pending" in have else "")
        if "files_fts" in have:
            conn.execute(text(f"INSERT INTO files_fts(rowid, content) SELECT id, content FROM files "
                              f"WHERE {fresh}"), {"first": first})
        if "files_search" in have:
            conn.execute(text(f"INSERT INTO files_search(rowid, path, content) SELECT id, path, content "
                              f"FROM files WHERE {fresh}"), {"first": first})

    def migration_lock(self, conn: Connection, wait_seconds: int, key: int) -> None:
        return None  # BEGIN IMMEDIATE already serialises every writer

    @contextmanager
    def small_write(self, engine: Engine) -> Iterator[Connection]:
        # A transaction, which costs nothing here.
        with self.locking_write(engine) as conn:
            yield conn

    @contextmanager
    def locking_write(self, engine: Engine) -> Iterator[Connection]:
        # BEGIN IMMEDIATE: a transaction that reads before it writes must hold the write
        # lock from the start, or a commit by another connection in between (another
        # process, the index merge of vfs/pending.py) makes its first write fail at once
        # with "database is locked" instead of waiting. It also serialises every writer,
        # which is all ``FOR UPDATE`` (ignored here) asks for.
        with engine.connect().execution_options(**{WRITE: True}) as conn, conn.begin():
            yield conn

    def append_message(self, conn: Connection, row: Any, mark: Any, thread_id: str) -> None:
        conn.execute(row)  # one transaction (``small_write``)
        conn.execute(mark.where(threads.c.id == thread_id))

    def note_every_file(self, conn: Connection) -> None:
        conn.execute(text("INSERT OR REPLACE INTO embedding_pending(file_id, seq) "
                          "SELECT id, random() FROM files WHERE content IS NOT NULL"))


def _has_pending(conn: Connection) -> bool:
    return conn.exec_driver_sql("SELECT EXISTS (SELECT 1 FROM fts_pending)").scalar() == 1


SQLITE = SqliteBackend()
