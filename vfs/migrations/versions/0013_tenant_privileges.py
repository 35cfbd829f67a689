"""Tenants cannot block each other: managed roles keep only the privileges their grants need.

Postgres only (SQLite has no roles; nothing changes there).

Before this revision ``memagent db grant`` gave every role it managed SELECT,
INSERT, UPDATE and DELETE on every memory table, even for read-only grants; and
UPDATE (or DELETE) lets a role ``LOCK TABLE files IN ACCESS EXCLUSIVE MODE``, after
which every other user's read waits, with no end. For each role listed in
``memagent_roles`` that still exists:

- a role with no write grant loses INSERT, UPDATE and DELETE on the memory tables;
  it keeps SELECT, and writing the derived vector tables (``embeddings``,
  ``embedding_pending``, ``embedding_state``), which its searches keep in step;
- every managed role loses TRUNCATE, REFERENCES and TRIGGER on the tables memagent
  hands out (never granted by memagent; a hand-made role granted later may hold
  them, and each allows a lock on the table);
- every managed role's sessions in this database wait at most
  ``LOCK_TIMEOUT`` for a lock (``ALTER ROLE … IN DATABASE … SET lock_timeout``):
  a writing role may still lock a table, and this bounds what that costs the
  others, whichever way they connect (through a transaction-pooling PgBouncer
  too, where a session ``SET`` would not stick). An owner not allowed to alter a
  role (no CREATEROLE) skips it: its direct sessions still set the timeout
  themselves (``vfs/backends/postgres.py``).

``memagent db grant``/``revoke`` keep this true from here on
(``vfs/backends/postgres_roles.py``). The lists below are this revision's, on
purpose not imported: a migration must not change when the code does. Migrators
are serialised by ``vfs/db.py``'s advisory lock; every statement is idempotent.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

from alembic import op
from sqlalchemy.exc import DBAPIError

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# Memory tables only a write grant may change (0010's filtered tables but the vectors).
WRITTEN = ("agents", "files", "dirs", "revisions", "threads", "messages", "thread_events",
           "thread_summaries", "reflection_runs", "proposals")
# Every table memagent hands out (0010's filtered ones, the shared and the read-only ones).
HANDED_OUT = WRITTEN + ("embeddings", "embedding_pending", "embedding_state",
                        "alembic_version", "memagent_grants", "memagent_roles")
LOCK_TIMEOUT = "5s"  # postgres_roles.LOCK_TIMEOUT_SECONDS at this revision


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _managed() -> list[tuple[str, bool, bool]]:
    """(role, has a write grant, may read files) for every managed role that exists."""
    rows = op.get_bind().exec_driver_sql(
        "SELECT m.name, EXISTS (SELECT 1 FROM memagent_grants AS g WHERE g.grantee = m.name AND g.write), "
        "has_table_privilege(m.name, 'files', 'SELECT') "
        "FROM memagent_roles AS m JOIN pg_roles AS r ON r.rolname = m.name ORDER BY m.name").all()
    return [(str(name), bool(writes), bool(reads)) for name, writes, reads in rows]


def _set_role_default(role: str, value: str | None) -> None:
    bind = op.get_bind()
    database = _quote(str(bind.exec_driver_sql("SELECT current_database()").scalar()))
    setting = f"SET lock_timeout = '{value}'" if value else "RESET lock_timeout"
    savepoint = bind.begin_nested()
    try:
        bind.exec_driver_sql(f"ALTER ROLE {role} IN DATABASE {database} {setting}")
    except DBAPIError as exc:
        savepoint.rollback()
        if getattr(exc.orig, "sqlstate", None) != "42501":  # only "may not alter this role" is skipped
            raise
    else:
        savepoint.commit()


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for name, writes, _reads in _managed():
        role = _quote(name)
        if not writes:
            bind.exec_driver_sql(f"REVOKE INSERT, UPDATE, DELETE ON {', '.join(WRITTEN)} FROM {role}")
        bind.exec_driver_sql(f"REVOKE TRUNCATE, REFERENCES, TRIGGER ON {', '.join(HANDED_OUT)} FROM {role}")
        _set_role_default(role, LOCK_TIMEOUT)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for name, writes, reads in _managed():
        role = _quote(name)
        if reads and not writes:  # as 0010's `db grant` left every role it granted to
            bind.exec_driver_sql(f"GRANT INSERT, UPDATE, DELETE ON {', '.join(WRITTEN)} TO {role}")
        _set_role_default(role, None)
