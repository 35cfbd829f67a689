"""``memagent init``, ``memagent templates`` and ``memagent agents``: creating and listing agents."""

from __future__ import annotations

import click
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from memagent.agent.cli import templates
from memagent.agent.cli.common import Ctx, handled, program
from memagent.vfs import AlreadyExists, scope_name


@click.command()
@click.argument("agent")
@click.option("--template", "-t", default=templates.DEFAULT_TEMPLATE, show_default=True,
              help=f"Starter memory: {', '.join(templates.names())}.")
@click.pass_obj
@handled
def init(ctx: Ctx, agent: str, template: str) -> None:
    """Create AGENT (by default with an empty /AGENTS.md); an existing AGENT is left as it is."""
    start = templates.files(template)
    try:
        ctx.store.create_agent(agent, start)
    except AlreadyExists:
        # Not an error: the README's first command (init && chat) must work a second time.
        # init never overwrites memory, so nothing changed; say so and what to do next.
        click.echo(f"agent {agent!r} already exists in {_shown_url(ctx.url)}; init changed nothing "
                   "(it never overwrites memory; pick another name for a new agent)")
    else:
        n = len(start)
        click.echo(f"created agent {agent!r} from template {template!r} "
                   f"({n} file{'s' if n != 1 else ''}) in {_shown_url(ctx.url)}")
    prog, activate = program()
    click.echo(f"next: {prog} chat {agent}   (or: {prog} fs ls --agent {agent})")
    if activate:
        click.echo(f"      (`{activate}` first lets you type plain `memagent`)")


@click.command("templates")
def templates_cmd() -> None:
    """List the starter agents for `memagent init AGENT --template NAME`."""
    names = templates.names()
    width = max(len(n) for n in names)
    for name in names:
        click.echo(f"{name:<{width}}  {templates.describe(name)}")


@click.command("agents")
@click.pass_obj
@handled
def agents_cmd(ctx: Ctx) -> None:
    """List the agents in the database."""
    memory = ctx.memory  # listing creates nothing
    store = memory.files
    names = store.list_agents()
    if not names:
        click.echo("No agents yet; create one with `memagent init NAME`.")
        return
    queue = memory.queue
    for name in names:
        n = len(store.all_files(scope_name("agent", name)))
        waiting = queue.count_pending(name)
        review = f", {waiting} edit{'s' if waiting != 1 else ''} waiting for review" if waiting else ""
        click.echo(f"{name}  ({n} file{'s' if n != 1 else ''}{review})")


def _shown_url(url: str) -> str:
    """``url`` with its password masked: a user's role URL carries one (``memagent db role``)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url
