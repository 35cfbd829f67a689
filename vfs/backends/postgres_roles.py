"""Database roles per user and their grants, for row-level security (migration 0010).

What ``memagent db role`` / ``grant`` / ``revoke`` / ``grants`` do, run by the
database owner (who runs the migrations and bypasses row-level security):

- ``create_role``: a ``LOGIN`` role with a password. The password never reaches the
  server in clear: it is sent as a SCRAM-SHA-256 verifier computed here (as psql's
  ``\\password`` does), so statement logs never hold it. Creating a role that exists
  sets its password again (idempotent).
- ``grant``: the rows of ``memagent_grants`` that the policies read (an agent
  grant covers ``agent:A``, ``conversations:A`` and ``settings:A`` (its threads,
  proposals and reflection runs follow the agent), a user grant ``user:U``
  (always read and write), an org grant ``org:O`` (read, write with ``write``)),
  then the table privileges those grants need (``fit_privileges``): SELECT on
  the tables of ``APP_TABLES``, whose rows the policies filter; INSERT, UPDATE,
  DELETE on them only while the role holds a write grant (else only on the
  derived ``READERS_WRITE`` and ``SHARED`` tables its searches keep in step);
  SELECT on ``READ_ONLY``; USAGE on the schema and its sequences. Granting again
  changes nothing (or only the write flag).
- ``revoke``: removes those rows (or their write flag) and fits the privileges
  again: a role whose last write grant went can no longer UPDATE, so it can no
  longer lock a memory table; with no grant it sees no row of any table.
- Tenants cannot block each other (issue #36): Postgres lets a role ``LOCK
  TABLE … IN ACCESS EXCLUSIVE MODE`` with UPDATE, DELETE or TRUNCATE, so only a
  writing role can, and every managed role's sessions in this database wait at
  most ``LOCK_TIMEOUT_SECONDS`` for a lock (a role default, set by ``_manage``:
  it holds through a transaction-pooling PgBouncer, where a session ``SET`` would
  not). memagent's own sessions set ``lock_timeout_ms()`` themselves
  (``MEMAGENT_LOCK_TIMEOUT``; ``PostgresBackend.engine_setup``), and a statement
  that gave up waiting is ``DatabaseLocked``, one line.
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
  (an index merge only the owner may run) pass unchanged for their callers. A lock
  wait that passed the lock timeout (55P03) becomes ``DatabaseLocked``, naming the
  table waited for; the migration lock's own bounded wait is left to its caller.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import os
import re
import secrets
import unicodedata
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Connection, Engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError

from memagent.vfs.errors import VfsError
from memagent.vfs.paths import scope_name

GrantKind = Literal["agent", "user", "org"]

# Tables whose rows the 0010 policies filter: a role gets SELECT, and INSERT/UPDATE/
# DELETE only while it holds a write grant (``fit_privileges``).
APP_TABLES = (
    "agents", "files", "dirs", "revisions", "threads", "messages", "thread_events",
    "thread_summaries", "reflection_runs", "proposals", "embeddings", "embedding_pending",
)
# Of those, the derived vectors a reader's search keeps in step (0010's policies let
# a role that may read a file write them): every role may change them.
READERS_WRITE = ("embeddings", "embedding_pending")
# Tables without memory that every role shares (model names and generation counters).
SHARED = ("embedding_state",)
# Tables a role only reads: the schema revision (the start-up check), its own grants.
READ_ONLY = ("alembic_version", "memagent_grants", "memagent_roles")

# Lower-case letters, digits and underscores, starting with a letter: never needs
# quoting in psql either; ``pg_`` is reserved by Postgres.
ROLE_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")
SCRAM_ITERATIONS = 4096
# The store's agent-name rule (vfs/files/core.py check_agent_name; not imported: that
# module imports the backends) and the characters config.user_id keeps.
_AGENT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_SCOPE_ID = re.compile(r"[A-Za-z0-9_.@-]+")
_RLS_REFUSAL = ("row-level security", "permission denied for table", "permission denied for sequence")

# How long a memagent session waits for a lock another session holds before it gives
# up with ``DatabaseLocked`` (a writing tenant can lock a whole table; see the module
# docstring). Also each managed role's default in this database, for every session.
LOCK_TIMEOUT_SECONDS = 5
LOCK_TIMEOUT_ENV = "MEMAGENT_LOCK_TIMEOUT"
_LOCK_TIMEOUT_MAX = 3600  # an hour: past that a wait is a hang by another name
_LOCK_NOT_AVAILABLE = "55P03"
# The table a statement waits for: the first name after a word that reads or writes one.
_TABLE_IN = re.compile(r"\b(?:FROM|JOIN|UPDATE|INTO|TABLE)\s+\"?([a-z_]+)", re.IGNORECASE)


class NeedsPostgres(VfsError):
    """Roles and row-level security asked of a database that is not Postgres."""


class PermissionDenied(VfsError):
    """The database refused a row or table to the role this process logs in as."""


class DatabaseLocked(VfsError):
    """A statement waited longer than the lock timeout for a lock another session holds."""


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
    """Put ``name`` under the policies (migration 0010: a role not listed is not filtered)
    and bound its sessions' lock waits in this database (``set_role_lock_timeout``)."""
    conn.execute(text("INSERT INTO memagent_roles(name) VALUES (:r) ON CONFLICT (name) DO NOTHING"), {"r": name})
    set_role_lock_timeout(conn, name)


