"""SQLite writes that leave the full-text re-indexing to a merge (Postgres: no change).

The triggers of 0003/0005/0006 re-indexed a file's whole text in both FTS5
indexes inside every write: most of a 4 KB write's time (the bare ``UPDATE`` took
0.2 ms without them and about 2 ms with them). From here the triggers only note
which rows' index entries are out of date, in ``fts_pending``, and the store
merges those rows into the indexes later (``vfs/pending.py``: soon after its
writes, before a search, and when it closes), the way a Postgres GIN index takes
entries into a pending list.

- ``fts_pending(id, path, content)``: one row per ``files`` row whose index entries
  may be out of date, holding the path and content the indexes hold for it
  (content NULL: the indexes hold nothing for it). The first change after a merge
  records that state (``INSERT OR IGNORE``); later changes leave it, because the
  indexes still hold the first.
- Invariant: for every ``files`` row not in ``fts_pending``, ``files_fts`` and
  ``files_search`` hold exactly its current content (nothing for a deleted row);
  for a row in it, they hold exactly the recorded state. So merging is: delete the
  recorded states, index the rows' current content, empty ``fts_pending``, in one
  write transaction; and grep, whose index only pre-filters, adds the pending rows
  to its candidates and checks every candidate's real text as before.
- The insert trigger keeps 0006's pause for bulk loads, which index their batch in
  one statement per index.
- The triggers exist only when this SQLite has FTS5 (see 0003, 0005); the table
  always does.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_BULK_OFF = "NOT EXISTS (SELECT 1 FROM memagent_bulk)"
_RECORD = "INSERT OR IGNORE INTO fts_pending(id, path, content) VALUES ({r}.id, {p}, {c});"

_PENDING_TRIGGERS = {
    "files_index_pending_insert": (
        f"CREATE TRIGGER files_index_pending_insert AFTER INSERT ON files "
        f"WHEN new.content IS NOT NULL AND {_BULK_OFF} "
        f"BEGIN {_RECORD.format(r='new', p='NULL', c='NULL')} END"),
    "files_index_pending_update": (
        "CREATE TRIGGER files_index_pending_update AFTER UPDATE OF content, path ON files "
        "WHEN old.content IS NOT new.content OR old.path IS NOT new.path "
        f"BEGIN {_RECORD.format(r='old', p='old.path', c='old.content')} END"),
    "files_index_pending_delete": (
        "CREATE TRIGGER files_index_pending_delete AFTER DELETE ON files "
        "WHEN old.content IS NOT NULL "
        f"BEGIN {_RECORD.format(r='old', p='old.path', c='old.content')} END"),
}

# The triggers this migration replaces, as 0003, 0005 and 0006 left them (for the downgrade).
_OLD_TRIGGERS = {
    "files_fts": {
        "files_fts_insert": (
            f"CREATE TRIGGER files_fts_insert AFTER INSERT ON files "
            f"WHEN new.content IS NOT NULL AND {_BULK_OFF} "
            "BEGIN INSERT INTO files_fts(rowid, content) VALUES (new.id, new.content); END"),
        "files_fts_delete": (
            "CREATE TRIGGER files_fts_delete AFTER DELETE ON files WHEN old.content IS NOT NULL BEGIN "
            "INSERT INTO files_fts(files_fts, rowid, content) VALUES ('delete', old.id, old.content); END"),
        "files_fts_update": (
            "CREATE TRIGGER files_fts_update AFTER UPDATE OF content ON files BEGIN "
            "INSERT INTO files_fts(files_fts, rowid, content) "
            "SELECT 'delete', old.id, old.content WHERE old.content IS NOT NULL; "
            "INSERT INTO files_fts(rowid, content) SELECT new.id, new.content WHERE new.content IS NOT NULL; "
            "END"),
    },
    "files_search": {
        "files_search_insert": (
            f"CREATE TRIGGER files_search_insert AFTER INSERT ON files "
            f"WHEN new.content IS NOT NULL AND {_BULK_OFF} BEGIN "
            "INSERT INTO files_search(rowid, path, content) VALUES (new.id, new.path, new.content); END"),
        "files_search_delete": (
            "CREATE TRIGGER files_search_delete AFTER DELETE ON files WHEN old.content IS NOT NULL BEGIN "
            "INSERT INTO files_search(files_search, rowid, path, content) "
            "VALUES ('delete', old.id, old.path, old.content); END"),
        "files_search_update": (
            "CREATE TRIGGER files_search_update AFTER UPDATE OF content, path ON files BEGIN "
            "INSERT INTO files_search(files_search, rowid, path, content) "
            "SELECT 'delete', old.id, old.path, old.content WHERE old.content IS NOT NULL; "
            "INSERT INTO files_search(rowid, path, content) "
            "SELECT new.id, new.path, new.content WHERE new.content IS NOT NULL; END"),
    },
}

# Merging, as vfs/pending.py does it (here for the downgrade, which must leave the
# indexes complete for triggers that keep them in step row by row again).
_MERGE = {
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


def _names(bind: sa.Connection, kind: str) -> set[str]:
    return set(bind.scalars(sa.text("SELECT name FROM sqlite_master WHERE type = :k"), {"k": kind}))


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    bind.exec_driver_sql(
        "CREATE TABLE fts_pending (id INTEGER PRIMARY KEY, path TEXT, content TEXT)")
    indexes = [t for t in _OLD_TRIGGERS if t in _names(bind, "table")]
    triggers = _names(bind, "trigger")
    for index in indexes:
        for name in _OLD_TRIGGERS[index]:
            if name in triggers:
                bind.exec_driver_sql(f"DROP TRIGGER {name}")
    if indexes:
        for ddl in _PENDING_TRIGGERS.values():
            bind.exec_driver_sql(ddl)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    indexes = [t for t in _OLD_TRIGGERS if t in _names(bind, "table")]
    for index in indexes:
        for statement in _MERGE[index]:
            bind.exec_driver_sql(statement)
    for name in _PENDING_TRIGGERS:
        bind.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")
    bind.exec_driver_sql("DROP TABLE fts_pending")
    for index in indexes:
        for ddl in _OLD_TRIGGERS[index].values():
            bind.exec_driver_sql(ddl)
