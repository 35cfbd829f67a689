"""The ``memagent`` command line: a thin layer over the store and the agent.

Invariant: commands print plain text for people and scripts; user mistakes become
one line on stderr with exit 1 (``cli_common.handled``), usage mistakes exit 2.
"""

from __future__ import annotations

import click

from memagent import __version__
from memagent.agent.cli_common import Ctx, handled
from memagent.agent.cli_fs import fs
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
@click.pass_obj
@handled
def init(ctx: Ctx, agent: str) -> None:
    """Create AGENT with an empty /AGENTS.md."""
    ctx.store.create_agent(agent, {"/AGENTS.md": ""})
    click.echo(f"created agent {agent!r} in {ctx.url}")
    click.echo(f"next: memagent fs write /AGENTS.md --agent {agent} < instructions.md")


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
