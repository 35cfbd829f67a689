"""Ranked search over memory, provenance of every revision, and the reflection review queue.

- Ranked full-text search (``search_memory``, ``fs search``), kept in step with
  ``files`` inside the writing transaction by the database itself, so every write,
  edit, move, delete, revert, bulk import and conversation append is searchable (or
  gone) the moment it commits:
  - SQLite: ``files_search``, an FTS5 index over ``files.path`` and
    ``files.content`` with a word tokenizer (``porter unicode61``, diacritics
    folded), external content (the text is not stored twice), maintained by
    triggers like the trigram index of 0003; ranked with ``bm25``. Invariant: it
    holds exactly the rows of ``files`` whose content is not NULL. Without FTS5 the
    table is not created and search falls back to a scan (``vfs/search/lexical.py``).
  - Postgres: ``files.search_doc``, a stored generated ``tsvector`` (the path's
    words weighted A, the content's B, English stemming) with a GIN index; ranked
    with ``ts_rank``. The document is built by ``memagent_search_doc``, which
    indexes the first 200,000 characters of a text too large for one ``tsvector``
    instead of refusing the write.
- Provenance: ``revisions.origin`` (``chat``, ``subagent``, ``cli``, ``import``,
  ``reflect``, ``mcp``, ``init``; NULL for revisions made before this migration),
  ``origin_thread`` and ``origin_turn`` (the conversation and the user turn in it),
  ``origin_run`` (the reflection run) and ``origin_detail`` (a short free text:
  the subagent, the import source, the threads a reflection read).
- ``reflection_runs``: one row per ``memagent reflect`` run. A run holds the
  agent's reflection lock while its row is ``running`` (a partial unique index
  allows one such row per agent); ``upto_message`` is the last ``messages.id`` a
  finished run read, so the next run starts after it.
- ``proposals``: memory edits a reflection run proposes, waiting for review:
  the file (scope, path, the path as shown), the version they were made against,
  the content before and after, the reason, the threads they came from, and what
  became of them (``pending``, ``applied``, ``rejected``, ``stale``).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

log = logging.getLogger(__name__)

_SQLITE_FTS = (
    "CREATE VIRTUAL TABLE files_search USING fts5("
    "path, content, content='files', content_rowid='id', "
    "tokenize='porter unicode61 remove_diacritics 2')"
)
_SQLITE_TRIGGERS = (
    """CREATE TRIGGER files_search_insert AFTER INSERT ON files
       WHEN new.content IS NOT NULL BEGIN
         INSERT INTO files_search(rowid, path, content) VALUES (new.id, new.path, new.content);
       END""",
    """CREATE TRIGGER files_search_delete AFTER DELETE ON files
       WHEN old.content IS NOT NULL BEGIN
         INSERT INTO files_search(files_search, rowid, path, content)
           VALUES ('delete', old.id, old.path, old.content);
       END""",
    """CREATE TRIGGER files_search_update AFTER UPDATE OF content, path ON files BEGIN
         INSERT INTO files_search(files_search, rowid, path, content)
           SELECT 'delete', old.id, old.path, old.content WHERE old.content IS NOT NULL;
         INSERT INTO files_search(rowid, path, content)
           SELECT new.id, new.path, new.content WHERE new.content IS NOT NULL;
       END""",
)

# A tsvector is at most 1 MB: a text past that (a long conversation) is indexed by
# its head rather than making the write fail. Path words weigh more than content.
_PG_FUNCTION = r"""
CREATE OR REPLACE FUNCTION memagent_search_doc(p text, c text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  head tsvector := setweight(to_tsvector('english'::regconfig, translate(p, '/._-', '    ')), 'A');
BEGIN
  IF c IS NULL THEN
    RETURN NULL;
  END IF;
  BEGIN
    RETURN head || setweight(to_tsvector('english'::regconfig, c), 'B');
  EXCEPTION WHEN program_limit_exceeded THEN
    RETURN head || setweight(to_tsvector('english'::regconfig, left(c, 200000)), 'B');
  END;
END
$$
"""


def _sqlite_has_fts5(bind: sa.Connection) -> bool:
    try:
        bind.exec_driver_sql("CREATE VIRTUAL TABLE temp.memagent_probe5 USING fts5(x, tokenize='porter unicode61')")
    except sa.exc.OperationalError:
        return False
    bind.exec_driver_sql("DROP TABLE temp.memagent_probe5")
    return True


def upgrade() -> None:
    bind = op.get_bind()
    with op.batch_alter_table("revisions") as batch:
        batch.add_column(sa.Column("origin", sa.String(16), nullable=True))
        batch.add_column(sa.Column("origin_thread", sa.String(36), nullable=True))
        batch.add_column(sa.Column("origin_turn", sa.Integer, nullable=True))
        batch.add_column(sa.Column("origin_run", sa.Integer, nullable=True))
        batch.add_column(sa.Column("origin_detail", sa.Text, nullable=True))
    op.create_table(
        "reflection_runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("agent", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("holder", sa.String(300), nullable=False, server_default=""),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("upto_message", sa.Integer, nullable=True),
        sa.Column("threads", sa.JSON, nullable=True),
        sa.Column("proposals", sa.Integer, nullable=False, server_default="0"),
        sa.Column("model", sa.String(100), nullable=False, server_default=""),
        sa.Column("note", sa.Text, nullable=False, server_default=""),
    )
    op.create_index("ix_reflection_runs_agent", "reflection_runs", ["agent", "id"])
    op.create_index("uq_reflection_running", "reflection_runs", ["agent"], unique=True,
                    sqlite_where=sa.text("status = 'running'"),
                    postgresql_where=sa.text("status = 'running'"))
    path_type = sa.String(1024).with_variant(sa.String(1024, collation="C"), "postgresql")
    op.create_table(
        "proposals",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("agent", sa.String(64), nullable=False),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("reflection_runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("scope", sa.String(300), nullable=False),
        sa.Column("path", path_type, nullable=False),
        sa.Column("shown", sa.String(1100), nullable=False),
        sa.Column("op", sa.String(16), nullable=False),
        sa.Column("base_version", sa.Integer, nullable=False),
        sa.Column("before", sa.Text, nullable=True),
        sa.Column("after", sa.Text, nullable=True),
        sa.Column("reason", sa.Text, nullable=False, server_default=""),
        sa.Column("threads", sa.JSON, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("feedback", sa.Text, nullable=False, server_default=""),
        sa.Column("applied_version", sa.Integer, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_proposals_agent_status", "proposals", ["agent", "status", "id"])

    if bind.dialect.name == "sqlite":
        if not _sqlite_has_fts5(bind):
            log.warning("this SQLite has no FTS5; search_memory will scan instead of using an index")
            return
        bind.exec_driver_sql(_SQLITE_FTS)
        for trigger in _SQLITE_TRIGGERS:
            bind.exec_driver_sql(trigger)
        bind.exec_driver_sql(
            "INSERT INTO files_search(rowid, path, content) "
            "SELECT id, path, content FROM files WHERE content IS NOT NULL"
        )
    elif bind.dialect.name == "postgresql":
        bind.exec_driver_sql(_PG_FUNCTION)
        bind.exec_driver_sql(
            "ALTER TABLE files ADD COLUMN search_doc tsvector "
            "GENERATED ALWAYS AS (memagent_search_doc(path, content)) STORED"
        )
        # fastupdate off: a pending list would make every search scan it (and mislead the planner).
        bind.exec_driver_sql("CREATE INDEX ix_files_search_doc ON files USING gin (search_doc) WITH (fastupdate = off)")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for name in ("files_search_insert", "files_search_delete", "files_search_update"):
            bind.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")
        bind.exec_driver_sql("DROP TABLE IF EXISTS files_search")
    elif bind.dialect.name == "postgresql":
        bind.exec_driver_sql("DROP INDEX IF EXISTS ix_files_search_doc")
        bind.exec_driver_sql("ALTER TABLE files DROP COLUMN IF EXISTS search_doc")
        bind.exec_driver_sql("DROP FUNCTION IF EXISTS memagent_search_doc(text, text)")
    op.drop_index("ix_proposals_agent_status", table_name="proposals")
    op.drop_table("proposals")
    op.drop_index("uq_reflection_running", table_name="reflection_runs")
    op.drop_index("ix_reflection_runs_agent", table_name="reflection_runs")
    op.drop_table("reflection_runs")
    with op.batch_alter_table("revisions") as batch:
        for name in ("origin_detail", "origin_run", "origin_turn", "origin_thread", "origin"):
            batch.drop_column(name)
