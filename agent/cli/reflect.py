"""``memagent reflect``, ``memagent review`` and ``memagent remember``: memory that improves
while nobody watches, and notes routed to memory from the command line.

Invariants:
- ``reflect`` is safe from cron: exit 0 when it ran (proposals stored, applied with
  ``--yolo``, or none needed), 1 on an error (one line on stderr), 3 when there was
  nothing to do (no new conversation, or another run of the same agent kept the lock
  past ``--wait``). It prints one line per proposal and one summary line, never
  asks anything, and needs no terminal.
- ``review`` asks about each pending proposal (its diff, reason and origin) through
  the chat's UI, as ``/review`` does (``agent/chat/review.py``: one panel, one wording),
  reading the answers line by line from a pipe (``y``, ``n``, ``n: feedback``,
  ``a`` = always: this and all the rest); end of input stops, leaving the rest pending. A proposal
  whose file changed is re-based onto whole, unchanged lines and shown as such;
  otherwise it is a conflict: both sides are shown and the answer is ``r``
  (re-propose: the next ``reflect`` redoes it against the file as it is now), ``d``
  (discard) or ``s`` (skip, left pending). A conflict is never applied.
- ``remember`` runs one agent turn with the note through the approval gate, like
  ``# note`` in chat; answers to the approval come from the terminal or stdin.
- ``reflect`` and ``remember`` make their model through the registry only
  (``cli.models``: ``--model``, ``$MEMAGENT_MODEL``, ``--base-url``), as chat does.
"""

from __future__ import annotations

import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from memagent.agent.cli import config
from memagent.agent.cli.common import Ctx, fail, handled
from memagent.agent.model import DEFAULT_MODEL as MODEL_DEFAULT
from memagent.vfs import shown

EXIT_NOTHING = 3
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"(\d+)\s*([smhdw])")


