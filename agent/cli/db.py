"""``memagent db``: database maintenance."""

from __future__ import annotations

import click

from memagent.agent.cli.common import Ctx, handled
from memagent.vfs import db as vfs_db


@click.group("db")
def db_group() -> None:
    """Database maintenance."""


@db_group.command("upgrade")
@click.pass_obj
@handled
def db_upgrade(ctx: Ctx) -> None:
    """Apply schema migrations up to the newest."""
    engine = vfs_db.connect(ctx.url, migrate=False)
    before = vfs_db.upgrade(engine)
    if before == vfs_db.HEAD:
        click.echo(f"database already at revision {vfs_db.HEAD}")
    else:
        click.echo(f"database upgraded from {before or 'empty'} to {vfs_db.HEAD}")
