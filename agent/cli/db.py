"""``memagent db``: database maintenance, and roles per user on Postgres.

``db role``/``grant``/``revoke``/``grants`` are the database owner's commands
(``vfs/backends/postgres_roles.py`` does the work): a user's role then reads and
writes only what it was granted, with memagent or raw SQL (migration 0010).
Usage mistakes (SQLite, no or two of --agent/--user/--org, a bad role name, an
unset password variable) are one line and exit 2, before anything is opened.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import click
from sqlalchemy import Engine

from memagent.agent.cli.common import Ctx, fail, handled
from memagent.vfs import (
    SCHEMA_HEAD,
    GrantKind,
    VfsError,
    check_role_name,
    connect_database,
    create_role,
    describe_grants,
    drop_role,
    grant_role,
    require_postgres_url,
    revoke_role,
    role_grants,
    scopes_of_grant,
    upgrade_database,
)


@click.group("db")
def db_group() -> None:
    """Database maintenance."""


@db_group.command("upgrade")
@click.pass_obj
@handled
def db_upgrade(ctx: Ctx) -> None:
    """Apply schema migrations up to the newest."""
    engine = connect_database(ctx.url, migrate=False)
    before = upgrade_database(engine)
    if before == SCHEMA_HEAD:
        click.echo(f"database already at revision {SCHEMA_HEAD}")
    else:
        click.echo(f"database upgraded from {before or 'empty'} to {SCHEMA_HEAD}")


@db_group.command("reindex")
@click.option("--embeddings", is_flag=True, help="Drop every file's vectors and embed them again.")
@click.pass_obj
@handled
def db_reindex(ctx: Ctx, embeddings: bool) -> None:
    """Rebuild derived indexes: --embeddings re-embeds every live file with MEMAGENT_EMBEDDER's model."""
    if not embeddings:
        raise click.UsageError("say what to rebuild: memagent db reindex --embeddings")
    report = ctx.existing_store.reindex_embeddings()
    rate = report.files / report.seconds if report.seconds > 0 else 0.0
    click.echo(f"embedded {report.files} files ({report.chunks} chunks) with {report.model} "
               f"in {report.seconds:.1f} s ({rate:.0f} files/s)")


# -- roles and grants (Postgres) ----------------------------------------------------

def _owner_engine(ctx: Ctx, name: str | None) -> Engine:
    """The database as its owner opens it (migrated to head); usage mistakes exit 2 first."""
    try:
        require_postgres_url(ctx.url)
        if name is not None:
            check_role_name(name)
    except VfsError as exc:
        fail(str(exc), status=2)
    return connect_database(ctx.url)


@db_group.group("role")
def role_group() -> None:
    """Database roles (Postgres): one login per user, who sees only what it is granted."""


@role_group.command("create")
@click.argument("name")
@click.option("--password-env", "password_env", required=True, metavar="VAR",
              help="Environment variable holding the role's password (never on the command line).")
@click.pass_obj
@handled
def role_create(ctx: Ctx, name: str, password_env: str) -> None:
    """Create login role NAME (or set its password again); grant it access with `db grant`."""
    try:  # a SQLite URL or a bad name is the first thing to say, before the password
        require_postgres_url(ctx.url)
        check_role_name(name)
    except VfsError as exc:
        fail(str(exc), status=2)
    password = os.environ.get(password_env, "")
    if not password:
        fail(f"${password_env} is not set or empty; put the role's password in it", status=2)
    engine = _owner_engine(ctx, name)
    try:
        created = create_role(engine, name, password)
    finally:
        engine.dispose()
    click.echo(f"role {name} {'created' if created else 'exists; password set again'}; "
               f"grant it access with: memagent db grant {name} --agent AGENT")


@role_group.command("drop")
@click.argument("name")
@click.pass_obj
@handled
def role_drop(ctx: Ctx, name: str) -> None:
    """Drop role NAME: its grants and privileges in this database, then the login itself."""
    engine = _owner_engine(ctx, name)
    try:
        dropped = drop_role(engine, name)
    finally:
        engine.dispose()
    click.echo(f"role {name} dropped" if dropped else f"no role {name}; nothing changed")


