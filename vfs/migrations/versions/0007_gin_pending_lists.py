"""Postgres writes that do not pay for the full-text index entry by entry.

- ``ix_files_search_doc`` (0005) gets ``fastupdate = on``, like the trigram index
  of 0003 already had: a write appends its index entries to the index's pending
  list instead of inserting each word into the index tree. At 10,000 files a
  4 KB write spent about 13 ms in that tree (each of a document's few hundred
  words is one descent and one page change); appending costs well under 1 ms, and
  moving 50 writes' entries into the tree at once costs about 0.4 ms per write.
- A pending list is scanned by every search until it is moved into the tree, and
  a long one makes searches slow (a few hundred ms with 150 writes pending), so
  the store moves it soon after its writes and before its own searches
  (``vfs/pending.py``); autovacuum and a full list (``gin_pending_list_limit``)
  still do it too, for writers that are not memagent.
- ``files.content`` and ``revisions.content`` are compressed with lz4 when the
  server has it (built ``--with-lz4``, as the common packages are): compressing a
  4 KB text costs a fraction of pglz's. Only values written from now on change;
  old ones stay readable as they are.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_COMPRESSED = (("files", "content"), ("revisions", "content"))


def _has_index(bind: sa.Connection, name: str) -> bool:
    return bind.exec_driver_sql(
        "SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND indexname = %(n)s",
        {"n": name},
    ).first() is not None


def _has_lz4(bind: sa.Connection) -> bool:
    vals = bind.exec_driver_sql(
        "SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'").scalar()
    return "lz4" in (vals or [])


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    if _has_index(bind, "ix_files_search_doc"):
        bind.exec_driver_sql("ALTER INDEX ix_files_search_doc SET (fastupdate = on)")
    if _has_lz4(bind):
        for table, column in _COMPRESSED:
            bind.exec_driver_sql(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION lz4")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    if _has_index(bind, "ix_files_search_doc"):
        # Turning the list off does not empty it: move what it holds into the tree.
        bind.exec_driver_sql("SELECT gin_clean_pending_list('ix_files_search_doc'::regclass)")
        bind.exec_driver_sql("ALTER INDEX ix_files_search_doc SET (fastupdate = off)")
    for table, column in _COMPRESSED:
        bind.exec_driver_sql(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION default")
