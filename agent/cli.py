"""The ``memagent`` command line: a thin layer over the store and the agent.

Invariant: commands print plain text for people and scripts; user mistakes become
one line on stderr with exit 1 (``cli_common.handled``), usage mistakes exit 2.
"""

from __future__ import annotations

import sys

import click

from memagent import __version__
from memagent.agent import templates
from memagent.agent.cli_chat import chat
from memagent.agent.cli_common import Ctx, fail, handled
from memagent.agent.cli_fs import fs
from memagent.validators import validate as validate_content
from memagent.vfs import db as vfs_db

HELP = """memagent: an agent whose memory is a versioned folder of files in a database.

\b
Quick start:
  memagent init myagent            create an agent with an empty /AGENTS.md
  echo "Use bullet points." | memagent fs write /AGENTS.md --agent myagent
  memagent fs cat /AGENTS.md --agent myagent

The database is $MEMAGENT_DB or --db (a SQLAlchemy URL); by default a SQLite file
in $MEMAGENT_HOME (or the user data directory).
"""


@click.group(help=HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", "db", default=None, metavar="URL", envvar="MEMAGENT_DB",
              help="Database URL: sqlite:///PATH or postgresql+psycopg://USER@HOST/DB.")
@click.version_option(__version__, prog_name="memagent")
@click.pass_context
def main(ctx: click.Context, db: str | None) -> None:
    ctx.obj = Ctx(db)


@main.command()
@click.argument("agent")
@click.option("--template", "-t", default=templates.DEFAULT_TEMPLATE, show_default=True,
              help=f"Starter memory: {', '.join(templates.names())}.")
@click.pass_obj
@handled
def init(ctx: Ctx, agent: str, template: str) -> None:
    """Create AGENT (by default with an empty /AGENTS.md)."""
    start = templates.files(template)
    ctx.store.create_agent(agent, start)
    n = len(start)
    click.echo(f"created agent {agent!r} from template {template!r} "
               f"({n} file{'s' if n != 1 else ''}) in {ctx.url}")
    click.echo(f"next: memagent chat {agent}   (or: memagent fs ls --agent {agent})")


@main.command()
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

    table = Table("file", "where", "problem", show_lines=True)
    for row in rows:
        table.add_row(*row)
    Console(no_color=not sys.stdout.isatty()).print(table)
    files_bad = len({r[0] for r in rows})
    fail(f"{len(rows)} problem{'s' if len(rows) != 1 else ''} in {files_bad} of {len(infos)} "
         "files; fix them with `memagent fs edit` or `memagent fs write`")


@main.command("agents")
@click.pass_obj
@handled
def agents_cmd(ctx: Ctx) -> None:
    """List the agents in the database."""
    names = ctx.store.list_agents()
    if not names:
        click.echo("No agents yet; create one with `memagent init NAME`.")
        return
    for name in names:
        n = len(ctx.store.all_files(f"agent:{name}"))
        click.echo(f"{name}  ({n} file{'s' if n != 1 else ''})")


main.add_command(fs)
main.add_command(chat)


@main.group("db")
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


if __name__ == "__main__":
    main()
