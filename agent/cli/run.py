"""``memagent run``: one agent turn without a person, for scripts and cron.

Invariants:
- It never reads the terminal. The task is the argument, or standard input when
  no task is given (or ``-``); no question is ever asked: where chat would ask a
  person, the unattended policy applies (``--unattended``, by default ``queue``:
  the edit waits in the review queue for ``memagent review``).
- The agent's approval rules (``vfs/records/rules.py``) decide first, exactly as
  in chat; ``--yolo`` overrides them and says so on stderr.
- Standard output holds the final answer only (or, with ``--json``, one JSON
  object: the answer, the tool calls, the memory changes with their versions, the
  proposals queued, which approval rule decided what, the usage). One summary line of what happened to memory goes
  to stderr.
- Exit status: 0 when the turn ended (edits applied, queued or refused by a rule
  all count: the model was told), 1 when the model or a tool failed (the request
  failed, the turn stopped early), 2 on a usage mistake: click's, an empty task, an
  agent or ``--thread`` that does not exist, a model that is unknown or not set up
  (a script must be able to tell "fix the command" from "try again later").
- The task must be UTF-8 (on standard input or as an argument): anything else is
  refused in one line (exit 2) before a thread exists or the model is asked; nothing
  is decoded by guesswork.
- Each run is a new thread unless ``--thread ID`` or ``--resume`` (the newest
  thread) continues one; the thread id is in the JSON and on stderr.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any, Literal, NoReturn

import click

from memagent.agent.cli.common import Ctx, cli_words, handled
from memagent.agent.cli.reflect import BASE_URL_HELP, MODEL_HELP
from memagent.vfs import DatabaseUnavailable, VfsError, shown

Unattended = Literal["queue", "deny"]
# Turn endings that are a finished answer; anything else (step_limit, interrupted) is a failure.
FINISHED = frozenset({"end_turn", "max_tokens", "stop_sequence"})
EXIT_USAGE = 2


def _split(args: tuple[str, ...], existing: list[str]) -> tuple[str | None, str | None]:
    """``[AGENT] [TASK]`` as (agent, task); task None: read it from standard input."""
    if len(args) > 2:
        raise click.UsageError("give at most AGENT and one TASK; quote the task: memagent run notes \"...\"")
    if len(args) == 2:
        return args[0], None if args[1] == "-" else args[1]
    if len(args) == 1:
        if args[0] == "-":
            return None, None
        # One word that names an agent, with the task coming on a pipe: AGENT.
        if args[0] in existing and not sys.stdin.isatty():
            return args[0], None
        return None, args[0]
    return None, None


def _check_task(task: str) -> str:
    if not task.strip():
        raise click.UsageError("the task is empty; give the task as an argument or pipe it in")
    try:
        task.encode("utf-8")
    except UnicodeEncodeError as exc:  # bytes that were not UTF-8, as the locale's decoding escaped them
        _usage(f"the task is not UTF-8 text (character {exc.start}); nothing was run: "
               "write it in UTF-8 or pipe it through iconv -t utf-8")
    return task


def _usage(message: str) -> NoReturn:
    click.echo(f"memagent: {shown(message)}", err=True)
    sys.exit(EXIT_USAGE)


def _read_task() -> str:
    if sys.stdin.isatty():
        raise click.UsageError("no task: give it as an argument or on standard input "
                               "(memagent run never reads the terminal)")
    # Bytes, decoded here: the stream's own decoding depends on the locale (C.UTF-8 gives
    # surrogate escapes that no database stores, other locales a traceback).
    data = sys.stdin.buffer.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        _usage(f"standard input is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
               "nothing was run: convert it first, e.g. with iconv -f latin1 -t utf-8")
    if not text.strip():
        raise click.UsageError("the task on standard input is empty; give the task as an argument or pipe it in")
    return text


@click.command("run", context_settings={"ignore_unknown_options": False})
@click.argument("args", nargs=-1, metavar="[AGENT] [TASK]")
@click.option("--thread", "thread_id", default=None, metavar="ID", help="Continue this thread (an id or its prefix).")
@click.option("--resume", is_flag=True, help="Continue the agent's newest thread.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object: answer, tool calls, memory changes, queued proposals, usage.")
@click.option("--unattended", type=click.Choice(["queue", "deny"]), default="queue", show_default=True,
              help="What an edit that would ask a person gets: queued for `memagent review`, or refused.")
@click.option("--yolo", is_flag=True, help="Apply every edit without rules or review (said on stderr).")
@click.option("--max-steps", type=click.IntRange(min=1), default=25, show_default=True,
              help="Most tool steps the agent may take.")
@click.option("--model", "model_name", default=None, metavar="M", help=MODEL_HELP)
@click.option("--base-url", "base_url", default=None, metavar="URL", help=BASE_URL_HELP)
@click.pass_obj
@handled
def run_cmd(ctx: Ctx, args: tuple[str, ...], thread_id: str | None, resume: bool, as_json: bool,
            unattended: Unattended, yolo: bool, max_steps: int, model_name: str | None,
            base_url: str | None) -> None:
    """Run one turn of AGENT on TASK without a person: for scripts and cron.

    \b
    The task is the argument, or standard input (no task, or -). The answer goes
    to stdout (--json: everything as one object). Nothing is ever asked: the
    approval rules decide (`memagent approval list AGENT`), and an edit that would
    ask a person is queued for `memagent review` (--unattended deny refuses it).
    Exit status: 0 done, 1 the model or a tool failed, 2 usage mistake.
    """
    if thread_id and resume:
        raise click.UsageError("--thread and --resume cannot be used together; pick one")
    agent, task = _split(args, ctx.existing_store.list_agents() if len(args) == 1 else [])
    task = _read_task() if task is None else _check_task(task)
    try:
        view = ctx.view(agent)
    except DatabaseUnavailable:
        raise
    except VfsError as exc:  # no such agent (or no database yet): the command names the wrong thing
        _usage(cli_words(str(exc)))

    from memagent.agent.builder import build_agent
    from memagent.agent.cli import models
    from memagent.agent.context import budget_for
    from memagent.agent.gate import Gate
    from memagent.agent.loop import Hooks
    from memagent.agent.mcp.client import McpHub
    from memagent.agent.model import ModelError
    from memagent.agent.tools import ToolResult
    from memagent.agent.tools.memory import agent_rules

    threads = ctx.memory.threads
    tid: str | None = None
    if thread_id:
        try:
            tid = threads.get(view.agent, thread_id).id
        except DatabaseUnavailable:
            raise
        except VfsError as exc:
            _usage(str(exc))
    elif resume:
        tid = threads.latest(view.agent)
    name, opts = models.model_id(model_name), models.options(base_url)
    models.check_ready(name, opts, "run", exit_status=EXIT_USAGE)
    model = models.make(name, opts, exit_status=EXIT_USAGE)
    if yolo:
        click.echo("memagent: --yolo: approval rules and review are off; every memory edit is applied", err=True)

    calls: list[dict[str, Any]] = []

    def on_call(tool: str, tool_args: dict[str, Any]) -> None:
        calls.append({"name": tool, "input": tool_args})

    def on_result(tool: str, result: ToolResult) -> None:
        for call in reversed(calls):
            if call["name"] == tool and "result" not in call:
                call["result"], call["is_error"] = result.content, result.is_error
                break

    hooks = Hooks(on_tool_call=on_call, on_tool_result=on_result)
    queue = ctx.memory.queue
    decided: list[str] = []  # which approval rule decided each edit or call, in order
    rules = agent_rules(view, queue, by="memagent run", unattended=unattended, heard=decided.append)
    hub = McpHub()
    failure = ""
    try:
        agent_ = build_agent(view, model, gate=Gate(None, yolo=yolo), threads=threads, thread_id=tid, hooks=hooks,
                             max_steps=max_steps, model_factory=models.factory(name, opts), mcp_hub=hub,
                             warn=lambda text: click.echo(f"memagent: {shown(text)}", err=True), rules=rules)
        agent_.context.budget = budget_for(models.context_window(name, opts))
        try:
            result = agent_.turn(task)
        except ModelError as exc:
            result = None
            failure = f"the model request failed: {exc}; nothing more was done"
    finally:
        hub.close()
    log = agent_.memory.log
    made = list(log.made)  # the agent's and its subagents' (they share the log)
    stopped = result.stopped if result is not None else "error"
    if result is not None and stopped not in FINISHED:
        failure = (f"the turn stopped early ({stopped}); let it go on with `memagent run {view.agent} "
                   f"--thread {agent_.thread_id} continue` (or read it: `memagent chat {view.agent} "
                   f"--thread {agent_.thread_id}`)")
    queued = [{"proposal": pid, "op": op, "path": path} for pid, op, path in log.queued]
    if as_json:
        usage = asdict(result.usage) if result is not None else {}
        click.echo(json.dumps({
            "agent": view.agent, "thread": agent_.thread_id, "answer": result.text if result else "",
            "stopped": stopped, "error": failure or None, "tool_calls": calls,
            "changes": [{"path": c.path, "version": c.version, "deleted": c.after is None} for c in made],
            "queued": queued, "decided_by": decided, "usage": usage, "cost_usd": result.cost_usd if result else None,
        }, ensure_ascii=False))
    elif result is not None:
        click.echo(shown(result.text))
    summary = (f"{len(made)} memory edit(s) applied, {len(queued)} queued for review"
               + (f" (`memagent review {view.agent}`)" if queued else "") + f"; thread {agent_.thread_id}")
    click.echo(f"memagent: {summary}", err=True)
    if failure:
        click.echo(f"memagent: {shown(failure)}", err=True)
        sys.exit(1)

