"""Database roles per user and their grants, for row-level security (migration 0010).

What ``memagent db role`` / ``grant`` / ``revoke`` / ``grants`` do, run by the
database owner (who runs the migrations and bypasses row-level security):

- ``create_role``: a ``LOGIN`` role with a password. The password never reaches the
  server in clear: it is sent as a SCRAM-SHA-256 verifier computed here (as psql's
  ``\\password`` does), so statement logs never hold it. Creating a role that exists
  sets its password again (idempotent).
- ``grant``: the table privileges a memagent process needs (SELECT, INSERT,
  UPDATE, DELETE on the tables of ``APP_TABLES``, whose rows the policies filter;
  SELECT on ``alembic_version`` and ``memagent_grants``; USAGE on the schema and its
  sequences), then the rows of ``memagent_grants`` that the policies read: an agent
  grant covers ``agent:A``, ``conversations:A`` and ``settings:A`` (its threads,
  proposals and reflection runs follow the agent), a user grant ``user:U``
  (always read and write), an org grant ``org:O`` (read, write with ``write``).
  Granting again changes nothing (or only the write flag).
- ``revoke``: removes those rows; the role's table privileges stay, and with no
  grant it sees no row of any table.
- ``memagent_roles`` lists the roles these functions made or granted to: the only
  roles the policies filter. A role the owner GRANTs table privileges by hand,
  without ``grant``, reads what those privileges allow, as in any Postgres database.

Invariants:
- Every identifier sent is validated (``ROLE_NAME``) and quoted (``quote_ident``);
  values travel as bind parameters. A bad name is one ``VfsError`` line.
- Every table a role may write either has row-level security enabled
  (``check_protected``: refused by name otherwise) or is ``SHARED`` (holds no
  memory), so a later migration's table is never handed out unfiltered.
- This module is the only place that asks whether a database is Postgres for roles
  (``is_postgres``); callers on SQLite get ``NeedsPostgres``, one line.
- ``explain_refusals`` turns the server's row-level-security and missing-privilege
  refusals (SQLSTATE 42501 with those messages) into ``PermissionDenied``, a
  ``VfsError``: a tool gets an error result, a command one line. Other 42501 errors
  (an index merge only the owner may run) pass unchanged for their callers.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import unicodedata
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Connection, Engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from memagent.vfs.errors import VfsError
from memagent.vfs.paths import scope_name

GrantKind = Literal["agent", "user", "org"]

# Tables whose rows the 0010 policies filter: a role gets SELECT/INSERT/UPDATE/DELETE.
APP_TABLES = (
    "agents", "files", "dirs", "revisions", "threads", "messages", "thread_events",
    "thread_summaries", "reflection_runs", "proposals", "embeddings", "embedding_pending",
)
# Tables without memory that every role shares (model names and generation counters).
SHARED = ("embedding_state",)
# Tables a role only reads: the schema revision (the start-up check), its own grants.
READ_ONLY = ("alembic_version", "memagent_grants", "memagent_roles")

# Lower-case letters, digits and underscores, starting with a letter: never needs
# quoting in psql either; ``pg_`` is reserved by Postgres.
ROLE_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")
SCRAM_ITERATIONS = 4096
# The store's agent-name rule (vfs/storecore.check_agent_name; not imported: that
# module imports the backends) and the characters config.user_id keeps.
_AGENT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_SCOPE_ID = re.compile(r"[A-Za-z0-9_.@-]+")
_RLS_REFUSAL = ("row-level security", "permission denied for table", "permission denied for sequence")


class NeedsPostgres(VfsError):
    """Roles and row-level security asked of a database that is not Postgres."""


class PermissionDenied(VfsError):
    """The database refused a row or table to the role this process logs in as."""


@dataclass(frozen=True)
class Grant:
    """One row of ``memagent_grants``: ``grantee`` may read ``scope`` (and write it if ``write``)."""

    grantee: str
    scope: str
    write: bool


def is_postgres(engine: Engine | Connection) -> bool:
    return engine.dialect.name == "postgresql"


def _needs_postgres(name: str) -> NeedsPostgres:
    return NeedsPostgres(
        f"roles and row-level security need Postgres; this database is {name} "
        "(point --db / MEMAGENT_DB at a postgresql+psycopg:// URL)")


# Per engine (its login is fixed): whether row-level security filters its reads of files.
_FILTERED: weakref.WeakKeyDictionary[Engine, bool] = weakref.WeakKeyDictionary()


def filtered(conn: Connection) -> bool:
    """Whether ``conn``'s role reads ``files`` through the 0010 policies (not the owner).

    Asked once per engine: a user's role is filtered, the owner and superusers are not.
    """
    known = _FILTERED.get(conn.engine)
    if known is None:
        known = bool(conn.scalar(text("SELECT row_security_active(to_regclass('files'))")))
        _FILTERED[conn.engine] = known
    return known


def require_postgres(engine: Engine) -> None:
    if not is_postgres(engine):
        raise _needs_postgres(engine.dialect.name)


def require_postgres_url(url: str) -> None:
    """Refuse a URL that is not Postgres before anything is opened (or created)."""
    try:
        backend = make_url(url).get_backend_name()
    except ArgumentError:
        return  # opening it reports a malformed URL
    if backend != "postgresql":
        raise _needs_postgres(backend)


def check_role_name(name: str) -> str:
    if not ROLE_NAME.fullmatch(name) or name.startswith("pg_"):
        raise VfsError(
            f"role name {name!r} is not allowed; use 1-63 lower-case letters, digits and "
            "underscores, starting with a letter (and not pg_)")
    return name


def quote_ident(name: str) -> str:
    """``name`` as a Postgres identifier (already validated: this only doubles quotes)."""
    return '"' + name.replace('"', '""') + '"'


def scram_verifier(password: str, *, salt: bytes | None = None,
                   iterations: int = SCRAM_ITERATIONS) -> str:
    """The SCRAM-SHA-256 verifier Postgres stores for ``password`` (RFC 5802/7677).

    NFKC stands in for SASLprep (the same for every password but ones with
    characters SASLprep maps away or refuses).
    """
    salt = secrets.token_bytes(16) if salt is None else salt
    salted = hashlib.pbkdf2_hmac("sha256", unicodedata.normalize("NFKC", password).encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


# -- roles ------------------------------------------------------------------------

def role_exists(conn: Connection, name: str) -> bool:
    return conn.scalar(text("SELECT 1 FROM pg_roles WHERE rolname = :n"), {"n": name}) is not None


def create_role(engine: Engine, name: str, password: str) -> bool:
    """Create LOGIN role ``name`` (or set its password if it exists); True if created."""
    require_postgres(engine)
    check_role_name(name)
    if not password:
        raise VfsError("a role needs a non-empty password")
    verifier = scram_verifier(password)
    with engine.begin() as conn:
        require_owner(conn, "creates roles")
        existed = role_exists(conn, name)
        verb = "ALTER" if existed else "CREATE"
        # A verifier is hex/base64 and '$:' only: safe inside a literal; DDL takes no binds.
        conn.exec_driver_sql(f"{verb} ROLE {quote_ident(name)} LOGIN PASSWORD '{verifier}'")
        if _has_grants_table(conn):
            _manage(conn, name)
    return not existed


def drop_role(engine: Engine, name: str) -> bool:
    """Remove ``name``'s grants and privileges in this database, then the role (cluster-wide);
    False when there was no such role.

    Dropping fails (the server says which) while the role holds privileges in
    another database; run this there first.
    """
    require_postgres(engine)
    check_role_name(name)
    with engine.begin() as conn:
        require_owner(conn, "drops roles")
        if not role_exists(conn, name):
            return False
        if _has_grants_table(conn):
            conn.execute(text("DELETE FROM memagent_grants WHERE grantee = :r"), {"r": name})
            conn.execute(text("DELETE FROM memagent_roles WHERE name = :r"), {"r": name})
        conn.exec_driver_sql(f"DROP OWNED BY {quote_ident(name)}")
        conn.exec_driver_sql(f"DROP ROLE {quote_ident(name)}")
    return True


# -- privileges and grants -----------------------------------------------------------

def _has_grants_table(conn: Connection) -> bool:
    return conn.scalar(text("SELECT to_regclass('memagent_grants') IS NOT NULL")) is True


def _manage(conn: Connection, name: str) -> None:
    """Put ``name`` under the policies (migration 0010: a role not listed is not filtered)."""
    conn.execute(text("INSERT INTO memagent_roles(name) VALUES (:r) ON CONFLICT (name) DO NOTHING"), {"r": name})


def check_protected(conn: Connection) -> None:
    """Refuse when a table of ``APP_TABLES`` lacks row-level security (or the schema is old)."""
    if not _has_grants_table(conn):
        raise VfsError("this database has no row-level security yet (schema before 0010); "
                       "run `memagent db upgrade` as its owner first")
    rows = conn.execute(text(
        "SELECT c.relname, c.relrowsecurity FROM pg_class AS c "
        "WHERE c.relnamespace = to_regnamespace(current_schema()) AND c.relkind = 'r' "
        "AND c.relname = ANY(:t)"), {"t": list(APP_TABLES)}).all()
    found = {str(r.relname): bool(r.relrowsecurity) for r in rows}
    open_ = [t for t in APP_TABLES if not found.get(t, False)]
    if open_:
        raise VfsError(f"row-level security is off on {', '.join(open_)}; refusing to grant "
                       "access (run `memagent db upgrade` as the database owner)")


def require_owner(conn: Connection, doing: str = "grants and revokes access") -> None:
    """Refuse, in one line, a caller that does not own the tables (only the owner manages roles)."""
    owner = conn.scalar(text(
        "SELECT pg_has_role(current_user, c.relowner, 'USAGE') FROM pg_class AS c "
        "WHERE c.oid = to_regclass('memagent_grants')"))
    if owner is False:
        raise PermissionDenied(
            f"only the database owner {doing}; {conn.scalar(text('SELECT current_user'))!r} "
            "is not (run this with the owner's URL)")


def grant_privileges(conn: Connection, name: str) -> None:
    """The table, sequence and schema privileges a memagent process needs (idempotent)."""
    role = quote_ident(check_role_name(name))
    check_protected(conn)
    schema = quote_ident(str(conn.scalar(text("SELECT current_schema()"))))
    conn.exec_driver_sql(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
    writable = ", ".join(APP_TABLES + SHARED)
    conn.exec_driver_sql(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {writable} TO {role}")
    conn.exec_driver_sql(f"GRANT SELECT ON {', '.join(READ_ONLY)} TO {role}")
    conn.exec_driver_sql(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}")


def scopes_of(kind: GrantKind, ident: str) -> list[str]:
    """The scopes one grant covers: an agent's own, its conversations and its settings."""
    if kind == "agent" and not _AGENT_NAME.fullmatch(ident):
        # A grant on a name no agent can have would silently match nothing.
        raise VfsError(f"invalid agent name {ident!r}: agent names are 1-64 characters of "
                       "a-z, 0-9, '-' and '_', starting with a letter or digit")
    if kind != "agent" and (not ident or ident != ident.strip()):
        raise VfsError(f"{kind} id {ident!r} is empty or has spaces around it; give the id "
                       f"as MEMAGENT_{kind.upper()} holds it")
    if kind == "user" and not _SCOPE_ID.fullmatch(ident):
        # MEMAGENT_USER turns other characters into '-', so such a grant would match nothing.
        raise VfsError(f"invalid user id {ident!r}: use letters, digits and . _ @ - "
                       "(as MEMAGENT_USER holds it)")
    if kind == "org" and not ident.isprintable():
        raise VfsError(f"invalid org id {ident!r}: it holds control characters")
    if kind == "agent":
        return [scope_name("agent", ident), scope_name("conversations", ident),
                scope_name("settings", ident)]
    return [scope_name(kind, ident)]