def set_role_lock_timeout(conn: Connection, name: str) -> bool:
    """Make ``LOCK_TIMEOUT_SECONDS`` the default ``lock_timeout`` of ``name``'s sessions in
    this database; False when the caller may not alter the role (no CREATEROLE).

    A role default reaches every session the role opens, through a transaction-pooling
    PgBouncer too (its server sessions log in as the role), where a session ``SET``
    sent by a client would land on whichever server session ran it. A refusal
    changes nothing else (a savepoint): the role's direct memagent sessions still set
    the timeout themselves.
    """
    database = quote_ident(str(conn.scalar(text("SELECT current_database()"))))
    driver: Any = conn.connection.dbapi_connection
    # In autocommit (an owner's engine may run so) a refusal aborts nothing and there is
    # no transaction to take a savepoint in.
    savepoint = None if driver is None or driver.autocommit else conn.begin_nested()
    try:
        conn.exec_driver_sql(f"ALTER ROLE {quote_ident(check_role_name(name))} IN DATABASE {database} "
                             f"SET lock_timeout = '{LOCK_TIMEOUT_SECONDS}s'")
    except DBAPIError as exc:
        if savepoint is not None:
            savepoint.rollback()
        if getattr(exc.orig, "sqlstate", None) != "42501":
            raise
        return False
    if savepoint is not None:
        savepoint.commit()
    return True


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


