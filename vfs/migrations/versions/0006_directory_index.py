"""An index of directories, so ``ls`` reads a directory's entries without the files below it.

- ``dirs``: one row per (scope, directory) that has at least one live file below
  it (at any depth), with ``files``, the number of those files (what ``ls`` shows
  for a directory), and ``depth``, the number of ``/`` in its path, so the
  children of a directory are one range of the ``(scope, depth, path)`` index.
  The root is not a row. Invariant: for every scope and directory ``d``,
  ``dirs.files`` equals the number of live rows of ``files`` whose path starts
  with ``d + '/'``, and no row has ``files = 0``.
- The database keeps it in step, inside the writing transaction, by triggers on
  ``files`` (every writer: the store, conversation files, imports, anything
  later): a file that becomes live adds one to each of its ancestors, one that
  stops being live (deleted, moved away, row removed) takes one off and drops the
  rows that reach zero. A file's ancestors are the prefixes of its path that end
  before a ``/``: on SQLite, whose triggers cannot run a recursive query, they are
  read off ``memagent_positions`` (the numbers 1..1024, the longest path); on
  Postgres off ``generate_series``.
- Bulk loads (``vfs/files/bulk.py``) switch the per-row upkeep off for the rows they
  insert and do it once for the whole batch: on SQLite by a row in
  ``memagent_bulk`` (only ever present inside the loading transaction, which holds
  the database's only write lock, so no other writer can see it), which also
  pauses the full-text insert triggers of 0003 and 0005 (re-created here with that
  condition; the batch is indexed by one ``INSERT ... SELECT`` per index, which
  FTS5 does many times faster than row by row); on Postgres by the
  transaction-local setting ``memagent.bulk``.
- Existing data is indexed by the upgrade itself (backfill), so a database with
  files gets a correct ``dirs`` on its first start with this version; concurrent
  first starts are serialised by ``vfs/db.py``'s migration lock.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from collections import Counter

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

MAX_PATH = 1024  # paths.MAX_PATH_BYTES: no path has more characters than bytes

# -- SQLite ---------------------------------------------------------------------

_BULK_OFF = "NOT EXISTS (SELECT 1 FROM memagent_bulk)"


def _ancestors_sqlite(row: str) -> str:
    return (f"SELECT substr({row}.path, 1, i - 1) AS a FROM memagent_positions "
            f"WHERE i BETWEEN 2 AND length({row}.path) AND substr({row}.path, i, 1) = '/'")


_SQLITE_ADD = f"""
INSERT INTO dirs(scope, path, depth, files)
  SELECT NEW.scope, a, length(a) - length(replace(a, '/', '')), 1
  FROM ({_ancestors_sqlite('NEW')}) WHERE true
  ON CONFLICT(scope, path) DO UPDATE SET files = files + 1;
"""
_SQLITE_SUB = f"""
UPDATE dirs SET files = files - 1
  WHERE scope = OLD.scope AND OLD.deleted = 0 AND path IN ({_ancestors_sqlite('OLD')});
DELETE FROM dirs WHERE scope = OLD.scope AND files <= 0 AND path IN ({_ancestors_sqlite('OLD')});
"""
_SQLITE_DIR_TRIGGERS = (
    f"""CREATE TRIGGER files_dirs_insert AFTER INSERT ON files
        WHEN NEW.deleted = 0 AND {_BULK_OFF} BEGIN {_SQLITE_ADD} END""",
    f"""CREATE TRIGGER files_dirs_delete AFTER DELETE ON files
        WHEN OLD.deleted = 0 AND {_BULK_OFF} BEGIN {_SQLITE_SUB} END""",
    f"""CREATE TRIGGER files_dirs_update AFTER UPDATE OF scope, path, deleted ON files
        WHEN (OLD.deleted != NEW.deleted OR OLD.path != NEW.path OR OLD.scope != NEW.scope)
             AND {_BULK_OFF}
        BEGIN {_SQLITE_SUB}
          INSERT INTO dirs(scope, path, depth, files)
            SELECT NEW.scope, a, length(a) - length(replace(a, '/', '')), 1
            FROM ({_ancestors_sqlite('NEW')}) WHERE NEW.deleted = 0
            ON CONFLICT(scope, path) DO UPDATE SET files = files + 1;
        END""",
)

# The insert triggers of 0003 and 0005, paused while memagent_bulk has a row.
_FTS_INSERT = {
    "files_fts_insert": (
        "files_fts",
        "INSERT INTO files_fts(rowid, content) VALUES (new.id, new.content);",
    ),
    "files_search_insert": (
        "files_search",
        "INSERT INTO files_search(rowid, path, content) VALUES (new.id, new.path, new.content);",
    ),
}


def _fts_insert_trigger(name: str, body: str, *, bulk_aware: bool) -> str:
    cond = "new.content IS NOT NULL" + (f" AND {_BULK_OFF}" if bulk_aware else "")
    return f"CREATE TRIGGER {name} AFTER INSERT ON files WHEN {cond} BEGIN {body} END"


# -- Postgres -------------------------------------------------------------------

_PG_ANCESTORS = ("SELECT substr({r}.path, 1, i - 1) AS a FROM generate_series(2, length({r}.path)) AS i "
                 "WHERE substr({r}.path, i, 1) = '/'")
_PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION memagent_dirs_upkeep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('memagent.bulk', true) = 'on' THEN
    RETURN NULL;
  END IF;
  IF TG_OP IN ('UPDATE', 'DELETE') AND NOT OLD.deleted THEN
    UPDATE dirs SET files = files - 1
      WHERE scope = OLD.scope AND path IN ({_PG_ANCESTORS.format(r='OLD')});
    DELETE FROM dirs
      WHERE scope = OLD.scope AND files <= 0 AND path IN ({_PG_ANCESTORS.format(r='OLD')});
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') AND NOT NEW.deleted THEN
    INSERT INTO dirs(scope, path, depth, files)
      SELECT NEW.scope, a, length(a) - length(replace(a, '/', '')), 1
      FROM ({_PG_ANCESTORS.format(r='NEW')}) AS anc ORDER BY a
      ON CONFLICT (scope, path) DO UPDATE SET files = dirs.files + 1;
  END IF;
  RETURN NULL;
END
$$
"""
_PG_TRIGGERS = (
    "CREATE TRIGGER files_dirs AFTER INSERT OR DELETE ON files "
    "FOR EACH ROW EXECUTE FUNCTION memagent_dirs_upkeep()",
    "CREATE TRIGGER files_dirs_update AFTER UPDATE OF scope, path, deleted ON files FOR EACH ROW "
    "WHEN (OLD.deleted IS DISTINCT FROM NEW.deleted OR OLD.path IS DISTINCT FROM NEW.path "
    "OR OLD.scope IS DISTINCT FROM NEW.scope) EXECUTE FUNCTION memagent_dirs_upkeep()",
)


