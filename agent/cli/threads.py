"""``memagent threads [AGENT]``: an agent's chat threads, outside chat.

What ``/threads`` shows inside chat, for the place a person needs an id from when
they are not in chat: ``memagent chat AGENT --thread ID``.

Invariants:
- Read-only: listing threads changes nothing (no thread, no store schema).
- Titles are memory (the person's first request): every one goes through
  ``terminal_text.shown`` before it reaches the terminal.
"""

from __future__ import annotations

import click

from memagent.agent.cli.common import Ctx, handled
from memagent.vfs import shown, when


@click.command("threads")
@click.argument("agent", required=False)
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True,
              help="Most threads to list, newest activity first.")
@click.pass_obj
@handled
def threads_cmd(ctx: Ctx, agent: str | None, limit: int) -> None:
    """List AGENT's chat threads (newest first): id, last activity, messages, title."""
    view = ctx.view(agent)
    items = ctx.memory.threads.list(view.agent, limit)
    if not items:
        click.echo(f"Agent {view.agent} has no threads yet; `memagent chat {view.agent}` starts one.")
        return
    for t in items:
        count = f"{t.messages} message{'s' if t.messages != 1 else ''}"
        click.echo(f"{t.id[:8]}  {when(t.updated_at)}  {count:>12}  {shown(t.title or '(untitled)', one_line=True)}")
    click.echo(f"Continue one with `memagent chat {view.agent} --thread ID`.")
