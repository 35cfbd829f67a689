"""A click group whose sub-commands are imported only when they run.

Invariants:
- Running one command imports that command's module and nothing else of the CLI, so
  ``memagent fs cat`` never pays for the anthropic SDK, the export formats or the
  chat screen (start-up time is measured in ``bench/startup.py``).
- ``memagent --help`` (and a mistyped command's suggestions) still list every
  command with its one-line help: listing imports them all, which only help pays.
- A table entry is ``name -> "module:attribute"``; the attribute must be a
  ``click.Command`` whose name is the entry's name.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import click


class LazyGroup(click.Group):
    """``click.Group`` over a table of commands imported on first use."""

    def __init__(self, *args: Any, lazy: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, str] = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, _, attr = self.lazy[cmd_name].partition(":")
            command = getattr(importlib.import_module(module), attr)
            if not isinstance(command, click.Command):  # pragma: no cover - a table mistake
                raise TypeError(f"{self.lazy[cmd_name]} is not a click command")
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)
