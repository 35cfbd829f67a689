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
from memagent.agent.cli.common import Ctx
from memagent.agent.cli.lazy import LazyGroup

# Each command's module is imported only when that command runs (``lazy.LazyGroup``):
# name -> "module:attribute". A new command is one line here.
COMMANDS = {
    "init": "memagent.agent.cli.init:init",
    "templates": "memagent.agent.cli.init:templates_cmd",
    "validate": "memagent.agent.cli.validate:validate",
    "agents": "memagent.agent.cli.init:agents_cmd",
    "use": "memagent.agent.cli.use:use_cmd",
    "fs": "memagent.agent.cli.fs:fs",
    "chat": "memagent.agent.cli.chat:chat",
    "db": "memagent.agent.cli.db:db_group",
    "export": "memagent.agent.cli.transfer:export_cmd",
    "import": "memagent.agent.cli.transfer:import_cmd",
    "tools": "memagent.agent.cli.tools:tools_cmd",
    "reflect": "memagent.agent.cli.reflect:reflect_cmd",
    "review": "memagent.agent.cli.reflect:review_cmd",
    "remember": "memagent.agent.cli.reflect:remember_cmd",
    "mcp": "memagent.agent.cli.mcp:mcp_group",
    "models": "memagent.agent.cli.models:models_cmd",
    "eval": "memagent.agent.cli.eval:eval_cmd",
    "run": "memagent.agent.cli.run:run_cmd",
    "approval": "memagent.agent.cli.approval:approval_group",
    "threads": "memagent.agent.cli.threads:threads_cmd",
}

# "\b" (a backspace character, not the two characters) keeps click from re-wrapping the
# paragraph after it.
HELP = """memagent: an agent whose memory is a versioned folder of files in a database.

\b
Quick start:
  memagent init myagent        create an agent with an empty /AGENTS.md
  memagent chat myagent        talk with it (`memagent models` lists models)
  memagent use myagent         make it the agent commands use by default
  echo "Use bullet points." | memagent fs write /AGENTS.md
  memagent fs cat /AGENTS.md   (-a AGENT, before or after fs, picks another)

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


@click.group(cls=LazyGroup, lazy=COMMANDS, help=HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", "db", default=None, metavar="URL", envvar="MEMAGENT_DB",
              help="Database URL: sqlite:///PATH or postgresql+psycopg://USER@HOST/DB.")
@click.option("--agent", "-a", "agent", default=None, metavar="AGENT",
              help="Agent for the command (a sub-command's own --agent wins).")
@click.version_option(__version__, prog_name="memagent")
@click.pass_context
def main(ctx: click.Context, db: str | None, agent: str | None) -> None:
    configure_logging()
    ctx.obj = Ctx(db, agent)
    ctx.call_on_close(ctx.obj.close)


if __name__ == "__main__":
    main()
