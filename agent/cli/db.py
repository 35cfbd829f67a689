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
