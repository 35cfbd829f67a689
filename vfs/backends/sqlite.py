"""SQLite: the statements and settings only SQLite understands.

Invariants: writers begin ``IMMEDIATE`` (the ``WRITE`` execution option), so a
transaction that reads before it writes holds the write lock from the start; one
writer at a time makes a batch's new row ids exactly ``max(id) + 1 ...`` (the bulk
upkeep relies on it); the FTS5 indexes lag behind ``files`` by ``fts_pending``
(migration 0008), which the merge empties; their entries are kept in per-scope
rowid blocks and buckets of tables (``sqlite_fts``, migration 0012).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Integer,
    TextClause,
    column,
    create_engine,
    event,
    select,
    table,
    text,
)
from sqlalchemy.engine import URL

from memagent.vfs.backends import sqlite_fts
from memagent.vfs.backends.base import (
    INSERT_REVISION,
    UPDATE_LIVE,
    WRITE,
    Features,
    PrefilterQuery,
    RankIndex,
    RankRow,
    in_scopes,
    raw_fetch_one,
)
from memagent.vfs.models import files, threads
from memagent.vfs.types import Entry

_HEAD_SQL = "SELECT content, version, deleted FROM files WHERE scope = ? AND path = ?"
_PENDING = table("fts_pending", column("id"))

# Ranges per ls query for the files between a directory's subdirectories (SQLite
# allows 500 terms in a compound SELECT).
_GAPS_PER_QUERY = 200

# ls's two queries as SQL text: building them as Core statements on every call cost
# more than running them (the text is compiled once per shape and cached).
_LS_DIRS = text("SELECT path, files FROM dirs WHERE scope = :scope AND depth = :depth "
                "AND path >= :lo AND path < :hi")

_SQLITE_TABLES = text("SELECT name FROM sqlite_master WHERE type = 'table' "
                      "AND name IN ('fts_pending', 'files_fts', 'files_search')")


@functools.lru_cache(maxsize=64)
def _ls_files_query(ranges: int) -> TextClause:
    """The live files in ``ranges`` ranges of paths (bounds ``lo0``/``hi0``...), one UNION ALL."""
    return text(" UNION ALL ".join(
        f"SELECT path, size FROM files WHERE scope = :scope AND path >= :lo{i} AND path < :hi{i} "
        "AND deleted = :live" for i in range(ranges)))


def fts5_match(words: Sequence[str]) -> str:
    """An FTS5 MATCH expression: the quoted words ORed (quotes doubled, so nothing is syntax)."""
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


class SqliteBackend:
    """``Backend`` for SQLite (the pysqlite driver)."""

    name: Literal["sqlite"] = "sqlite"
    read_options: Mapping[str, Any] = {}
    atomic_overwrite = False
    pending_shared = True
    sql_false = "0"

    drops_connections = False

    def create_engine(self, parsed: URL, url: str) -> Engine:
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        # LIFO as on Postgres (see there); a writer waits up to 30 s for the write lock.
        engine = create_engine(self.engine_url(parsed, url), connect_args={"timeout": 30}, pool_use_lifo=True)
        self.engine_setup(engine)  # WAL, BEGIN IMMEDIATE for writers
        return engine

    def missing_database(self, parsed: URL) -> str | None:
        if not parsed.database or parsed.database == ":memory:":
            return None
        return None if Path(parsed.database).expanduser().is_file() else parsed.database

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

    def rows_filtered(self, conn: Connection) -> bool:
        return False  # no roles: whoever opens the file sees everything

    def grep_index_only(self, conn: Connection) -> bool:
        return False  # SQLite's planner takes the FTS5 IN (...) as given

    def grep_prefilter(self, conn: Connection, scope: str, features: Features,
                       query: PrefilterQuery) -> ColumnElement[bool] | None:
        # The scope's trigram table, read in the scope's own rowid range (sqlite_fts); rows
        # noted in fts_pending are always candidates (the index may hold an older text).
        if not features.sqlite_fts:
            return None
        found = sqlite_fts.trigram_ids_sql(conn, scope)
        if found is None:  # nothing of the scope indexed yet: only pending rows can match
            return files.c.id.in_(select(_PENDING.c.id)) if features.sqlite_pending else files.c.id.in_([])
        sql, bounds = found
        if features.sqlite_pending:
            # One IN over a UNION: SQLite builds it once and probes files by id.
            sql += " UNION ALL SELECT id FROM fts_pending"
        return files.c.id.in_(text(sql).bindparams(q=query.fts5(), **bounds).columns(id=Integer))

    def regex_prefilter(self, conn: Connection, features: Features, pg_pattern: str) -> ColumnElement[bool] | None:
        return None  # no index reads a regex here: RE2 skips the texts that cannot match

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
        # bm25 over each scope's own rowid range of its bucket (sqlite_fts), then the
        # best k live files. A few more than k per scope: an entry may be stale (a
        # file another connection changed since search merged), and is dropped below.
        hits = sqlite_fts.ranked(conn, scopes, fts5_match(words), 2 * k + 10, path_weight)
        if not hits:
            return []
        score = {h.file_id: h.score for h in hits}
        placeholders, params = in_scopes(scopes)
        ids = ", ".join(str(i) for i in score)
        rows = conn.execute(text(f"SELECT id, scope, path, version FROM files WHERE id IN ({ids}) "
                                 f"AND scope IN ({placeholders}) AND deleted = 0"), params).all()
        # bm25 is lower-is-better and negative: flip it so higher is better.
        found = sorted(rows, key=lambda r: (score[r.id], r.path, r.scope))[:k]  # ties: path, then scope
        # The text of the k kept only (for their snippets).
        kept = ", ".join(str(int(r.id)) for r in found) or "NULL"
        content: dict[int, str] = {int(i): c for i, c in conn.execute(
            text(f"SELECT id, content FROM files WHERE id IN ({kept})"))}
        return [RankRow(r.scope, r.path, r.version, content[r.id], -float(score[r.id])) for r in found]

    def merge_pending(self, engine: Engine, *, search_only: bool, own: str) -> bool:
        # search_only changes nothing here: fts_pending lists every writer's rows.
        with engine.connect().execution_options(**{own: True}) as conn:
            tables = set(conn.scalars(_SQLITE_TABLES))
            if "fts_pending" not in tables or not _has_pending(conn):
                return False  # a schema before 0008, or nothing to merge: no write lock taken
        with engine.connect().execution_options(**{WRITE: True, own: True}) as conn, conn.begin():
            sqlite_fts.merge(conn)
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
        sqlite_fts.index_new(conn, first, skip_pending="fts_pending" in have)

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
