"""``memagent approval add|list|rm``: an agent's approval rules, from the command line.

Invariants: the rules are read and written only through ``vfs.records.rules.RuleBook``
(a settings scope no memory tool reaches, each change a revision made at the version
read); a bad rule or number is one line and exit 1 with nothing changed; ``list``
prints the rules numbered in the order they are tried, then what applies when none
matches. A rule is stored, echoed and listed in the form it is matched in (its path
pattern normalised, ``parse_rule``); ``add`` says so when that is not what was typed.
"""

from __future__ import annotations

import click

from memagent.agent.cli.common import Ctx, handled
from memagent.vfs import shown

ACTIONS_HELP = "allow (apply at once), ask (a person decides; unattended: queue), queue (wait for review), deny"


@click.group("approval")
def approval_group() -> None:
    """Approval rules per agent: which edits and tool calls are allowed, asked, queued or denied.

    \b
    A rule is TOOL(PATTERN) or an MCP tool, then an action; the first match wins:
      memagent approval add notes 'write_file(/knowledge/**)' allow
      memagent approval add notes 'edit_file(/AGENTS.md)' queue
      memagent approval add notes 'delete_file(**)' deny
      memagent approval add notes mcp__time__now allow
    Tools: write_file, edit_file, delete_file (* and ? within a folder, **
    across), mcp__SERVER__TOOL (* matches any characters). No rule: chat asks,
    memagent run queues, mcp serve does what --approval says. The model cannot
    change them.
    """


@approval_group.command("add")
@click.argument("agent")
@click.argument("rule")
@click.argument("action", type=click.Choice(["allow", "ask", "queue", "deny"]))
@click.pass_obj
@handled
def add_cmd(ctx: Ctx, agent: str, rule: str, action: str) -> None:
    """Append RULE with ACTION to AGENT's rules (tried after the existing ones)."""
    from memagent.vfs import RuleBook, RuleError, parse_rule

    view = ctx.view(agent)
    try:
        parse_rule(rule, action)
    except RuleError as exc:  # a usage mistake: exit 2, nothing changed
        raise click.BadParameter(str(exc), param_hint="RULE") from None
    number, added = RuleBook(ctx.store, view.agent).add(rule, action)
    typed = rule.strip()
    note = f"; written as {typed!r}, stored as it is matched" if added.spec != typed else ""
    click.echo(shown(f"rule {number}: {added}  (agent {view.agent}{note})"))


@approval_group.command("list")
@click.argument("agent", required=False)
@click.pass_obj
@handled
def list_cmd(ctx: Ctx, agent: str | None) -> None:
    """Print AGENT's rules, numbered, in the order they are tried."""
    from memagent.vfs import RuleBook

    view = ctx.view(agent)
    rules = RuleBook(ctx.store, view.agent).rules()
    for n, rule in enumerate(rules, 1):
        click.echo(shown(f"{n:>3}  {rule}"))
    lead = "no rules" if not rules else "no rule matches"
    click.echo(f"({lead}: chat asks, memagent run queues for review, mcp serve follows --approval; "
               f"`memagent approval add {view.agent} RULE ACTION` adds one)")


@approval_group.command("rm")
@click.argument("agent")
@click.argument("number", type=click.IntRange(min=1))
@click.pass_obj
@handled
def rm_cmd(ctx: Ctx, agent: str, number: int) -> None:
    """Remove rule NUMBER (as `memagent approval list` numbers it) from AGENT's rules."""
    from memagent.vfs import RuleBook, RuleError

    view = ctx.view(agent)
    try:
        gone = RuleBook(ctx.store, view.agent).remove(number)
    except RuleError as exc:
        raise click.BadParameter(str(exc), param_hint="NUMBER") from None
    click.echo(shown(f"removed rule {number}: {gone}  (agent {view.agent})"))
