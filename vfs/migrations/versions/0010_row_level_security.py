"""Row-level security for a team on one Postgres: each user's role sees only what it was granted.

Postgres only (SQLite has no roles; nothing changes there).

- ``memagent_grants(grantee, scope, write)``: one row per (database role, scope)
  granted; ``write`` false is read-only. ``memagent db grant`` writes it
  (``vfs/backends/postgres_roles.py``): an agent grant is three rows (``agent:A``,
  ``conversations:A``, ``settings:A``), a user or org grant one. The table has row
  level security too: a role reads only its own rows (and may change none), so no
  role learns who else was granted what.
- ``memagent_roles(name)``: the roles memagent manages, those ``memagent db role
  create`` made or ``memagent db grant`` granted to. Each reads only its own row.
- Row-level security is ENABLED (not forced) on every table that holds memory,
  revisions, threads, proposals or vectors: the table owner (who runs the
  migrations and ``memagent db role``/``grant``) bypasses it, so a single-user
  database, whose only role is the owner, pays nothing. A managed role sees a row
  only when the row's scope is granted to it, and inserts, updates or deletes one
  only when granted for write. A role memagent does not manage is not filtered: it
  reads only what the owner GRANTed it by hand, as in any Postgres database (the
  policies test that once per statement). A row's scope is its ``scope`` column (``files``,
  ``dirs``, ``embeddings``), its file's (``revisions``, ``embedding_pending``),
  ``agent:<name>`` for rows naming an agent (``agents``, ``threads``,
  ``reflection_runs``, ``proposals``), or its thread's agent (``messages``,
  ``thread_events``, ``thread_summaries``).
- Derived vector data (``embeddings``, ``embedding_pending``) may be written by a
  role that may read the file: a reader's search keeps the vectors of what it reads
  in step, and vectors are re-derived from the files anyway (a vector only ranks;
  every hit is checked against ``files``). ``embedding_state`` (model names and
  generation counters, no memory) is shared by every role.
- The triggers on ``files`` run as the writing role, so the rows they write
  (``dirs``, ``embedding_pending``) fall under the same write grant as the file.
- The policies compare with the grants through ``IN (SELECT ...)`` on
  ``memagent_grants``'s primary key, once per statement (a hashed sub-plan), and
  the file- and thread-keyed tables through one primary-key probe per row; every
  comparison is leakproof, so the ``(scope, path)`` indexes still narrow first.

Table privileges are not granted here: roles do not exist yet. ``memagent db grant``
grants them (and again after any later migration adds a table).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from collections.abc import Callable

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def _scopes(write: bool) -> str:
    """The scopes granted to the current role (for write, or at all), as a sub-query."""
    cond = " AND g.write" if write else ""
    return f"SELECT g.scope FROM memagent_grants AS g WHERE g.grantee = current_user::text{cond}"


Check = Callable[[bool], str]  # write? -> the SQL condition on a row

# A role that memagent does not manage (an uncorrelated sub-query: evaluated once).
_UNMANAGED = "NOT EXISTS (SELECT 1 FROM memagent_roles AS m WHERE m.name = current_user::text)"


def _by_scope(column: str) -> Check:
    return lambda write: f"{column} IN ({_scopes(write)})"


def _by_file(table: str) -> Check:
    return lambda write: (f"EXISTS (SELECT 1 FROM files AS f WHERE f.id = {table}.file_id "
                          f"AND f.scope IN ({_scopes(write)}))")


def _by_thread(table: str) -> Check:
    return lambda write: (f"EXISTS (SELECT 1 FROM threads AS t WHERE t.id = {table}.thread_id "
                          f"AND ('agent:' || t.agent) IN ({_scopes(write)}))")


# Every Postgres table holding memory, revisions, threads, proposals or vectors, and
# how a row's scope is found. ``readers_write``: derived data a reader may keep in step.
_TABLES: dict[str, tuple[Check, bool]] = {
    "files": (_by_scope("scope"), False),
    "dirs": (_by_scope("scope"), False),
    "revisions": (_by_file("revisions"), False),
    "embeddings": (_by_scope("scope"), True),
    "embedding_pending": (_by_file("embedding_pending"), True),
    "agents": (_by_scope("('agent:' || name)"), False),
    "threads": (_by_scope("('agent:' || agent)"), False),
    "reflection_runs": (_by_scope("('agent:' || agent)"), False),
    "proposals": (_by_scope("('agent:' || agent)"), False),
    "messages": (_by_thread("messages"), False),
    "thread_events": (_by_thread("thread_events"), False),
    "thread_summaries": (_by_thread("thread_summaries"), False),
}


def _policies(table: str, check: Check, readers_write: bool) -> list[str]:
    read = f"{_UNMANAGED} OR {check(False)}"
    write = read if readers_write else f"{_UNMANAGED} OR {check(True)}"
    return [
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
        f"CREATE POLICY memagent_read ON {table} FOR SELECT USING ({read})",
        f"CREATE POLICY memagent_insert ON {table} FOR INSERT WITH CHECK ({write})",
        f"CREATE POLICY memagent_update ON {table} FOR UPDATE USING ({write}) WITH CHECK ({write})",
        f"CREATE POLICY memagent_delete ON {table} FOR DELETE USING ({write})",
    ]


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    bind.exec_driver_sql(
        "CREATE TABLE memagent_grants ("
        "grantee text NOT NULL, scope varchar(300) NOT NULL, write boolean NOT NULL, "
        "CONSTRAINT pk_memagent_grants PRIMARY KEY (grantee, scope))")
    bind.exec_driver_sql("ALTER TABLE memagent_grants ENABLE ROW LEVEL SECURITY")
    bind.exec_driver_sql("CREATE POLICY memagent_own ON memagent_grants FOR SELECT "
                         "USING (grantee = current_user::text)")
    bind.exec_driver_sql("CREATE TABLE memagent_roles (name text NOT NULL, "
                         "CONSTRAINT pk_memagent_roles PRIMARY KEY (name))")
    bind.exec_driver_sql("ALTER TABLE memagent_roles ENABLE ROW LEVEL SECURITY")
    bind.exec_driver_sql("CREATE POLICY memagent_self ON memagent_roles FOR SELECT "
                         "USING (name = current_user::text)")
    for table, (check, readers_write) in _TABLES.items():
        for ddl in _policies(table, check, readers_write):
            bind.exec_driver_sql(ddl)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for table in _TABLES:
        for name in ("memagent_read", "memagent_insert", "memagent_update", "memagent_delete"):
            bind.exec_driver_sql(f"DROP POLICY IF EXISTS {name} ON {table}")
        bind.exec_driver_sql(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    bind.exec_driver_sql("DROP TABLE IF EXISTS memagent_grants")
    bind.exec_driver_sql("DROP TABLE IF EXISTS memagent_roles")
