"""``memagent use [AGENT]``: choose the agent that commands use when none is named.

Invariants:
- The choice is one line in ``current_agent`` in the data directory
  (``config.current_agent_file``); it names an agent that existed when it was made.
- It is the weakest explicit choice: a command's ``-a/--agent`` (before or after the
  sub-command) and ``MEMAGENT_AGENT`` win over it; without any choice, a database
  holding a single agent uses that one.
"""

from __future__ import annotations

import click

from memagent.agent.cli import config
from memagent.agent.cli.common import Ctx, fail, handled


@click.command("use")
@click.argument("agent", required=False)
@click.option("--clear", is_flag=True, help="Forget the stored choice.")
@click.pass_obj
@handled
def use_cmd(ctx: Ctx, agent: str | None, clear: bool) -> None:
    """Make AGENT the agent commands use by default; without AGENT, say which one they use."""
    if clear:
        if agent:
            raise click.UsageError("give AGENT or --clear, not both")
        config.current_agent_file().unlink(missing_ok=True)
        click.echo("forgot the current agent; commands use -a, $MEMAGENT_AGENT or the only agent")
        return
    if agent is None:
        _show(ctx)
        return
    ctx.existing_store.require_agent(agent)
    try:
        config.store_agent(agent)
    except OSError as exc:
        fail(f"cannot save the choice in {config.current_agent_file()}: {exc.strerror or exc}; "
             "check MEMAGENT_HOME")
    click.echo(f"now using agent {agent!r} (commands without -a use it)")
    env = config.chosen_agent()
    if env is not None and env[1] == "MEMAGENT_AGENT":
        click.echo(f"note: MEMAGENT_AGENT={env[0]} is set in this shell and wins over it")


def _show(ctx: Ctx) -> None:
    chosen = config.chosen_agent(ctx.agent_option)
    if chosen is not None:
        name, source = chosen
        click.echo(f"{name}  (from {'-a' if source == 'option' else source})")
        return
    names = ctx.existing_store.list_agents()
    if len(names) == 1:
        click.echo(f"{names[0]}  (the only agent)")
    elif not names:
        click.echo("No agents yet; create one with `memagent init NAME`.")
    else:
        click.echo(f"no agent chosen; pick one of {', '.join(names)} with `memagent use AGENT`")
