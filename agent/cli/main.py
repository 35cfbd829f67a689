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
from memagent.agent.cli.lazy import LazyGroup

# Each command's module is imported only when that command runs (``lazy.LazyGroup``):
# name -> ("module:attribute", its one-line help, which ``--help`` lists without importing
# it; tests/test_cli_lazy.py holds it equal to the command's own). A new command is an
# entry here.
COMMANDS = {
    "init": ("memagent.agent.cli.init:init",
             "Create AGENT (by default with an empty /AGENTS.md); an existing AGENT is left as it is."),
    "templates": ("memagent.agent.cli.init:templates_cmd",
                  "List the starter agents for `memagent init AGENT --template NAME`."),
    "validate": ("memagent.agent.cli.validate:validate",
                 "Check every memory file of AGENT against the current rules; exit 1 on problems."),
    "agents": ("memagent.agent.cli.init:agents_cmd",
               "List the agents in the database."),
    "use": ("memagent.agent.cli.use:use_cmd",
            "Make AGENT the agent commands use by default; without AGENT, say which one they use."),
    "fs": ("memagent.agent.cli.fs:fs",
           "Read and change an agent's memory files (validated and versioned)."),
    "chat": ("memagent.agent.cli.chat:chat",
             "Talk with AGENT (default: -a, $MEMAGENT_AGENT, `memagent use`, the only agent);"
             " it keeps what it learns."),
    "db": ("memagent.agent.cli.db:db_group",
           "Database maintenance."),
    "export": ("memagent.agent.cli.transfer:export_cmd",
               "Write AGENT's memory to OUTDIR in another harness's layout."),
    "import": ("memagent.agent.cli.transfer:import_cmd",
               "Import SOURCE (a folder or a .zip) as AGENT's memory."),
    "tools": ("memagent.agent.cli.tools:tools_cmd",
              "Show AGENT's MCP servers (from /tools.json): status, allowed tools, and the tools"
              " each server offers that the agent may not use."),
    "reflect": ("memagent.agent.cli.reflect:reflect_cmd",
                "Reflect on AGENT's recent conversations and propose memory edits for review."),
    "review": ("memagent.agent.cli.reflect:review_cmd",
               "Approve or reject the memory edits waiting for review (reflect, run, mcp serve)."),
    "remember": ("memagent.agent.cli.reflect:remember_cmd",
                 "Route NOTE through AGENT to the right memory file (AGENTS.md, a skill, or knowledge)."),
    "mcp": ("memagent.agent.cli.mcp:mcp_group",
            "Serve an agent's memory to other harnesses over MCP (Claude Code, Codex, ...)."),
    "models": ("memagent.agent.cli.models:models_cmd",
               "List the model providers, whether each is set up, the variables it reads, and local models."),
    "eval": ("memagent.agent.cli.eval:eval_cmd",
             "Does memory work? Run memory scenarios (or a benchmark) on a model in throwaway agents."),
    "run": ("memagent.agent.cli.run:run_cmd",
            "Run one turn of AGENT on TASK without a person: for scripts and cron."),
    "approval": ("memagent.agent.cli.approval:approval_group",
                 "Approval rules per agent: which edits and tool calls are allowed, asked, queued or denied."),
    "threads": ("memagent.agent.cli.threads:threads_cmd",
                "List AGENT's chat threads (newest first): id, last activity, messages, title."),
}

# "\b" (a backspace character, not the two characters) keeps click from re-wrapping the
# paragraph after it.
HELP = """memagent: an agent whose memory is a versioned folder of files in a database.

\b
Quick start:
  memagent init myagent        create an agent with an empty /AGENTS.md
  memagent chat myagent        talk with it (`memagent models` lists models)
  memagent use myagent         make it the agent commands use by default
  echo "- Use bullet points." | memagent fs write /AGENTS.md --append
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
    # Imported here, not at the top: it brings the store (sqlalchemy), which
    # ``memagent --help`` never needs.
    from memagent.agent.cli.common import Ctx

    configure_logging()
    ctx.obj = Ctx(db, agent)
    ctx.call_on_close(ctx.obj.close)


if __name__ == "__main__":
    main()
