"""SQLite: full-text entries kept per scope, so one agent's grep and search read only its own.

SQLite only (Postgres' GIN indexes are keyed by scope since 0011; nothing changes there).

Both FTS5 indexes (``files_fts``, trigram, 0003; ``files_search``, words, 0005)
get rowids grouped by scope, in buckets of tables (``vfs/backends/sqlite_fts.py``
states the scheme and its invariants; measured in bench/RESULTS.md, "Scale"):

- ``fts_scopes(key, scope, bucket)``: each indexed scope's number and bucket. A
  file's entries have the rowid ``key << 40 | files.id``.
- Bucket 0 keeps the names ``files_fts`` and ``files_search``; bucket n is
  ``files_fts_n`` and ``files_search_n``, made when the bucket before holds 5,000
  live files. Each bucket's tables are external-content tables over the view
  ``fts_docs_<n>`` (its live files under their rowids) instead of ``files``.
- ``fts_pending`` gains ``scope``: the pending triggers (0008) record the scope too,
  since an entry is removed by its rowid and the text it indexed.

The upgrade indexes every live file again (scopes in name order into buckets);
the downgrade puts back 0008's external-content tables and indexes them again.
Both empty ``fts_pending`` (everything is indexed as it is now).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_SHIFT = 40
_BUCKET_FILES = 5000
_BULK_OFF = "NOT EXISTS (SELECT 1 FROM memagent_bulk)"

# name -> (the bucket's options, 0003/0005's options)
_INDEXES = {
    "files_fts": ("content, content='{view}', content_rowid='fts_rowid', tokenize='trigram', "
                  "detail=none, columnsize=0",
                  "content, content='files', content_rowid='id', tokenize='trigram', detail=none, columnsize=0"),
    "files_search": ("path, content, content='{view}', content_rowid='fts_rowid', "
                     "tokenize='porter unicode61 remove_diacritics 2'",
                     "path, content, content='files', content_rowid='id', "
                     "tokenize='porter unicode61 remove_diacritics 2'"),
}


def _view(bucket: int) -> str:
    rowid = f"(s.key << {_SHIFT}) | f.id AS fts_rowid, f.path, f.content"
    if bucket == 0:  # also the scopes not assigned yet (their rowid NULL: an index lags)
        return (f"CREATE VIEW fts_docs_0 AS SELECT {rowid} FROM files AS f "
                "LEFT JOIN fts_scopes AS s ON s.scope = f.scope "
                "WHERE coalesce(s.bucket, 0) = 0 AND f.content IS NOT NULL")
    return (f"CREATE VIEW fts_docs_{bucket} AS SELECT {rowid} FROM files AS f "
            f"JOIN fts_scopes AS s ON s.scope = f.scope WHERE s.bucket = {bucket} AND f.content IS NOT NULL")


def _pending_triggers(scope: bool) -> dict[str, str]:
    """0008's triggers, recording the scope too when ``scope``."""
    cols = "id, scope, path, content" if scope else "id, path, content"

    def record(r: str, p: str, c: str) -> str:
        values = f"{r}.id, {r}.scope, {p}, {c}" if scope else f"{r}.id, {p}, {c}"
        return f"INSERT OR IGNORE INTO fts_pending({cols}) VALUES ({values});"

    return {
        "files_index_pending_insert": (
            f"CREATE TRIGGER files_index_pending_insert AFTER INSERT ON files "
            f"WHEN new.content IS NOT NULL AND {_BULK_OFF} BEGIN {record('new', 'NULL', 'NULL')} END"),
        "files_index_pending_update": (
            "CREATE TRIGGER files_index_pending_update AFTER UPDATE OF content, path ON files "
            "WHEN old.content IS NOT new.content OR old.path IS NOT new.path "
            f"BEGIN {record('old', 'old.path', 'old.content')} END"),
        "files_index_pending_delete": (
            "CREATE TRIGGER files_index_pending_delete AFTER DELETE ON files "
            f"WHEN old.content IS NOT NULL BEGIN {record('old', 'old.path', 'old.content')} END"),
    }