def grant(engine: Engine, name: str, kind: GrantKind, ident: str, *, write: bool) -> None:
    """Let role ``name`` read (and with ``write`` change) what ``kind``/``ident`` names."""
    require_postgres(engine)
    check_role_name(name)
    scopes = scopes_of(kind, ident)
    with engine.begin() as conn:
        if not role_exists(conn, name):
            raise VfsError(f"no database role {name!r}; create it first: "
                           f"memagent db role create {name} --password-env VAR")
        check_protected(conn)
        require_owner(conn)
        # A role made by hand becomes memagent's here: filtered from this grant on.
        _manage(conn, name)
        grant_privileges(conn, name)
        conn.execute(text(
            "INSERT INTO memagent_grants(grantee, scope, write) VALUES (:r, :s, :w) "
            "ON CONFLICT (grantee, scope) DO UPDATE SET write = EXCLUDED.write"),
            [{"r": name, "s": s, "w": write} for s in scopes])


def revoke(engine: Engine, name: str, kind: GrantKind, ident: str, *, write_only: bool = False) -> int:
    """Take back what ``grant`` gave for ``kind``/``ident``; the number of scopes changed.

    ``write_only``: take back the right to change them only (they stay readable)."""
    require_postgres(engine)
    check_role_name(name)
    scopes = scopes_of(kind, ident)
    with engine.begin() as conn:
        if not _has_grants_table(conn):
            return 0
        require_owner(conn)
        if write_only:
            return conn.execute(text(
                "UPDATE memagent_grants SET write = false WHERE grantee = :r AND scope = ANY(:s) AND write"),
                {"r": name, "s": scopes}).rowcount or 0
        return conn.execute(text(
            "DELETE FROM memagent_grants WHERE grantee = :r AND scope = ANY(:s)"),
            {"r": name, "s": scopes}).rowcount or 0


