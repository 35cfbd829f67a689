"""The ``memagent`` command group: global options, logging, and the subcommands.

Invariant: commands print plain text for people and scripts; user mistakes become
one line on stderr with exit 1 (``common.handled``), usage mistakes exit 2.
``MEMAGENT_LOG=debug|info|warning`` turns on the ``memagent`` logger on stderr
(database chosen, migrations, model retries, tool timings); it is silent otherwise.
"""

from __future__ import annotations

import logging
import os

import click

from memagent import __version__
from memagent.agent.cli.chat import chat
from memagent.agent.cli.common import Ctx
from memagent.agent.cli.db import db_group
from memagent.agent.cli.fs import fs
from memagent.agent.cli.init import agents_cmd, init, templates_cmd
from memagent.agent.cli.reflect import reflect_cmd, remember_cmd, review_cmd
from memagent.agent.cli.tools import tools_cmd
from memagent.agent.cli.transfer import export_cmd, import_cmd
from memagent.agent.cli.validate import validate

HELP = """memagent: an agent whose memory is a versioned folder of files in a database.

\\b
Quick start:
  memagent init myagent            create an agent with an empty /AGENTS.md
  echo "Use bullet points." | memagent fs write /AGENTS.md --agent myagent
  memagent fs cat /AGENTS.md --agent myagent

The database is $MEMAGENT_DB or --db (a SQLAlchemy URL); by default a SQLite file
in $MEMAGENT_HOME (or the user data directory).
"""


def configure_logging() -> None:
    level = os.environ.get("MEMAGENT_LOG", "").strip().upper()
    if not level:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("memagent %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("memagent")
    root.addHandler(handler)
    root.setLevel(level if level in ("DEBUG", "INFO", "WARNING", "ERROR") else "DEBUG")


@click.group(help=HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", "db", default=None, metavar="URL", envvar="MEMAGENT_DB",
              help="Database URL: sqlite:///PATH or postgresql+psycopg://USER@HOST/DB.")
@click.version_option(__version__, prog_name="memagent")
@click.pass_context
def main(ctx: click.Context, db: str | None) -> None:
    configure_logging()
    ctx.obj = Ctx(db)


for command in (init, templates_cmd, validate, agents_cmd, fs, chat, db_group, export_cmd, import_cmd, tools_cmd,
                reflect_cmd, review_cmd, remember_cmd):
    main.add_command(command)


if __name__ == "__main__":
    main()