def _names(bind: sa.Connection, kind: str) -> set[str]:
    return set(bind.scalars(sa.text("SELECT name FROM sqlite_master WHERE type = :k"), {"k": kind}))


def _replace_triggers(bind: sa.Connection, scope: bool) -> None:
    have = _names(bind, "trigger")
    for name, ddl in _pending_triggers(scope).items():
        if name in have:  # 0008 made them only where an index exists
            bind.exec_driver_sql(f"DROP TRIGGER {name}")
            bind.exec_driver_sql(ddl)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    bind.exec_driver_sql(
        "CREATE TABLE fts_scopes (key INTEGER PRIMARY KEY, scope VARCHAR(300) NOT NULL UNIQUE, "
        "bucket INTEGER NOT NULL)")
    bind.exec_driver_sql("ALTER TABLE fts_pending ADD COLUMN scope VARCHAR(300)")
    _replace_triggers(bind, scope=True)
    present = [t for t in _INDEXES if t in _names(bind, "table")]
    if not present:
        return  # this SQLite has no FTS5: grep and search scan, as before
    # Every scope into buckets, in name order: a bucket takes scopes while it holds
    # fewer than _BUCKET_FILES live files.
    counts = bind.execute(sa.text(
        "SELECT scope, sum(deleted = 0) FROM files GROUP BY scope ORDER BY scope")).all()
    bucket_of: dict[str, tuple[int, int]] = {}
    bucket, held = 0, 0
    for key, (scope, live) in enumerate(counts, start=1):
        if held >= _BUCKET_FILES:
            bucket, held = bucket + 1, 0
        bucket_of[scope] = (key, bucket)
        held += int(live or 0)
        bind.execute(sa.text("INSERT INTO fts_scopes(key, scope, bucket) VALUES (:k, :s, :b)"),
                     {"k": key, "s": scope, "b": bucket})
    for b in range(bucket + 1):
        bind.exec_driver_sql(_view(b))
    for table in present:
        options = _INDEXES[table][0]
        bind.exec_driver_sql(f"DROP TABLE {table}")
        for b in range(bucket + 1):
            name = table if b == 0 else f"{table}_{b}"
            bind.exec_driver_sql(
                f"CREATE VIRTUAL TABLE {name} USING fts5({options.format(view=f'fts_docs_{b}')})")
            bind.exec_driver_sql(f"INSERT INTO {name}({name}) VALUES ('rebuild')")  # from the view
    bind.exec_driver_sql("DELETE FROM fts_pending")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    tables = _names(bind, "table")
    buckets = int(bind.scalar(sa.text("SELECT coalesce(max(bucket), 0) FROM fts_scopes")) or 0)
    for table, (_bucketed, external) in _INDEXES.items():
        if table not in tables:
            continue
        for b in range(1, buckets + 1):
            bind.exec_driver_sql(f"DROP TABLE IF EXISTS {table}_{b}")
        bind.exec_driver_sql(f"DROP TABLE {table}")
        bind.exec_driver_sql(f"CREATE VIRTUAL TABLE {table} USING fts5({external})")
        # Not 'rebuild': that would index the deleted rows' paths too (0003/0005 hold
        # the rows whose content is not NULL only).
        cols = "content" if table == "files_fts" else "path, content"
        bind.exec_driver_sql(
            f"INSERT INTO {table}(rowid, {cols}) SELECT id, {cols} FROM files WHERE content IS NOT NULL")
    for name in _names(bind, "view"):
        if name.startswith("fts_docs_"):
            bind.exec_driver_sql(f"DROP VIEW {name}")
    bind.exec_driver_sql("DELETE FROM fts_pending")
    _replace_triggers(bind, scope=False)
    bind.exec_driver_sql("ALTER TABLE fts_pending DROP COLUMN scope")
    bind.exec_driver_sql("DROP TABLE fts_scopes")
