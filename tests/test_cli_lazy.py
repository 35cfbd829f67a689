"""The CLI's lazy command table (``agent/cli/lazy.py``): help without imports, kept true.

``memagent --help`` lists each command from the table's one-line help, so the line in
the table must say what the command's own help says; a command added or reworded
without updating the table fails here.
"""

from __future__ import annotations

import click
from click.testing import CliRunner

from memagent.agent.cli.main import COMMANDS, main


def test_each_table_line_is_the_commands_own_short_help() -> None:
    ctx = click.Context(main)
    for name, (_, line) in COMMANDS.items():
        command = main.get_command(ctx, name)
        assert command is not None, name
        assert command.name == name
        assert command.get_short_help_str(limit=10**6) == line, name


def test_help_lists_the_same_rows_before_and_after_the_commands_are_imported() -> None:
    listing = CliRunner().invoke(main, ["--help"]).output
    assert all(f"  {name} " in listing for name in COMMANDS)
    fresh = type(main)(name=main.name, lazy=COMMANDS, help=main.help, params=main.params, callback=main.callback)
    ctx = click.Context(fresh)
    for name in COMMANDS:
        fresh.get_command(ctx, name)  # imports every command, as the old listing did
    loaded = CliRunner().invoke(fresh, ["--help"]).output
    assert loaded.partition("Commands:")[2] == listing.partition("Commands:")[2]
