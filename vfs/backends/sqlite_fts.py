"""SQLite's full-text indexes, kept per scope so that one agent's grep and search read its own entries.

FTS5 indexes cannot take a b-tree key, so on one table of every agent's files a
grep or a ranked search of one agent reads every agent's entries of each word
before the scope drops them (1,000 agents x 100 files: a common word's grep took
13x a database of the agent alone, a search 50x). Two things bound that (migration
0012):

- **Scope blocks of rowids.** Each scope gets a number, ``key`` in ``fts_scopes``;
  a file's entries carry the rowid ``key << KEY_SHIFT | files.id``, so one scope's
  entries are one rowid range, and FTS5 answers ``MATCH ... AND rowid BETWEEN lo
  AND hi`` by seeking each word's list to the range instead of walking it.
- **Buckets.** Scopes are assigned, in the order they are first indexed, to
  buckets of at most about ``BUCKET_FILES`` live files; each bucket is its own pair
  of FTS5 tables (bucket 0: ``files_fts``, ``files_search``; bucket n:
  ``files_fts_n``, ``files_search_n``). bm25 counts each query word's files over the
  whole table it reads (an O(table) step no range avoids), so a table never holds
  more than a bucket. A database under ``BUCKET_FILES`` files, which is most of
  them, has bucket 0 only, and ranks as one table did before.

Each bucket's tables take their text from a view of ``files``, ``fts_docs_<n>``: the
bucket's live files under their rowids (bucket 0's also shows, under a NULL rowid,
the live files of scopes not assigned yet, so that FTS5's own ``integrity-check``
with rank 1 compares an index with what it should hold, lag included). No query
reads text through the view: an entry is removed by giving FTS5 the text it
indexed (``fts_pending`` records it, with the scope, migrations 0008 and 0012).

Invariants:
- A scope's ``key`` and ``bucket`` never change once assigned (a file never changes
  scope), and every scope with an indexed entry has them.
- For every ``files`` row not in ``fts_pending``, its bucket's tables hold exactly
  its current text (nothing for a deleted row) under its rowid; for a row in it,
  exactly the recorded state. ``merge`` restores the first for every row.
- Assigning a scope or creating a bucket's tables happens only inside a write
  transaction (the merge's, or a bulk load's), so it commits or vanishes with the
  entries it was made for.

bm25's statistics are the bucket's: a search over scopes in two buckets (an agent
and ``/user/`` in a large database) merges scores from two tables whose word
frequencies differ slightly. ``docs/scale-out.md`` gives the measured cost.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, NamedTuple

from sqlalchemy import Connection, text

KEY_SHIFT = 40  # file ids below 2**40; 2**23 scopes fit in a signed 64-bit rowid
BUCKET_FILES = 5000

Kind = Literal["trigram", "words"]
# What each index holds and how it is made (0003's and 0005's, over the bucket's view).
_COLUMNS: dict[Kind, tuple[str, ...]] = {"trigram": ("content",), "words": ("path", "content")}
_OPTIONS: dict[Kind, str] = {
    "trigram": "content, content='{view}', content_rowid='fts_rowid', tokenize='trigram', "
               "detail=none, columnsize=0",
    "words": "path, content, content='{view}', content_rowid='fts_rowid', "
             "tokenize='porter unicode61 remove_diacritics 2'",
}
_BASE: dict[Kind, str] = {"trigram": "files_fts", "words": "files_search"}
KINDS: tuple[Kind, ...] = ("trigram", "words")


class Block(NamedTuple):
    """Where a scope's entries are: its bucket and its rowid range."""

    key: int
    bucket: int

    @property
    def lo(self) -> int:
        return self.key << KEY_SHIFT

    @property
    def hi(self) -> int:
        return ((self.key + 1) << KEY_SHIFT) - 1


def table(kind: Kind, bucket: int) -> str:
    """The FTS5 table of ``kind`` for ``bucket`` (a name made here only: safe to inline)."""
    base = _BASE[kind]
    return base if bucket == 0 else f"{base}_{int(bucket)}"


def view(bucket: int) -> str:
    return f"fts_docs_{int(bucket)}"