def _scope_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed((
        click.option("--agent", "agent", metavar="AGENT", help="The agent: its memory, conversations, "
                     "settings, threads and proposals."),
        click.option("--user", "user", metavar="USER_ID", help="The user's /user/ scope (read and write)."),
        click.option("--org", "org", metavar="ORG_ID", help="The org's /org/ scope (read; --write to change it)."),
    )):
        fn = option(fn)
    return fn


def _target(agent: str | None, user: str | None, org: str | None) -> tuple[GrantKind, str]:
    options: tuple[tuple[GrantKind, str | None], ...] = (("agent", agent), ("user", user), ("org", org))
    given = [(kind, value) for kind, value in options if value is not None]
    if len(given) != 1:
        fail("say what to grant or revoke: exactly one of --agent AGENT, --user USER_ID, --org ORG_ID",
             status=2)
    kind, ident = given[0]
    try:
        scopes_of_grant(kind, ident)
    except VfsError as exc:
        fail(str(exc), status=2)
    return kind, ident


def _flags_fit(kind: GrantKind, read_only: bool, write: bool) -> None:
    if read_only and kind != "agent":
        fail("--read-only goes with --agent (a user grant is read-write, an org grant read-only "
             "unless --write)", status=2)
    if write and kind != "org":
        fail("--write goes with --org (agent and user grants write unless --read-only)", status=2)


@db_group.command("grant")
@click.argument("name")
@_scope_options
@click.option("--read-only", "read_only", is_flag=True, help="With --agent: read, never change.")
@click.option("--write", "write", is_flag=True, help="With --org: change it too.")
@click.pass_obj
@handled
def db_grant(ctx: Ctx, name: str, agent: str | None, user: str | None, org: str | None,
             read_only: bool, write: bool) -> None:
    """Let role NAME read and write an agent, a user's /user/ or an org's /org/ (Postgres)."""
    kind, ident = _target(agent, user, org)
    _flags_fit(kind, read_only, write)
    can_write = {"agent": not read_only, "user": True, "org": write}[kind]
    engine = _owner_engine(ctx, name)
    try:
        grant_role(engine, name, kind, ident, write=can_write)
    finally:
        engine.dispose()
    click.echo(f"granted {name} {'read-write' if can_write else 'read-only'} access to {kind} {ident}")


@db_group.command("revoke")
@click.argument("name")
@_scope_options
@click.option("--read-only", "read_only", is_flag=True,
              help="With --agent: accepted as grant took it; the grant goes, whatever it allowed.")
@click.option("--write", "write", is_flag=True,
              help="With --org: take back only the right to change it (it stays readable).")
@click.pass_obj
@handled
def db_revoke(ctx: Ctx, name: str, agent: str | None, user: str | None, org: str | None,
              read_only: bool, write: bool) -> None:
    """Take back a grant of role NAME (the same arguments as it was given)."""
    kind, ident = _target(agent, user, org)
    _flags_fit(kind, read_only, write)
    engine = _owner_engine(ctx, name)
    try:
        changed = revoke_role(engine, name, kind, ident, write_only=write)
    finally:
        engine.dispose()
    if write:
        click.echo(f"{name} may read {kind} {ident} but no longer change it" if changed
                   else f"{name} could not change {kind} {ident}; nothing changed")
    elif changed:
        click.echo(f"revoked {name}'s access to {kind} {ident}")
    else:
        click.echo(f"{name} had no grant on {kind} {ident}; nothing changed")


@db_group.command("grants")
@click.argument("name", required=False)
@click.pass_obj
@handled
def db_grants(ctx: Ctx, name: str | None) -> None:
    """List grants (of role NAME, or of every role): role, scope, read-only or read-write."""
    engine = _owner_engine(ctx, name)
    try:
        lines = describe_grants(role_grants(engine, name))
    finally:
        engine.dispose()
    for line in lines:
        click.echo(line)
    if not lines:
        click.echo(f"{'no grants' if name is None else f'{name} has no grants'}; the owner grants "
                   "with `memagent db grant ROLE --agent AGENT`", err=True)
