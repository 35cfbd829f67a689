"""Indexes that let ls, glob and grep be answered inside the database.

- Both databases: ``ix_files_listing`` on (scope, path, deleted, size, version), so
  listing a directory (path, size of live files) and summing versions read the
  index alone, never the table rows with their content (on SQLite those columns sit
  after ``content`` and reading them walks the content's overflow pages).
- SQLite: ``files_fts``, an FTS5 index with the trigram tokenizer over
  ``files.content`` (external content: the text is not stored twice), kept in step
  by triggers on ``files``. ``detail=none`` keeps it small: queries AND single
  trigrams and the exact match is always checked afterwards anyway. Needs SQLite
  >= 3.34 with FTS5; without it the table is not created and grep scans.
- Postgres: the ``pg_trgm`` extension and a GIN trigram index on ``files.content``,
  used by ``LIKE``/``ILIKE`` pre-filters. If the extension cannot be created (not
  installed, no privilege) the index is skipped and grep scans; the extension is
  left in place on downgrade, since other objects may use it.

Invariant kept by the triggers: ``files_fts`` holds exactly the rows of ``files``
whose content is not NULL (live files), with their current content.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

log = logging.getLogger(__name__)

_LISTING_COLUMNS = ["scope", "path", "deleted", "size", "version"]

_SQLITE_FTS = (
    "CREATE VIRTUAL TABLE files_fts USING fts5("
    "content, content='files', content_rowid='id', tokenize='trigram', "
    "detail=none, columnsize=0)"
)
_SQLITE_TRIGGERS = (
    """CREATE TRIGGER files_fts_insert AFTER INSERT ON files
       WHEN new.content IS NOT NULL BEGIN
         INSERT INTO files_fts(rowid, content) VALUES (new.id, new.content);
       END""",
    """CREATE TRIGGER files_fts_delete AFTER DELETE ON files
       WHEN old.content IS NOT NULL BEGIN
         INSERT INTO files_fts(files_fts, rowid, content) VALUES ('delete', old.id, old.content);
       END""",
    """CREATE TRIGGER files_fts_update AFTER UPDATE OF content ON files BEGIN
         INSERT INTO files_fts(files_fts, rowid, content)
           SELECT 'delete', old.id, old.content WHERE old.content IS NOT NULL;
         INSERT INTO files_fts(rowid, content)
           SELECT new.id, new.content WHERE new.content IS NOT NULL;
       END""",
)


def _sqlite_has_trigram(bind: sa.Connection) -> bool:
    try:
        bind.exec_driver_sql(
            "CREATE VIRTUAL TABLE temp.memagent_probe USING fts5(x, tokenize='trigram')"
        )
    except sa.exc.OperationalError:
        return False
    bind.exec_driver_sql("DROP TABLE temp.memagent_probe")
    return True


def _pg_trgm(bind: sa.Connection) -> bool:
    available = bind.exec_driver_sql(
        "SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'"
    ).first()
    if available is None:
        log.warning("pg_trgm is not installed; grep will scan without a trigram index")
        return False
    try:
        with bind.begin_nested():  # a failure must not abort the migration's transaction
            bind.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except sa.exc.DBAPIError as exc:
        log.warning("cannot create extension pg_trgm (%s); grep will scan", exc.orig)
        return False
    return True


def upgrade() -> None:
    bind = op.get_bind()
    op.create_index("ix_files_listing", "files", _LISTING_COLUMNS)
    if bind.dialect.name == "sqlite":
        if not _sqlite_has_trigram(bind):
            log.warning("this SQLite has no FTS5 trigram tokenizer; grep will scan")
            return
        bind.exec_driver_sql(_SQLITE_FTS)
        for trigger in _SQLITE_TRIGGERS:
            bind.exec_driver_sql(trigger)
        # Index what is already there (a database with data migrates too).
        bind.exec_driver_sql(
            "INSERT INTO files_fts(rowid, content) "
            "SELECT id, content FROM files WHERE content IS NOT NULL"
        )
    elif bind.dialect.name == "postgresql" and _pg_trgm(bind):
        bind.exec_driver_sql(
            "CREATE INDEX ix_files_content_trgm ON files USING gin (content gin_trgm_ops)"
        )


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for name in ("files_fts_insert", "files_fts_delete", "files_fts_update"):
            bind.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")
        bind.exec_driver_sql("DROP TABLE IF EXISTS files_fts")
    elif bind.dialect.name == "postgresql":
        bind.exec_driver_sql("DROP INDEX IF EXISTS ix_files_content_trgm")
    op.drop_index("ix_files_listing", table_name="files")
