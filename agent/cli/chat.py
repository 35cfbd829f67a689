"""``memagent chat``: the interactive session with an agent.

Invariants:
- Every failure before the session starts (unknown agent — said first —, a bad
  model id or unknown provider, a provider not set up (its own ``status()`` line),
  unknown thread) is one line on stderr and exit 1; a usage mistake
  (``--thread`` with ``--resume``) is exit 2; a session that ends by ``/exit`` or
  end of input exits 0, except a scripted one (stdin not a terminal) in which the model
  could not answer a turn: exit 1.
- The model is made by the registry only (``--model``, ``$MEMAGENT_MODEL``, a bare
  name is Claude; ``--base-url``); the prompt does not wait for a provider SDK: the
  client is built on a thread (``model.startup.BackgroundModel``) while the person
  types; a client that cannot be set up is a one-line error at the first message.
- The context budget's default is half the model's window when its provider knows
  it (an Ollama model's own window), else ``context.DEFAULT_BUDGET``.
- A resumed thread (``--resume``, ``--thread``) shows its last few turns.
- The UI is chosen by the terminal: a terminal gets prompt_toolkit + rich, anything
  else plain line-by-line text (see ``ui``).
- ``MEMAGENT_STREAM=0`` asks the model for whole answers instead of a stream (for
  proxies that do not pass server-sent events); the screen shows them the same way.
- SIGTERM and SIGHUP end the session like ``/exit`` (as ``SystemExit``), so the
  MCP servers it started are stopped rather than orphaned.
- Piped standard input is read as UTF-8 bytes, line by line, whatever the locale: a
  line that is not UTF-8 ends the session the same way, with one line naming it and
  exit 2 (turns before it are kept; a first line that is not leaves no thread).
"""

from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import BinaryIO, TextIO, cast

import click

from memagent.agent.cli import config, models
from memagent.agent.cli.common import Ctx, handled
from memagent.agent.cli.models import stream_enabled
from memagent.agent.context import DEFAULT_BUDGET, MIN_BUDGET, budget_for
from memagent.agent.loop import DEFAULT_MAX_STEPS as MAX_STEPS_DEFAULT
from memagent.agent.model import DEFAULT_MODEL as MODEL_DEFAULT

# The model client, the session and the UI are imported inside ``chat``: importing a
# provider SDK takes over a second, which every other command would pay otherwise.

__all__ = ["chat", "stream_enabled"]


def _exit_on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


EXIT_USAGE = 2


class _Utf8Lines:
    """Piped standard input as the plain UI reads it: lines of UTF-8, or the end of the session.

    The text stream Python gives decodes by the locale (C.UTF-8: surrogate escapes no
    database stores; others: an exception mid-session), so the bytes are decoded here.
    """

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._lines = 0

    def isatty(self) -> bool:
        return False

    def readline(self) -> str:
        data = self._raw.readline()
        self._lines += 1
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            click.echo(f"memagent: line {self._lines} of standard input is not UTF-8 text (byte "
                       f"0x{data[exc.start]:02x} at offset {exc.start}); the session ends here: "
                       "convert the input first, e.g. with iconv -f latin1 -t utf-8", err=True)
            raise SystemExit(EXIT_USAGE) from None


@click.command("chat")
@click.argument("agent", required=False)
@click.option("--thread", "thread_id", default=None, metavar="ID",
              help="Continue the thread with this id (a unique prefix is enough; `memagent threads` lists them).")
@click.option("--resume", is_flag=True, help="Continue the agent's most recent thread.")
@click.option("--yolo", is_flag=True,
              help="Apply memory edits without asking (each revision records 'yolo').")
@click.option("--model", "model_name", default=None, metavar="M",
              help=f"Model id, provider/model (default: $MEMAGENT_MODEL or {MODEL_DEFAULT}); "
                   "`memagent models` lists the providers.")
