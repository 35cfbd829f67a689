"""What every CLI command shares: the store it opens and how errors become one line.

Invariant: a user mistake never prints a traceback; ``run`` turns known errors into
``memagent: <message>`` on stderr with exit status 1 (click keeps 2 for usage).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click
from sqlalchemy.exc import SQLAlchemyError

from memagent.agent.cli import config
from memagent.vfs import SqlStore, open_store
from memagent.vfs.errors import VfsError
from memagent.vfs.scopes import AgentView

F = TypeVar("F", bound=Callable[..., Any])


class Ctx:
    """Lazily opened store, shared by the commands of one invocation."""

    def __init__(self, db: str | None) -> None:
        self.db_option = db
        self._store: SqlStore | None = None

    @property
    def url(self) -> str:
        return config.db_url(self.db_option)

    @property
    def store(self) -> SqlStore:
        if self._store is None:
            self._store = open_store(self.url)
        return self._store

    def view(self, agent: str | None) -> AgentView:
        name = config.agent_name(agent)
        self.store.require_agent(name)
        return AgentView(self.store, name, user=config.user_id(), org=config.org_id())


def fail(message: str) -> NoReturn:
    click.echo(f"memagent: {message}", err=True)
    sys.exit(1)


def handled(fn: F) -> F:
    """Run a command, turning user-facing errors into one line and exit 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except VfsError as exc:
            # Validation errors carry a summary line plus one line per problem.
            fail(str(exc))
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
    help="Agent whose memory to use (default: $MEMAGENT_AGENT or 'default').",
)


def memory_command(group: click.Group, name: str,
                   *params: Callable[[F], F]) -> Callable[[Callable[..., None]], click.Command]:
    """``group.command(name)`` for a command on one agent's memory.

    Adds ``params`` (click arguments and options, in the order given), then
    ``--agent``; the function receives the ``Ctx`` first, and its user-facing
    errors become one line (``handled``).
    """

    def wrap(fn: Callable[..., None]) -> click.Command:
        decorated: Any = click.pass_obj(handled(fn))
        decorated = agent_option(decorated)
        for param in reversed(params):
            decorated = param(decorated)
        return group.command(name)(decorated)

    return wrap
