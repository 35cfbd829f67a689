"""What every CLI command shares: the memory it opens and how errors become one line.

Invariants: a command opens its database once (``Ctx``: one ``Memory``, whose
``files`` is ``Ctx.store``; its threads, review queue and approval rules come from
``Ctx.memory``, never built by hand) and closes it once. A user mistake never
prints a traceback; ``run`` turns known errors into ``memagent: <message>`` on
stderr with exit status 1 (click keeps 2 for usage).
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click
from sqlalchemy.exc import SQLAlchemyError

from memagent.agent.cli import config
from memagent.vfs import (
    AgentNotFound,
    AgentView,
    DatabaseMissing,
    InvalidPattern,
    Memory,
    SqlStore,
    VfsError,
    no_agent_message,
    open_memory,
    shown,
)

F = TypeVar("F", bound=Callable[..., Any])


class Ctx:
    """The memory of one invocation, opened lazily, once, and shared by its commands.

    ``store`` creates a missing SQLite database (for ``init``, ``db upgrade``,
    ``import``); ``existing_store``, ``memory`` and ``view`` refuse one, creating
    nothing: a command on an agent's memory cannot succeed on a database that is not
    there. Whichever opens first opens the one ``Memory``; the others return it (or
    its ``files``, the store), and ``close`` closes it.
    """

    def __init__(self, db: str | None, agent: str | None = None) -> None:
        self.db_option = db
        self.agent_option = agent  # ``memagent -a AGENT <command>``
        self._memory: Memory | None = None

    @property
    def url(self) -> str:
        return config.db_url(self.db_option)

    def open(self, *, create: bool) -> SqlStore:
        return self._open(create=create).files

    def _open(self, *, create: bool) -> Memory:
        if self._memory is None:
            self._memory = open_memory(self.url, create=create)
        return self._memory

    @property
    def store(self) -> SqlStore:
        return self.open(create=True)

    @property
    def memory(self) -> Memory:
        """The invocation's ``Memory`` (threads, review queue, approval rules over the
        store's database); opened like ``existing_store`` if nothing opened it yet."""
        return self._open(create=False)

    def close(self) -> None:
        """Close the memory if a command opened it: its pending index work is merged
        (``vfs/pending.py``) and its connections closed before the process ends."""
        if self._memory is not None:
            self._memory.close()
            self._memory = None

    @property
    def existing_store(self) -> SqlStore:
        return self.open(create=False)

    def agent_name(self, agent: str | None) -> str:
        """The sub-command's agent, the group's ``-a``, ``MEMAGENT_AGENT``, ``memagent use``;
        else the only agent there is; else ``default``."""
        chosen = config.chosen_agent(agent or self.agent_option)
        if chosen is not None:
            return chosen[0]
        names = self.existing_store.list_agents()
        if len(names) == 1:
            return names[0]
        if len(names) > 1 and config.DEFAULT_AGENT not in names:
            shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            raise VfsError(f"which agent? there are {len(names)} ({shown}); pick one with "
                           "`memagent use AGENT` or -a AGENT")
        return config.DEFAULT_AGENT

    def view(self, agent: str | None) -> AgentView:
        chosen = config.chosen_agent(agent or self.agent_option)
        try:
            store = self.existing_store
        except DatabaseMissing:
            if chosen is None:
                raise
            # No database yet: the agent is what is missing, and init creates both.
            raise AgentNotFound(no_agent_message(chosen[0])) from None
        name = self.agent_name(agent)
        store.require_agent(name)
        return AgentView(store, name, user=config.user_id(), org=config.org_id())


