"""A click group whose sub-commands are imported only when they run.

Invariants:
- Running one command imports that command's module and nothing else of the CLI, so
  ``memagent fs cat`` never pays for the anthropic SDK, the export formats or the
  chat screen (start-up time is measured in ``bench/startup.py``).
- ``memagent --help`` lists every command with its one-line help without importing
  any of them: the table carries each command's one-line help, and
  ``tests/test_cli_lazy.py`` holds it equal to the command's own. So help costs
  click and nothing of the store (``tests/test_startup_imports.py``).
- A table entry is ``name -> ("module:attribute", one-line help)``; the attribute
  must be a ``click.Command`` whose short help is that line.
- An unknown command is a usage error (exit 2) that names the closest command, or the
  ``fs`` sub-command of that name (``memagent search`` -> ``fs search``).
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from typing import Any

import click


class LazyGroup(click.Group):
    """``click.Group`` over a table of commands imported on first use."""

    def __init__(self, *args: Any, lazy: Mapping[str, tuple[str, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, tuple[str, str]] = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            target = self.lazy[cmd_name][0]
            module, _, attr = target.partition(":")
            command = getattr(importlib.import_module(module), attr)
            if not isinstance(command, click.Command):  # pragma: no cover - a table mistake
                raise TypeError(f"{target} is not a click command")
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(self, ctx: click.Context,
                        args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            ctx.fail(self._no_such(ctx, name))
        return super().resolve_command(ctx, args)

    def _no_such(self, ctx: click.Context, name: str) -> str:
        """The message for an unknown command, with what the person probably meant."""
        said = f"No such command {name!r}."
        close = difflib.get_close_matches(name, self.list_commands(ctx), n=1, cutoff=0.6)
        if close:
            return f"{said} Did you mean {close[0]!r}?"
        fs = self.get_command(ctx, "fs") if "fs" in self.lazy or "fs" in self.commands else None
        if isinstance(fs, click.Group) and name in fs.list_commands(ctx):
            return f"{said} Did you mean 'fs {name}'?"
        return f"{said} `{ctx.command_path} --help` lists the commands."

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing, with a command not yet imported described by its table line."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows: list[tuple[str, str]] = []
        for name in names:
            loaded = self.commands.get(name)
            if loaded is None:
                rows.append((name, click.Command(name, help=self.lazy[name][1]).get_short_help_str(limit)))
            elif not loaded.hidden:
                rows.append((name, loaded.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)
