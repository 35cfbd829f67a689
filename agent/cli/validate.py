"""``memagent validate``: every memory file of an agent against the current rules."""

from __future__ import annotations

import sys

import click

from memagent.agent.cli.common import Ctx, fail, handled
from memagent.validators import validate as validate_content
from memagent.vfs import shown


@click.command()
@click.argument("agent", required=False)
@click.pass_obj
@handled
def validate(ctx: Ctx, agent: str | None) -> None:
    """Check every memory file of AGENT against the current rules; exit 1 on problems."""
    view = ctx.view(agent)
    rows: list[tuple[str, str, str]] = []
    infos = ctx.store.all_files(view.scope)
    for info in infos:
        content = ctx.store.read(view.scope, info.path).content
        rows += [(info.path, p.location, p.message) for p in validate_content(info.path, content)]
    if not rows:
        click.echo(f"{len(infos)} files of agent {view.agent!r} checked: no problems.")
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table("file", "where", "problem", show_lines=True)
    for row in rows:
        # Names and messages come from memory: escaped, and never read as rich markup.
        table.add_row(*(Text(shown(cell)) for cell in row))
    Console(no_color=not sys.stdout.isatty()).print(table)
    files_bad = len({r[0] for r in rows})
    fail(f"{len(rows)} problem{'s' if len(rows) != 1 else ''} in {files_bad} of {len(infos)} "
         "files; fix them with `memagent fs edit` or `memagent fs write`")