def parse_duration(text: str) -> timedelta:
    """``90s``, ``30m``, ``12h``, ``7d``, ``2w`` or combinations (``1h30m``)."""
    spec = text.strip().lower().replace(" ", "")
    parts = _DURATION.findall(spec)
    if not spec or "".join(n + u for n, u in parts) != spec:
        raise click.BadParameter("give a duration such as 30m, 12h, 7d or 2w (s, m, h, d, w)")
    seconds = sum(int(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0 or seconds > 10 * 365 * 86400:
        raise click.BadParameter("give a duration between 1s and 10 years, e.g. 7d")
    return timedelta(seconds=seconds)


MODEL_HELP = f"Model id, provider/model (default: $MEMAGENT_MODEL or {MODEL_DEFAULT})."
BASE_URL_HELP = "Where the model's API is (an OpenAI-compatible server, a proxy)."


@click.command("reflect")
@click.argument("agent", required=False)
@click.option("--since", "since", default=None, metavar="DURATION",
              help="Read the conversations of the last DURATION (30m, 12h, 7d) instead of those since the last run.")
@click.option("--dry-run", is_flag=True, help="Show what would be proposed; store nothing, move no mark.")
@click.option("--yolo", is_flag=True,
              help="Apply the edits at once instead of queueing them (revisions say yolo, origin reflect).")
@click.option("--wait", "wait", type=click.FloatRange(0, 3600), default=60.0, show_default=True,
              metavar="SECONDS", help="How long to wait for another reflect run of the agent to finish.")
@click.option("--model", "model_name", default=None, metavar="M", help=MODEL_HELP)
@click.option("--base-url", "base_url", default=None, metavar="URL", help=BASE_URL_HELP)
@click.pass_obj
@handled
def reflect_cmd(ctx: Ctx, agent: str | None, since: str | None, dry_run: bool, yolo: bool, wait: float,
                model_name: str | None, base_url: str | None) -> None:
    """Reflect on AGENT's recent conversations and propose memory edits for review.

    \b
    Reads the conversations since the last run (or of the last --since DURATION),
    asks the model what is worth keeping (generalised rules, not lists of cases)
    and stores its edits as proposals; `memagent review AGENT` applies them.
    Exit status: 0 done, 1 error, 3 nothing to do. Safe to run from cron.
    """
    from memagent.agent.cli import models
    from memagent.agent.model import ModelError
    from memagent.agent.reflection import reflect
    from memagent.vfs import Busy

    window = parse_duration(since) if since is not None else None
    view = ctx.view(agent)
    name, opts = models.model_id(model_name), models.options(base_url)
    models.check_ready(name, opts, "reflect")
    model = models.make(name, opts)
    start = datetime.now(UTC) - window if window is not None else None
    try:
        result = reflect(view, model, ctx.memory.queue, since=start, dry_run=dry_run, yolo=yolo,
                         wait=wait, on_log=lambda line: click.echo(shown(line)))
    except Busy as exc:
        click.echo(f"{exc}; nothing done (it reads the same conversations)", err=True)
        sys.exit(EXIT_NOTHING)
    except ModelError as exc:
        fail(f"the model request failed: {exc}; nothing was stored, run reflect again later")
    if result.status == "nothing":
        click.echo(result.message)
        sys.exit(EXIT_NOTHING)
    click.echo(result.message)


@click.command("review")
@click.argument("agent", required=False)
@click.option("--list", "list_only", is_flag=True, help="List the pending proposals without asking.")
@click.pass_obj
@handled
def review_cmd(ctx: Ctx, agent: str | None, list_only: bool) -> None:
    """Approve or reject the memory edits waiting for review (reflect, run, mcp serve).

    \b
    Each proposal shows its diff, reason and origin, as /review in chat does;
    answer y = approve, n = reject, n: <feedback> = reject and say why (the next
    reflect run reads it), a = always: approve this one and all the rest.
    A proposal whose file changed in the lines it touches is a conflict: both
    sides are shown; r = re-propose (the next reflect run redoes it against the
    file as it is now), d = discard, s = skip. A conflict is never applied.
    """
    from memagent.agent.chat.review import work_through
    from memagent.agent.chat.ui import make_ui
    from memagent.agent.reflection import Review

    view = ctx.view(agent)
    queue = ctx.memory.queue
    reviewer = Review(view, queue)

    def echo(text: str, **kw: Any) -> None:
        # Proposals carry the model's text (diffs, reasons, paths): escaped for the terminal.
        click.echo(shown(text), **kw)

    pending = reviewer.pending()
    if not pending:
        echo(f"No proposals waiting for review for agent {view.agent!r}.")
        return
    if list_only:
        tags = {"fresh": "", "rebased": "  [file changed: re-based]",
                "conflict": "  [CONFLICT: file changed; re-propose or discard]", "stale": "  [already applied]"}
        for p in pending:
            # A long list of threads would push the state off the line: the first three, then a count.
            threads = ", ".join(t[:8] for t in p.threads[:3]) + (
                f" and {len(p.threads) - 3} more" if len(p.threads) > 3 else "")
            state = reviewer.check(p).state
            # Only reflection's proposals can be re-proposed (the next reflect run redoes them).
            tag = ("  [CONFLICT: file changed; discard it]" if state == "conflict" and not reviewer.can_repropose(p)
                   else tags[state])
            echo(f"#{p.id}  {p.op:<6} {p.shown}  {reviewer.source(p)}" + (f"  threads {threads}" if threads else "")
                 + (f"  — {p.reason}" if p.reason else "") + tag)
        echo(f"{len(pending)} pending; `memagent review {view.agent}` to decide.")
        return
    echo(f"{len(pending)} proposal(s) waiting for review for agent {view.agent!r}.")
    # The chat's own UI: the same approval panel and wording as /review (a terminal
    # gets the coloured box; a pipe the plain block, answers read line by line).
    ui = make_ui(commands={}, history_path=None)
    work_through(ui, view, queue)


@click.command("remember")
@click.argument("agent", required=False)
@click.argument("note", required=False, metavar="NOTE")
@click.option("--yolo", is_flag=True, help="Apply the agent's memory edits without asking.")
@click.option("--model", "model_name", default=None, metavar="M", help=MODEL_HELP)
@click.option("--base-url", "base_url", default=None, metavar="URL", help=BASE_URL_HELP)
@click.pass_obj
@handled
def remember_cmd(ctx: Ctx, agent: str | None, note: str | None, yolo: bool, model_name: str | None,
                 base_url: str | None) -> None:
    """Route NOTE through AGENT to the right memory file (AGENTS.md, a skill, or knowledge).

    With NOTE alone, the agent is the default one (-a, $MEMAGENT_AGENT, `memagent use`).

    The agent's edits show a diff and ask, as in chat (y, n, n: feedback, a);
    without a terminal the answers are read from standard input.
    """
    from memagent.agent.chat import slash
    from memagent.agent.chat.session import build_session
    from memagent.agent.chat.ui import make_ui
    from memagent.agent.cli import models
    from memagent.agent.context import budget_for
    from memagent.agent.reflection import note_prompt

    if note is None:  # one argument is the note, for the default agent (as other commands take)
        agent, note = None, agent
    if note is None:
        raise click.UsageError('give the NOTE to remember, e.g. memagent remember "Answer in French"')
    if not note.strip():
        raise click.BadParameter("the note is empty; give the text to remember", param_hint="NOTE")
    view = ctx.view(agent)
    name, opts = models.model_id(model_name), models.options(base_url)
    models.check_ready(name, opts, "remember")
    model = models.make(name, opts)
    ui = make_ui(commands={c.name: c.help for c in slash.COMMANDS.values()},
                 history_path=config.data_dir() / "chat_history")
    session = build_session(view, model, ui, threads=ctx.memory.threads, yolo=yolo,
                            model_factory=models.factory(name, opts),
                            context_budget=budget_for(models.context_window(name, opts)))
    try:
        result = session.run_turn(note_prompt(note), title="note: " + " ".join(note.split())[:50])
    finally:
        session.close()
    if result is None:
        sys.exit(1)
    if not session.log.made:
        click.echo("(memory unchanged)")