def _ancestors(path: str) -> list[str]:
    return [path[:i] for i in range(1, len(path)) if path[i] == "/"]


def _backfill(bind: sa.Connection) -> None:
    counts: Counter[tuple[str, str]] = Counter()
    for scope, path in bind.execute(sa.text("SELECT scope, path FROM files WHERE deleted = :f"), {"f": False}):
        counts.update((scope, a) for a in _ancestors(path))
    if counts:
        bind.execute(
            sa.text("INSERT INTO dirs(scope, path, depth, files) VALUES (:scope, :path, :depth, :files)"),
            [{"scope": s, "path": p, "depth": p.count("/"), "files": n} for (s, p), n in counts.items()],
        )


def upgrade() -> None:
    bind = op.get_bind()
    path_type = sa.String(1024).with_variant(sa.String(1024, collation="C"), "postgresql")
    op.create_table(
        "dirs",
        sa.Column("scope", sa.String(300), nullable=False),
        sa.Column("path", path_type, nullable=False),
        sa.Column("depth", sa.Integer, nullable=False),
        sa.Column("files", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("scope", "path", name="pk_dirs"),
    )
    # Covering: a directory's children (names and counts) are one index range.
    op.create_index("ix_dirs_children", "dirs", ["scope", "depth", "path", "files"])
    _backfill(bind)
    if bind.dialect.name == "sqlite":
        op.create_table("memagent_positions", sa.Column("i", sa.Integer, primary_key=True))
        bind.exec_driver_sql(
            f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {MAX_PATH}) "
            "INSERT INTO memagent_positions(i) SELECT i FROM n"
        )
        op.create_table("memagent_bulk", sa.Column("flag", sa.Integer, nullable=False))
        for trigger in _SQLITE_DIR_TRIGGERS:
            bind.exec_driver_sql(trigger)
        _replace_fts_inserts(bind, bulk_aware=True)
    elif bind.dialect.name == "postgresql":
        bind.exec_driver_sql(_PG_FUNCTION)
        for trigger in _PG_TRIGGERS:
            bind.exec_driver_sql(trigger)


def _replace_fts_inserts(bind: sa.Connection, *, bulk_aware: bool) -> None:
    have = set(bind.scalars(sa.text("SELECT name FROM sqlite_master WHERE type = 'trigger'")))
    for name, (_table, body) in _FTS_INSERT.items():
        if name in have:  # absent when this SQLite has no FTS5 (see 0003, 0005)
            bind.exec_driver_sql(f"DROP TRIGGER {name}")
            bind.exec_driver_sql(_fts_insert_trigger(name, body, bulk_aware=bulk_aware))


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        _replace_fts_inserts(bind, bulk_aware=False)
        for name in ("files_dirs_insert", "files_dirs_delete", "files_dirs_update"):
            bind.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")
        op.drop_table("memagent_bulk")
        op.drop_table("memagent_positions")
    elif bind.dialect.name == "postgresql":
        bind.exec_driver_sql("DROP TRIGGER IF EXISTS files_dirs_update ON files")
        bind.exec_driver_sql("DROP TRIGGER IF EXISTS files_dirs ON files")
        bind.exec_driver_sql("DROP FUNCTION IF EXISTS memagent_dirs_upkeep()")
    op.drop_index("ix_dirs_children", table_name="dirs")
    op.drop_table("dirs")
