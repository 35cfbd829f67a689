"""Indexes that let a per-agent call read only its agent's rows when many agents share a database.

Measured with ``python -m bench --agents 1000`` (bench/RESULTS.md, "Scale"): every
per-agent call reaches ``files``, ``dirs`` and ``revisions`` through indexes led by
the scope or by a file's id, except the ones below.

- ``embeddings``: ``ix_embeddings_scope (scope, model, gen)``. A search by meaning
  reads the vectors of the scopes it searches only (``vfs/embeddings/index.py``),
  one index range per scope, instead of every agent's vectors (at 1,000 agents x
  100 files: 300,000 rows, 360 MB, read in the search's transaction).
- Postgres: the trigram index ``ix_files_content_trgm`` (0003) and the full-text
  index ``ix_files_search_doc`` (0005) gain the scope as their first key, with the
  ``btree_gin`` extension, under the same names (``backends/postgres.py`` finds them
  by name) and the same storage options (``fastupdate``, 0007). A GIN index with the
  scope as a key answers ``scope = :s AND content LIKE '%word%'`` by walking the
  scope's short posting list and skipping through the word's, so a grep of one
  agent no longer reads every agent's matching rows (1,000 agents: a common word's
  grep took 314 ms through the trigram index alone, 0.7 ms through this one).
  The scope is keyed through an expression that no other index of ``files`` has:
  ``(scope || '')`` for the trigram index, ``('' || scope)`` for the full-text one.
  Keyed by the bare column, the planner could answer the scope test of a grep from
  a b-tree (or from the other GIN index) and re-check every one of the scope's
  TOASTed texts instead (1.8 ms at 100 files, seconds at 10,000), since it does not
  cost reading TOAST. grep and search name their own index's expression
  (``vfs/files/grepping.py``, ``backends/postgres.py``); a query that does not still uses
  the index for its text keys as before. Without ``btree_gin`` (not installed, no
  privilege) the indexes stay as they were and a warning says so.
- SQLite's FTS5 indexes cannot take a scope key; see ``docs/scale-out.md``.

Building the two GIN indexes again reads every file once (minutes at 1,000,000
files); the upgrade runs in the migrating transaction like every other.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

log = logging.getLogger("memagent.vfs")

# name -> (the column part with the scope key, the column part before, storage options)
_GIN = {
    "ix_files_content_trgm": ("((scope)::text || ''), content gin_trgm_ops", "content gin_trgm_ops"),
    "ix_files_search_doc": ("('' || (scope)::text), search_doc", "search_doc"),
}


def _btree_gin(bind: sa.Connection) -> bool:
    if bind.exec_driver_sql("SELECT 1 FROM pg_available_extensions WHERE name = 'btree_gin'").first() is None:
        log.warning("btree_gin is not installed; grep and search keep indexes that are not led by scope")
        return False
    try:
        with bind.begin_nested():  # a refusal must not abort the migration's transaction
            bind.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS btree_gin")
    except sa.exc.DBAPIError as exc:
        log.warning("cannot create extension btree_gin (%s); grep and search keep their indexes", exc.orig)
        return False
    return True


def _existing(bind: sa.Connection) -> dict[str, str]:
    rows = bind.exec_driver_sql(
        "SELECT i.relname, coalesce(array_to_string(i.reloptions, ', '), '') FROM pg_class i "
        "JOIN pg_index x ON x.indexrelid = i.oid JOIN pg_class t ON t.oid = x.indrelid "
        "JOIN pg_namespace n ON n.oid = t.relnamespace "
        "WHERE n.nspname = current_schema() AND t.relname = 'files' AND i.relname IN "
        "('ix_files_content_trgm', 'ix_files_search_doc')").all()
    return {r[0]: r[1] for r in rows}


def _rebuild(bind: sa.Connection, scoped: bool) -> None:
    for name, options in _existing(bind).items():
        columns = _GIN[name][0 if scoped else 1]
        with_ = f" WITH ({options})" if options else ""
        bind.exec_driver_sql(f"DROP INDEX {name}")
        bind.exec_driver_sql(f"CREATE INDEX {name} ON files USING gin ({columns}){with_}")


def upgrade() -> None:
    bind = op.get_bind()
    op.create_index("ix_embeddings_scope", "embeddings", ["scope", "model", "gen"])
    if bind.dialect.name == "postgresql" and _existing(bind) and _btree_gin(bind):
        _rebuild(bind, scoped=True)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        _rebuild(bind, scoped=False)
    op.drop_index("ix_embeddings_scope", table_name="embeddings")