def grants(engine: Engine, name: str | None = None) -> list[Grant]:
    """The grants (of ``name``, or of every role the caller may see), by role and scope."""
    require_postgres(engine)
    if name is not None:
        check_role_name(name)
    with engine.connect() as conn:
        if not _has_grants_table(conn):
            return []
        rows = conn.execute(text(
            "SELECT grantee, scope, write FROM memagent_grants "
            "WHERE (CAST(:r AS text) IS NULL OR grantee = :r) ORDER BY grantee, scope"), {"r": name})
        return [Grant(str(r.grantee), str(r.scope), bool(r.write)) for r in rows]


# -- refusals as one line --------------------------------------------------------------

def _refusal(exc: BaseException) -> str | None:
    if getattr(exc, "sqlstate", None) != "42501":
        return None
    first = (str(exc).strip().splitlines() or [""])[0]
    return first if any(m in first for m in _RLS_REFUSAL) else None


def explain_refusals(engine: Engine) -> None:
    """Make the server's row-level-security refusals ``PermissionDenied`` on ``engine`` (Postgres)."""
    if not is_postgres(engine) or event.contains(engine, "handle_error", _on_error):
        return
    event.listen(engine, "handle_error", _on_error)


def _on_error(context: Any) -> None:
    reason = _refusal(context.original_exception)
    if reason is None:
        return
    url = getattr(context.engine, "url", None)
    user = url.username if url is not None else None
    who = f"the database role {user!r}" if user else "this database role"
    role = user if user and ROLE_NAME.fullmatch(user) else "ROLE"
    raise PermissionDenied(
        f"{who} may not do this ({reason}); ask the database owner to grant it: "
        f"`memagent db grant {role} --agent AGENT` (or --user USER_ID, --org ORG_ID)")


def describe(items: Iterable[Grant]) -> list[str]:
    """One line per grant, for ``memagent db grants``."""
    return [f"{g.grantee}\t{g.scope}\t{'read-write' if g.write else 'read-only'}" for g in items]