def program() -> tuple[str, str | None]:
    """How to type this ``memagent`` again from this shell, and the command that puts it
    on PATH (a virtualenv's ``activate``) when it is not there already."""
    argv0 = sys.argv[0]
    if os.path.basename(argv0) != "memagent":
        return "memagent", None  # started some other way (python -m ...)
    on_path = shutil.which("memagent")
    if on_path and os.path.realpath(on_path) == os.path.realpath(argv0):
        return "memagent", None
    full = os.path.abspath(argv0)
    rel = os.path.relpath(full)
    shown = full if rel.startswith("..") else rel if "/" in rel else "./" + rel
    activate = os.path.join(os.path.dirname(shown), "activate")
    return shlex.quote(shown), (f"source {shlex.quote(activate)}" if os.path.isfile(activate) else None)


# Errors written for the model name its tool parameters; a person at the command line
# gets the same advice in the CLI's words (longest phrases first).
CLI_WORDS: tuple[tuple[str, str], ...] = (
    ("pass fixed_strings=true", "pass -F"),
    ("fixed_strings=true", "-F"),
    ("set replace_all to replace every occurrence", "pass --all to replace every occurrence"),
    ("old_string and new_string", "OLD_STRING and NEW_STRING"),
    ("old_string", "OLD_STRING"),
    ("new_string", "NEW_STRING"),
    ("use write_file to rewrite a file", "use `memagent fs write` to rewrite a file"),
    ("Read a hit with read_file", "Read a hit with `memagent fs cat PATH`"),
    ("read_file it first", "read it first (`memagent fs cat`)"),
    ("use ls or glob to find the right path", "`memagent fs ls` or `memagent fs glob` finds the right path"),
    ("use glob to find the right path", "`memagent fs glob` finds the right path"),
    ("output_mode", "--mode"),
    ("case_insensitive=true", "-i"),
)


def cli_words(message: str) -> str:
    """``message`` with the model's tool parameters replaced by the CLI's options."""
    for model_word, cli_word in CLI_WORDS:
        message = message.replace(model_word, cli_word)
    return message


def fail(message: str, *, status: int = 1) -> NoReturn:
    # Error text can quote what the model or a file sent: escaped for the terminal.
    click.echo(f"memagent: {shown(message)}", err=True)
    sys.exit(status)


def handled(fn: F) -> F:
    """Run a command, turning user-facing errors into one line and exit 1 (2 for a bad pattern)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InvalidPattern as exc:
            # A pattern the person typed is wrong: a usage mistake (2), as grep says, so a
            # script never mistakes it for "no match" (1).
            fail(cli_words(str(exc)), status=2)
        except VfsError as exc:
            # Validation errors carry a summary line plus one line per problem.
            fail(cli_words(str(exc)))
        except SQLAlchemyError as exc:
            # The database went away or refused mid-command (connection errors at
            # start are already DatabaseUnavailable): one line, not a traceback.
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            fail(f"database error: {reason}; check --db / MEMAGENT_DB and that the server is running")
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


agent_option = click.option(
    "--agent", "-a", "agent", default=None, metavar="AGENT",
    help="Agent whose memory to use (default: $MEMAGENT_AGENT, then `memagent use`, then the only agent).",
)


def memory_command(group: click.Group, name: str, *params: Callable[[F], F],
                   dash_arguments: bool = False) -> Callable[[Callable[..., None]], click.Command]:
    """``group.command(name)`` for a command on one agent's memory.

    Adds ``params`` (click arguments and options, in the order given), then
    ``--agent``; the function receives the ``Ctx`` first, and its user-facing
    errors become one line (``handled``). ``dash_arguments``: a word that starts with
    ``-`` but is no option of the command is an argument (``fs edit PATH "- old" "- new"``:
    most memory lines start with "- "); a mistyped option then shows as an extra argument.
    """

    def wrap(fn: Callable[..., None]) -> click.Command:
        decorated: Any = click.pass_obj(handled(fn))
        decorated = agent_option(decorated)
        for param in reversed(params):
            decorated = param(decorated)
        settings = {"ignore_unknown_options": True} if dash_arguments else {}
        return group.command(name, context_settings=settings)(decorated)

    return wrap
