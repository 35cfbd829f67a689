"""Vectors for recall by meaning, kept off the write path (``vfs/embeddings/``).

- ``embeddings``: one row per chunk of a live file as one embedder saw it: the
  file's id, scope and version embedded, the chunk's number, the embedder's model
  id and dimension, the generation that stored it and the vector (float32 bytes,
  L2-normalised). Scored in process (see ARCHITECTURE.md, "Recall by meaning").
- ``embedding_pending(file_id, seq)``: the files whose vectors may be out of date.
  Triggers on ``files`` note every change of content, path or version (every
  writer, bulk loads too; a new version of the same text too, since vectors name
  the version), each note with a fresh ``seq`` (Postgres: a sequence; SQLite:
  ``random()``, its writers being serialised); a write does nothing more.
  ``vfs/embeddings/index.py`` embeds the noted files later (in the background merge
  and before a search) and removes a note only if its ``seq`` is still the one it
  read. A change made meanwhile has replaced the seq (Postgres: the upsert locks the
  note, so the removal waits for that write and then sees the new seq), so no
  change is ever missed, on any isolation level.
- ``embedding_state``: one row per model with vectors, and its generation: bumped by
  every transaction that changes that model's vectors, so a process knows whether
  its in-memory copy is current with one indexed read. A model without a row has
  no complete set of vectors: the first sync under it notes every live file.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_SQLITE_TRIGGERS = (
    "CREATE TRIGGER files_embedding_pending_insert AFTER INSERT ON files WHEN new.content IS NOT NULL "
    "BEGIN INSERT OR REPLACE INTO embedding_pending(file_id, seq) VALUES (new.id, random()); END",
    "CREATE TRIGGER files_embedding_pending_update AFTER UPDATE OF content, path, version ON files "
    "WHEN old.version IS NOT new.version OR old.content IS NOT new.content OR old.path IS NOT new.path "
    "BEGIN INSERT OR REPLACE INTO embedding_pending(file_id, seq) VALUES (new.id, random()); END",
)
_PG_FUNCTION = (
    "CREATE OR REPLACE FUNCTION memagent_embedding_pending() RETURNS trigger LANGUAGE plpgsql AS $$ "
    "BEGIN INSERT INTO embedding_pending(file_id, seq) VALUES (NEW.id, nextval('embedding_note_seq')) "
    "ON CONFLICT (file_id) DO UPDATE SET seq = EXCLUDED.seq; RETURN NULL; END $$"
)
# The update trigger has no WHEN on the text: comparing two out-of-line texts costs
# more than noting a row whose text did not change (its sync finds nothing to do).
_PG_TRIGGERS = (
    "CREATE TRIGGER files_embedding_pending_insert AFTER INSERT ON files FOR EACH ROW "
    "WHEN (NEW.content IS NOT NULL) EXECUTE FUNCTION memagent_embedding_pending()",
    "CREATE TRIGGER files_embedding_pending_update AFTER UPDATE OF content, path, version ON files FOR EACH ROW "
    "EXECUTE FUNCTION memagent_embedding_pending()",
)


def upgrade() -> None:
    bind = op.get_bind()
    op.create_table(
        "embeddings",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("file_id", sa.Integer, sa.ForeignKey("files.id", ondelete="CASCADE"), nullable=False),
        sa.Column("scope", sa.String(300), nullable=False),
        sa.Column("chunk", sa.Integer, nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("dim", sa.Integer, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("gen", sa.Integer, nullable=False),
        sa.Column("vector", sa.LargeBinary, nullable=False),
    )
    op.create_index("ix_embeddings_model_gen", "embeddings", ["model", "gen"])
    op.create_index("ix_embeddings_file", "embeddings", ["file_id"])
    op.create_table("embedding_pending", sa.Column("file_id", sa.Integer, primary_key=True, autoincrement=False),
                    sa.Column("seq", sa.BigInteger, nullable=False))
    op.create_table(
        "embedding_state",
        sa.Column("model", sa.String(200), primary_key=True),
        sa.Column("gen", sa.Integer, nullable=False),
    )
    if bind.dialect.name == "sqlite":
        for ddl in _SQLITE_TRIGGERS:
            bind.exec_driver_sql(ddl)
    elif bind.dialect.name == "postgresql":
        bind.exec_driver_sql("CREATE SEQUENCE embedding_note_seq")
        bind.exec_driver_sql(_PG_FUNCTION)
        for ddl in _PG_TRIGGERS:
            bind.exec_driver_sql(ddl)


def downgrade() -> None:
    bind = op.get_bind()
    for name in ("files_embedding_pending_insert", "files_embedding_pending_update"):
        if bind.dialect.name == "sqlite":
            bind.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")
        elif bind.dialect.name == "postgresql":
            bind.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name} ON files")
    if bind.dialect.name == "postgresql":
        bind.exec_driver_sql("DROP FUNCTION IF EXISTS memagent_embedding_pending()")
        bind.exec_driver_sql("DROP SEQUENCE IF EXISTS embedding_note_seq")
    op.drop_table("embedding_state")
    op.drop_table("embedding_pending")
    op.drop_index("ix_embeddings_file", table_name="embeddings")
    op.drop_index("ix_embeddings_model_gen", table_name="embeddings")
    op.drop_table("embeddings")