@click.option("--base-url", "base_url", default=None, metavar="URL",
              help="Where the model's API is (an OpenAI-compatible server, a proxy); "
                   "overrides the provider's own variable.")
@click.option("--max-steps", type=click.IntRange(min=1), default=MAX_STEPS_DEFAULT,
              show_default=True, help="Most tool steps the agent may take in one turn.")
@click.option("--context-budget", type=click.IntRange(min=MIN_BUDGET), default=None,
              envvar="MEMAGENT_CONTEXT_BUDGET", metavar="TOKENS",
              help="Most input tokens one request may hold; older turns fold into a running summary "
                   f"(env MEMAGENT_CONTEXT_BUDGET; default: half the model's window if known, "
                   f"else {DEFAULT_BUDGET}).")
@click.pass_obj
@handled
def chat(ctx: Ctx, agent: str | None, thread_id: str | None, resume: bool, yolo: bool,
         model_name: str | None, base_url: str | None, max_steps: int,
         context_budget: int | None) -> None:
    """Talk with AGENT (default: -a, $MEMAGENT_AGENT, `memagent use`, the only agent); it keeps what it learns.

    \b
    Type /help inside for the commands. Memory edits show a diff and ask:
    y = approve, n = reject, n: <feedback> = reject and say why, a = approve all.
    Without a terminal, turns and answers are read line by line from stdin.
    MEMAGENT_STREAM=0 asks the model for whole answers instead of a stream.
    """
    if thread_id and resume:
        raise click.UsageError("--thread and --resume cannot be used together; pick one")
    # A missing agent is the first thing to say, before a missing key.
    view = ctx.view(agent)
    name = models.model_id(model_name)
    opts = models.options(base_url)
    models.check_ready(name, opts, "chat")
    if context_budget is None:
        context_budget = budget_for(models.context_window(name, opts))
    # A provider SDK takes over a second to import: build the client on a thread
    # while the session starts and the person types.
    model = models.background(name, opts)

    from memagent.agent.chat import slash
    from memagent.agent.chat.session import build_session
    from memagent.agent.chat.ui import make_ui

    threads = ctx.memory.threads
    notes: list[str] = []
    tid: str | None = None
    if thread_id:
        tid = threads.get(view.agent, thread_id).id
    elif resume:
        tid = threads.latest(view.agent)
        if tid is None:
            notes.append("no earlier thread to resume; starting a new one")
    piped = None if sys.stdin.isatty() else cast(TextIO, _Utf8Lines(sys.stdin.buffer))
    ui = make_ui(commands={c.name: c.help for c in slash.COMMANDS.values()},
                 history_path=config.data_dir() / "chat_history", stdin=piped)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _exit_on_signal)
    if tid is None:
        where = "new thread"
    else:
        info = threads.get(view.agent, tid)
        count = f"{info.messages} message{'s' if info.messages != 1 else ''}"
        where = f"thread {tid[:8]} resumed ({count}: {info.title or 'untitled'})"
    waiting = ctx.memory.queue.count_pending(view.agent)
    if waiting:
        notes.append(f"{waiting} memory edit{'s' if waiting != 1 else ''} waiting for review: type /review")
    ui.header([
        f"memagent · agent {view.agent} · model {name} · {where}"
        + (" · yolo: edits are not asked, approval rules are off" if yolo else ""),
        ui.input_hint,
        *notes,
    ])
    # Connects the MCP servers of /tools.json (failures are one-line warnings).
    session = build_session(view, model, ui, threads=threads, thread_id=tid, yolo=yolo,
                            max_steps=max_steps, context_budget=context_budget,
                            model_factory=models.factory(name, opts))
    if tid is not None:
        session.show_recap()
    # Import the SDK while the person types: once the first prompt is up (the delay
    # lets it be drawn first; the import holds the GIL for long stretches).
    ui.on_first_prompt = lambda: model.start(delay=0.2)
    sys.exit(session.run())