def fit_privileges(conn: Connection, name: str) -> bool:
    """Give ``name`` the table, sequence and schema privileges its grants need, and take
    back any other on the tables memagent hands out (idempotent); True if it may write.

    INSERT, UPDATE and DELETE on the memory tables only while one of its grants is for
    write: each of them also lets a role lock the whole table (``LOCK TABLE … IN ACCESS
    EXCLUSIVE MODE``), blocking every other user. A reader keeps SELECT, and writes
    only the derived vectors its searches keep in step (``READERS_WRITE``, ``SHARED``).
    TRUNCATE, REFERENCES and TRIGGER memagent never needs (each also allows a lock).
    """
    role = quote_ident(check_role_name(name))
    check_protected(conn)
    writes = conn.scalar(text("SELECT EXISTS (SELECT 1 FROM memagent_grants WHERE grantee = :r AND write)"),
                         {"r": name}) is True
    schema = quote_ident(str(conn.scalar(text("SELECT current_schema()"))))
    everything = ", ".join(APP_TABLES + SHARED + READ_ONLY)
    written = ", ".join(t for t in APP_TABLES if t not in READERS_WRITE)
    conn.exec_driver_sql(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
    conn.exec_driver_sql(f"REVOKE TRUNCATE, REFERENCES, TRIGGER ON {everything} FROM {role}")
    conn.exec_driver_sql(f"GRANT SELECT ON {everything} TO {role}")
    conn.exec_driver_sql(f"REVOKE INSERT, UPDATE, DELETE ON {', '.join(READ_ONLY)} FROM {role}")
    conn.exec_driver_sql(f"GRANT INSERT, UPDATE, DELETE ON {', '.join(READERS_WRITE + SHARED)} TO {role}")
    verb = "GRANT INSERT, UPDATE, DELETE ON {t} TO" if writes else "REVOKE INSERT, UPDATE, DELETE ON {t} FROM"
    conn.exec_driver_sql(f"{verb.format(t=written)} {role}")
    conn.exec_driver_sql(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}")
    return writes


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
        conn.execute(text(
            "INSERT INTO memagent_grants(grantee, scope, write) VALUES (:r, :s, :w) "
            "ON CONFLICT (grantee, scope) DO UPDATE SET write = EXCLUDED.write"),
            [{"r": name, "s": s, "w": write} for s in scopes])
        fit_privileges(conn, name)  # after the rows: whether it may write depends on them


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
            changed = conn.execute(text(
                "UPDATE memagent_grants SET write = false WHERE grantee = :r AND scope = ANY(:s) AND write"),
                {"r": name, "s": scopes}).rowcount or 0
        else:
            changed = conn.execute(text(
                "DELETE FROM memagent_grants WHERE grantee = :r AND scope = ANY(:s)"),
                {"r": name, "s": scopes}).rowcount or 0
        if changed and role_exists(conn, name):
            fit_privileges(conn, name)  # its last write grant gone: no UPDATE, no table lock
        return changed


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


def lock_timeout_ms() -> int:
    """The lock timeout memagent's sessions set, in milliseconds (``MEMAGENT_LOCK_TIMEOUT``,
    seconds; ``LOCK_TIMEOUT_SECONDS`` when unset). A bad value is one ``VfsError`` line."""
    raw = os.environ.get(LOCK_TIMEOUT_ENV, "").strip()
    if not raw:
        return LOCK_TIMEOUT_SECONDS * 1000
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not (0 < seconds <= _LOCK_TIMEOUT_MAX):  # also NaN
        raise VfsError(f"{LOCK_TIMEOUT_ENV}={raw!r} is not a number of seconds; give how long to wait "
                       f"for another session's lock, above 0 and at most {_LOCK_TIMEOUT_MAX} "
                       f"(default {LOCK_TIMEOUT_SECONDS})")
    return max(1, round(seconds * 1000))


def sets_own_timeout(driver: Any) -> bool:
    """Whether this DBAPI connection set ``lock_timeout`` for its whole session.

    Only a line proven to reach the server itself may (``PostgresBackend.engine_setup``);
    vfs/db.py proves it first and marks it by turning statement preparing on. Through a
    pooler only transactions set it (``SET LOCAL``) and single statements run with the
    role's default.
    """
    return getattr(driver, "prepare_threshold", None) is not None


def _timeout_in_force(context: Any) -> int | None:
    """The lock timeout memagent set for the failed statement, or None (the role's default)."""
    try:
        driver = context.connection.connection.dbapi_connection
        if sets_own_timeout(driver) or not driver.autocommit:
            return lock_timeout_ms()
    except Exception:  # noqa: BLE001 - a closed or invalidated connection: say nothing of it
        return None
    return None


def _seconds(ms: int) -> str:
    return f"{ms / 1000:g} s"


def lock_refusal(exc: BaseException, statement: str | None, waited_ms: int | None) -> DatabaseLocked | None:
    """``DatabaseLocked`` for a statement that gave up waiting for a lock (SQLSTATE 55P03), else None.

    ``waited_ms``: the timeout in force, when known (a session's own ``SET``), else the
    message does not guess it.
    """
    if getattr(exc, "sqlstate", None) != _LOCK_NOT_AVAILABLE:
        return None
    found = _TABLE_IN.search(statement or "")
    on = f" on {found.group(1).lower()}" if found else ""
    waited = f"waited {_seconds(waited_ms)}" if waited_ms is not None else "waited its lock timeout"
    return DatabaseLocked(
        f"the database is locked by another session ({waited} for a lock{on}); try again, or ask "
        f"the database owner to end that session ({LOCK_TIMEOUT_ENV} sets how long to wait)")


def explain_refusals(engine: Engine) -> None:
    """Make the server's row-level-security refusals ``PermissionDenied``, and lock waits past
    the lock timeout ``DatabaseLocked``, on ``engine`` (Postgres)."""
    if not is_postgres(engine) or event.contains(engine, "handle_error", _on_error):
        return
    event.listen(engine, "handle_error", _on_error)


def _on_error(context: Any) -> None:
    statement = context.statement or ""
    # The migration lock waits its own bound and its caller says so (vfs/db.py).
    if "pg_advisory_xact_lock" not in statement:
        locked = lock_refusal(context.original_exception, statement, _timeout_in_force(context))
        if locked is not None:
            raise locked
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