def create_sql(kind: Kind, bucket: int) -> str:
    return f"CREATE VIRTUAL TABLE {table(kind, bucket)} USING fts5({_OPTIONS[kind].format(view=view(bucket))})"


def view_sql(bucket: int) -> str:
    """The bucket's live files as its FTS5 tables should hold them (see the module docstring)."""
    rowid = f"(s.key << {KEY_SHIFT}) | f.id AS fts_rowid, f.path, f.content"
    if bucket == 0:
        return (f"CREATE VIEW {view(0)} AS SELECT {rowid} FROM files AS f "
                "LEFT JOIN fts_scopes AS s ON s.scope = f.scope "
                "WHERE coalesce(s.bucket, 0) = 0 AND f.content IS NOT NULL")
    return (f"CREATE VIEW {view(bucket)} AS SELECT {rowid} FROM files AS f "
            f"JOIN fts_scopes AS s ON s.scope = f.scope WHERE s.bucket = {int(bucket)} AND f.content IS NOT NULL")


def kinds_present(conn: Connection) -> list[Kind]:
    """The indexes this database has (bucket 0 exists for each: 0003 and 0005 made them
    when this SQLite could; 0012 made them contentless)."""
    names = set(conn.scalars(text(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('files_fts', 'files_search')")))
    return [k for k in KINDS if _BASE[k] in names]


def block(conn: Connection, scope: str) -> Block | None:
    """The scope's block, or None when nothing of it was ever indexed."""
    row = conn.execute(text("SELECT key, bucket FROM fts_scopes WHERE scope = :s"), {"s": scope}).first()
    return None if row is None else Block(int(row[0]), int(row[1]))


def blocks(conn: Connection, scopes: Sequence[str]) -> dict[str, Block]:
    return {s: b for s in scopes if (b := block(conn, s)) is not None}


def assign(conn: Connection, scopes: Iterable[str], kinds: Sequence[Kind]) -> None:
    """Give each new scope a key and a bucket, creating the bucket's tables when new.

    Inside the caller's write transaction. A scope joins the newest bucket while that
    holds fewer than ``BUCKET_FILES`` live files, else it opens the next one.
    """
    new = [s for s in dict.fromkeys(scopes) if block(conn, s) is None]
    if not new:
        return
    newest = conn.scalar(text("SELECT max(bucket) FROM fts_scopes"))
    bucket = 0 if newest is None else int(newest)
    for scope in new:
        if _live_files(conn, bucket) >= BUCKET_FILES:
            bucket += 1
            conn.exec_driver_sql(view_sql(bucket))
            for kind in kinds:
                conn.exec_driver_sql(create_sql(kind, bucket))
        conn.execute(text("INSERT INTO fts_scopes(scope, bucket) VALUES (:s, :b)"), {"s": scope, "b": bucket})


def _live_files(conn: Connection, bucket: int) -> int:
    # Through the listing index (scope, path, deleted, ...): no file's text is read.
    return int(conn.scalar(text(
        "SELECT count(*) FROM files WHERE deleted = 0 AND scope IN "
        "(SELECT scope FROM fts_scopes WHERE bucket = :b)"), {"b": bucket}) or 0)


def _fill(sql: str, t: str, cols: tuple[str, ...]) -> str:
    def of(alias: str) -> str:
        return ", ".join(f"{alias}.{c}" for c in cols)

    return sql.format(t=t, cols=", ".join(cols), rowid_p=f"((s.key << {KEY_SHIFT}) | p.id)",
                      rowid_f=f"((s.key << {KEY_SHIFT}) | f.id)", p_cols=of("p"), f_cols=of("f"))


# The recorded states out of a bucket's table, the rows' current text in (merge), and a
# bulk load's new rows in (index_new).
_DELETE_RECORDED = ("INSERT INTO {t}({t}, rowid, {cols}) SELECT 'delete', {rowid_p}, {p_cols} "
                    "FROM fts_pending AS p JOIN fts_scopes AS s ON s.scope = p.scope "
                    "WHERE s.bucket = :b AND p.content IS NOT NULL")
_INSERT_PENDING = ("INSERT INTO {t}(rowid, {cols}) SELECT {rowid_f}, {f_cols} "
                   "FROM fts_pending AS p JOIN files AS f ON f.id = p.id JOIN fts_scopes AS s ON s.scope = f.scope "
                   "WHERE s.bucket = :b AND f.content IS NOT NULL")
_INSERT_NEW = ("INSERT INTO {t}(rowid, {cols}) SELECT {rowid_f}, {f_cols} "
               "FROM files AS f JOIN fts_scopes AS s ON s.scope = f.scope "
               "WHERE f.id > :first AND f.content IS NOT NULL AND s.bucket = :b{skip}")


def merge(conn: Connection) -> None:
    """Bring every pending row's entries up to date, then empty ``fts_pending``.

    Inside the caller's write transaction: the recorded states out, the rows'
    current text in, bucket by bucket.
    """
    kinds = kinds_present(conn)
    if kinds:
        # The scope a row was recorded in and the one its id is in now: the same, unless
        # the id was reused (a removed row's), which the merge gets right too.
        scopes = ("SELECT scope FROM fts_pending UNION "
                  "SELECT f.scope FROM fts_pending AS p JOIN files AS f ON f.id = p.id")
        assign(conn, conn.scalars(text(scopes)), kinds)
        buckets = list(conn.scalars(text(f"SELECT DISTINCT bucket FROM fts_scopes WHERE scope IN ({scopes})")))
        for bucket in buckets:
            for kind in kinds:
                for sql in (_DELETE_RECORDED, _INSERT_PENDING):
                    conn.execute(text(_fill(sql, table(kind, bucket), _COLUMNS[kind])), {"b": bucket})
    conn.exec_driver_sql("DELETE FROM fts_pending")


def index_new(conn: Connection, first: int, skip_pending: bool) -> None:
    """Index the rows a bulk load just inserted (ids above ``first``), bucket by bucket.

    A new row whose id is pending (an id a removed row had) is left to the merge.
    """
    kinds = kinds_present(conn)
    if not kinds:
        return
    new_scopes = "SELECT DISTINCT scope FROM files WHERE id > :first"
    assign(conn, conn.scalars(text(new_scopes), {"first": first}), kinds)
    buckets = list(conn.scalars(text(
        f"SELECT DISTINCT bucket FROM fts_scopes WHERE scope IN ({new_scopes})"), {"first": first}))
    sql = _INSERT_NEW.replace("{skip}", " AND f.id NOT IN (SELECT id FROM fts_pending)" if skip_pending else "")
    for bucket in buckets:
        for kind in kinds:
            conn.execute(text(_fill(sql, table(kind, bucket), _COLUMNS[kind])), {"first": first, "b": bucket})


def trigram_ids_sql(conn: Connection, scope: str) -> tuple[str, dict[str, int]] | None:
    """``SELECT <file id> FROM <the scope's trigram table> WHERE MATCH :q AND rowid in the
    scope's block`` and its range, or None when nothing of the scope is indexed."""
    found = block(conn, scope)
    if found is None:
        return None
    t = table("trigram", found.bucket)
    return (f"SELECT rowid - {found.lo} AS id FROM {t} WHERE {t} MATCH :q AND rowid BETWEEN :lo AND :hi",
            {"lo": found.lo, "hi": found.hi})


class Hit(NamedTuple):
    file_id: int
    score: float  # bm25: lower is better


def ranked(conn: Connection, scopes: Sequence[str], match: str, n: int, path_weight: float) -> list[Hit]:
    """The best ``n`` entries of each scope by bm25 (the scope's own range of its bucket)."""
    out: list[Hit] = []
    for found in blocks(conn, scopes).values():
        t = table("words", found.bucket)
        rows = conn.execute(text(
            f"SELECT rowid - {found.lo} AS id, bm25({t}, {float(path_weight)}, 1.0) AS score FROM {t} "
            f"WHERE {t} MATCH :q AND rowid BETWEEN :lo AND :hi ORDER BY score LIMIT :n"),
            {"q": match, "lo": found.lo, "hi": found.hi, "n": n})
        out += [Hit(int(r.id), float(r.score)) for r in rows]
    return out
