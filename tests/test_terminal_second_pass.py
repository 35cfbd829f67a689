"""Issue 29, the terminal's second pass (part B): what the command line and the
approval panel show. Each case runs the real ``memagent`` command: through the CLI
(a subprocess, stdout and stderr as a person sees them), and the approval panel in a
pseudo-terminal 80 columns wide against ``FakeMessagesAPI``."""

from __future__ import annotations

import inspect
import io
import json
import os
import re
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.fake_messages_api import FakeMessagesAPI
from memagent.agent.cli import config
from memagent.agent.model.anthropic_client import AnthropicModel
from memagent.agent.model.providers import openai_compat
from memagent.vfs import SqlStore, open_store
from memagent.vfs.grep.globbing import compile_glob, glob_matcher
from memagent.vfs.grep.regex_sets import unambiguous
from memagent.vfs.scopes import AgentView
from tests.cli_helpers import MEMAGENT, err, out, run
from tests.pty_helpers import Screen

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")

pytestmark = pytest.mark.usefixtures("chat_env")


@pytest.fixture
def bot() -> Iterator[SqlStore]:
    """Agent ``bot`` in the database the CLI uses (MEMAGENT_HOME's SQLite file)."""
    s = open_store(config.db_url())
    s.create_agent("bot", {"/AGENTS.md": "", "/notes/[ab.md": "a [x\nb\n", "/notes/plain.md": "hi\n"})
    yield s
    s.close()


def keyed(api: FakeMessagesAPI) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.base_url}


# -- 1: --help -------------------------------------------------------------------------------


def test_help_shows_the_quick_start_line_by_line_within_80_columns() -> None:
    p = run("--help", env={"COLUMNS": "80"})
    assert p.returncode == 0, err(p)
    text = out(p)
    assert "\\b" not in text and "\b" not in text
    lines = text.splitlines()
    start = lines.index("  Quick start:")
    # Each example is a line of its own, as written (click did not re-wrap them).
    assert lines[start + 1].strip().startswith("memagent init myagent")
    assert lines[start + 2].strip().startswith("memagent chat myagent")
    # It appends (issue 43, item 12): the quick start no longer replaces AGENTS.md.
    assert lines[start + 4].strip() == 'echo "- Use bullet points." | memagent fs write /AGENTS.md --append'
    assert max(len(line) for line in lines) <= 80, text


def test_tools_help_is_dedented_and_ends_with_the_example() -> None:
    p = run("tools", "--help", env={"COLUMNS": "80"})
    assert p.returncode == 0, err(p)
    text = out(p)
    assert "\n  Every declared server is started" in text  # the docstring's own indent is gone
    assert "tools     each" not in text
    assert '\n  {\n    "mcp_servers": {' in text


@pytest.mark.parametrize("command", [[], ["tools"], ["models"], ["threads"], ["fs", "grep"], ["fs", "glob"]])
def test_help_fits_80_columns(command: list[str]) -> None:
    p = run(*command, "--help", env={"COLUMNS": "80"})
    assert p.returncode == 0, err(p)
    assert max(len(line) for line in out(p).splitlines()) <= 80, out(p)


def _every_command() -> list[list[str]]:
    import click

    from memagent.agent.cli.main import main

    ctx = click.Context(main)

    def walk(group: click.Group, prefix: list[str]) -> list[list[str]]:
        found: list[list[str]] = []
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            found.append([*prefix, name])
            if isinstance(cmd, click.Group):
                found += walk(cmd, [*prefix, name])
        return found

    return walk(main, [])


def test_every_commands_help_fits_80_columns() -> None:
    """In process (39 commands, one process each would be slow); a new command is covered by itself."""
    from click.testing import CliRunner

    from memagent.agent.cli.main import main

    commands = _every_command()
    assert ["run"] in commands and ["approval", "add"] in commands  # the walk reaches subcommands
    runner = CliRunner()
    for command in commands:
        result = runner.invoke(main, [*command, "--help"], terminal_width=80, env={"COLUMNS": "80"})
        assert result.exit_code == 0, (command, result.output)
        widest = max(result.output.splitlines(), key=len)
        assert len(widest) <= 80, (command, widest)


# -- 3: commands that need a model ------------------------------------------------------------


@pytest.mark.parametrize("command", [["reflect", "bot"], ["remember", "bot", "Use short answers."]])
def test_reflect_and_remember_without_a_key_say_what_to_set_for_themselves(
        bot: SqlStore, command: list[str]) -> None:
    p = run(*command)
    assert p.returncode == 1
    assert err(p).strip() == ("memagent: no API key: set one with `export ANTHROPIC_API_KEY=...` and run "
                              f"`memagent {command[0]}` again")
    # ...and the README does not claim it works without a model: the sentence that
    # says which commands need one names it.
    flat = " ".join(README.split())
    needing = re.search(r"`memagent chat`([^.]*?) need a model[^.]*every other command works without one", flat)
    assert needing is not None, "README's sentence about which commands need a model is gone"
    assert f"`{command[0]}`" in needing.group(1)


# -- 4: retries --------------------------------------------------------------------------------


def test_readme_states_the_retry_count_the_providers_use() -> None:
    said = re.search(r"is tried up to (\d+) times in all", " ".join(README.split()))
    assert said is not None, "README's sentence about failed requests is gone"
    anthropic_retries = inspect.signature(AnthropicModel.__init__).parameters["max_retries"].default
    assert int(said.group(1)) == anthropic_retries + 1 == openai_compat.DEFAULT_MAX_RETRIES + 1
    assert "is sent once" not in README


# -- 5: no FutureWarning for "[[" ----------------------------------------------------------------


def test_glob_and_grep_with_nested_brackets_print_no_warning(bot: SqlStore) -> None:
    p = run("fs", "glob", "-a", "bot", "**/[[a-z]*.md")
    assert (p.returncode, err(p)) == (0, "")
    assert out(p).split() == ["/notes/[ab.md", "/notes/plain.md"]  # not /AGENTS.md: A is not in [a-z]
    p = run("fs", "grep", "-a", "bot", "[[x]")
    assert (p.returncode, err(p)) == (0, "")
    assert out(p).strip() == "/notes/[ab.md:1:a [x"
    p = run("fs", "grep", "-a", "bot", "-c", "[a&&b]")
    assert (p.returncode, err(p)) == (0, "")
    assert out(p).strip() == "/notes/[ab.md:2"


def test_grep_with_nested_brackets_on_each_database(backend_url: str) -> None:
    # Postgres filters with its own translation of the pattern (vfs/grep/prefilter.py).
    s = open_store(backend_url)
    s.create_agent("bot", {"/AGENTS.md": "", "/notes/n.md": "a [x\nb\n"})
    s.close()
    p = run("--db", backend_url, "fs", "grep", "-a", "bot", "[[x]")
    assert (p.returncode, err(p), out(p)) == (0, "", "/notes/n.md:1:a [x\n")


@pytest.mark.parametrize("pattern", [
    "[[a]", "[[a-z]*", "[^[]", "[]a[]", "[a&&b]", "[a||b]", "[a~~b]", "[+--]", "[a--]", "[--a]",
    "x[[y]|[[z]", r"\[[[]", "(?#[[)[[q]", "(?x)[[a] # [[b", "[\\]]", "a[", "[[", "([[a]",
])
def test_unambiguous_means_exactly_the_same(pattern: str) -> None:
    import re._parser as sre_parse

    rewritten = unambiguous(pattern, re.MULTILINE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            before = sre_parse.parse(pattern, re.MULTILINE)
        except re.error:
            assert rewritten == pattern  # the caller's compile reports it, as before
            return
    assert repr(sre_parse.parse(rewritten, re.MULTILINE).data) == repr(before.data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sre_parse.parse(rewritten, re.MULTILINE)  # nothing to warn about any more (re.compile caches)


def test_glob_classes_with_brackets_match_as_before() -> None:
    for glob, path, expected in [("[[a-z]*.md", "[x.md", True), ("[[a-z]*.md", "q.md", True),
                                 ("[[a-z]*.md", "Q.md", False), ("[!a[]*", "[b", False)]:
        assert bool(compile_glob(glob).match(path)) is expected
        assert glob_matcher(glob).match(path) is expected


def test_a_bad_glob_class_is_named_without_a_position_in_another_pattern(bot: SqlStore) -> None:
    p = run("fs", "glob", "-a", "bot", "**/[z-a]*")
    assert p.returncode == 2  # a usage mistake, never the "no match" of exit 1
    assert err(p).strip() == "memagent: glob '**/[z-a]*' is not valid: bad character range z-a; fix the [...] class"


def test_grep_refuses_a_posix_class_with_the_python_spelling(bot: SqlStore) -> None:
    p = run("fs", "grep", "-a", "bot", "[[:space:]]x")
    assert p.returncode == 2  # as grep: 2 for an error, 1 only for no match
    assert err(p).strip() == ("memagent: grep pattern '[[:space:]]x' uses the POSIX class [:space:], which "
                              "Python regular expressions do not have; write \\s instead")


def test_an_invalid_grep_pattern_exits_2_never_the_no_match_1(bot: SqlStore) -> None:
    bad = run("fs", "grep", "-a", "bot", "(")
    assert bad.returncode == 2 and out(bad) == "" and len(err(bad).splitlines()) == 1
    assert "is not a valid Python regular expression" in err(bad) and "pass -F" in err(bad)
    literal = run("fs", "grep", "-a", "bot", "-F", "(")
    assert literal.returncode == 1 and err(literal) == ""  # valid, nothing matched


# -- 6: memagent tools -------------------------------------------------------------------------------


def test_tools_names_a_remote_server_by_its_url_once(bot: SqlStore) -> None:
    tools = {"mcp_servers": {"docs": {"type": "http", "url": "http://127.0.0.1:9/mcp"}},
             "tools": [{"server": "docs", "name": "get_page"}]}
    AgentView(bot, "bot").write("/tools.json", json.dumps(tools), author="cli", approval="cli")
    p = run("tools", "bot", "--timeout", "5")
    assert p.returncode == 0, err(p)
    assert "\n  http: http://127.0.0.1:9/mcp\n" in out(p)
    p = run("tools", "bot", "--timeout", "5", "--json")
    assert json.loads(out(p))["servers"][0]["where"] == "http://127.0.0.1:9/mcp"


# -- 9: validation errors, thread ids, fs grep -n ---------------------------------------------------


def test_the_frontmatter_example_is_indented_under_its_message(bot: SqlStore) -> None:
    p = run("fs", "write", "-a", "bot", "/skills/x/SKILL.md", stdin="no frontmatter\n")
    assert p.returncode == 1
    lines = err(p).splitlines()
    at = next(i for i, line in enumerate(lines) if line.endswith("For example:"))
    example = lines[at + 1:]
    assert example[0] == "    ---" and example[1] == "    name: x"
    assert all(line.startswith("    ") for line in example if line), err(p)


def test_an_unknown_thread_points_to_a_command_that_exists_here(api: FakeMessagesAPI, bot: SqlStore) -> None:
    api.enqueue_text("hello back")
    p = run("chat", "bot", stdin="hello there, bot\n", env=keyed(api))
    assert p.returncode == 0, err(p)
    p = run("chat", "bot", "--thread", "zz", env=keyed(api))
    assert p.returncode == 1
    assert err(p).strip() == ("memagent: no thread of agent 'bot' matches id 'zz'; `memagent threads bot` "
                              "lists them (/threads in chat)")
    # ...and that command lists the thread, with the id --thread takes.
    p = run("threads", "bot")
    assert p.returncode == 0, err(p)
    first, last = out(p).splitlines()
    tid = first.split()[0]
    assert "1 message" in first or "2 messages" in first, first
    assert last == "Continue one with `memagent chat bot --thread ID`."
    api.enqueue_text("still here")
    p = run("chat", "bot", "--thread", tid, stdin="and again\n", env=keyed(api))
    assert p.returncode == 0, err(p)
    assert f"thread {tid} resumed" in out(p)


def test_threads_of_an_agent_without_any() -> None:
    store = open_store(config.db_url())
    store.create_agent("quiet")
    store.close()
    p = run("threads", "quiet")
    assert (p.returncode, out(p).strip()) == (0, "Agent quiet has no threads yet; `memagent chat quiet` starts one.")


@pytest.mark.parametrize("flags", [["-n"], ["-rn"], ["-R"], ["--line-number"]])
def test_fs_grep_takes_greps_habits(bot: SqlStore, flags: list[str]) -> None:
    plain = run("fs", "grep", "-a", "bot", "hi")
    p = run("fs", "grep", *flags, "-a", "bot", "hi")
    assert (p.returncode, err(p)) == (0, "")
    assert out(p) == out(plain) == "/notes/plain.md:1:hi\n"


# -- 9: the approval panel at 80 columns ---------------------------------------------------------------


def test_a_wrapped_diff_line_keeps_its_marker_at_80_columns(api: FakeMessagesAPI, bot: SqlStore) -> None:
    pexpect = pytest.importorskip("pexpect")
    if sys.platform == "win32":  # pragma: no cover
        pytest.skip("needs a POSIX pseudo-terminal")
    long_line = " ".join(f"word{i:02d}" for i in range(40))  # about 280 columns
    api.enqueue_tool_use("write_file", {"file_path": "/notes/long.md", "content": f"short\n{long_line}\n"})
    api.enqueue_text("saved")
    other = " ".join(f"more{i:02d}" for i in range(40))
    api.enqueue_tool_use("edit_file", {"file_path": "/notes/long.md", "old_string": "short\n",
                                       "new_string": f"short\n{other}\n"})
    api.enqueue_text("added")
    env = {**os.environ, **keyed(api), "TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1"}
    screen = Screen(pexpect.spawn(MEMAGENT, ["chat", "bot"], env=env, dimensions=(50, 80),
                                  encoding="utf-8", timeout=30))
    pos = screen.wait_for("bot>")
    screen.type("keep this")
    start = screen.wait_for("Approve?", after=pos)
    panel = screen.text[pos:start]
    rows = [row for row in panel.split("\n") if "word" in row]
    assert len(rows) >= 4, panel  # the line did wrap
    assert all(row.startswith("│ +word") for row in rows), panel
    assert all(len(row) <= 80 for row in rows), panel
    # Every word is on screen once, in order: wrapping lost nothing.
    words = [w for row in rows for w in re.findall(r"word\d\d", row)]
    assert words == [f"word{i:02d}" for i in range(40)]
    screen.type("a")  # always: the next edit is applied and shown as a compact diff
    pos = screen.wait_for("saved", after=start)
    screen.type("add more")
    end = screen.wait_for("added", after=screen.wait_for("applied without asking", after=pos))
    rows = [row for row in screen.text[pos:end].split("\n") if "more" in row and "add more" not in row]
    assert len(rows) >= 4, screen.text[pos:end]
    assert all(row.startswith("    +more") for row in rows), rows
    assert [w for row in rows for w in re.findall(r"more\d\d", row)] == [f"more{i:02d}" for i in range(40)]
    screen.child.sendeof()
    assert screen.finish() == 0
    assert AgentView(bot, "bot").read("/notes/long.md").content == f"short\n{other}\n{long_line}\n"


def test_at_80_columns_wrapped_listings_and_tool_errors_stay_in_their_column(
        api: FakeMessagesAPI, bot: SqlStore) -> None:
    pexpect = pytest.importorskip("pexpect")
    api.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "not there at all",
                                       "new_string": "x"})
    api.enqueue_text("could not edit")
    env = {**os.environ, **keyed(api), "TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1"}
    screen = Screen(pexpect.spawn(MEMAGENT, ["chat", "bot"], env=env, dimensions=(60, 80),
                                  encoding="utf-8", timeout=30))
    pos = screen.wait_for("bot>")
    screen.type("/help")
    end = screen.wait_for("Anything else is sent to the agent.", after=pos)
    listing = screen.text[screen.text.index("/remember", pos):end].split("\n")
    column = listing[0].index("reflect on this conversation")
    entries = [row for row in listing if row[:1] in ("/", "#", "@")]
    continued = [row for row in listing[:-1] if row and row[:1] not in ("/", "#", "@")]
    assert continued, "nothing wrapped at 80 columns: the test shows nothing"
    assert all(len(row) <= 80 for row in listing), listing
    # A continuation starts under the descriptions, never at the left edge.
    assert all(row[:column].strip() == "" and row[column] != " " for row in continued), listing
    assert all(row[column - 2:column] == "  " for row in entries), listing
    screen.type("edit the rules")
    start = screen.wait_for("⎿  old_string was not found", after=end)
    done = screen.wait_for("could not edit", after=start)
    rows = screen.text[start:done].split("\n")
    # The message's continuation: the rows after its first, up to the spinner or the answer.
    continuation = []
    for row in rows[1:]:
        if "thinking" in row or "could not edit" in row:
            break
        continuation.append(row)
    assert continuation, rows
    assert all(row.startswith("     ") and row[5] != " " for row in continuation), rows
    screen.child.sendeof()
    assert screen.finish() == 0


def test_hanging_indent_follows_labels_bullets_and_columns() -> None:
    from rich.console import Console

    from memagent.agent.chat.ui.terminal import Hanging, listing_hang

    console = Console(width=40, no_color=True, record=True, file=io.StringIO())
    text = ("you: " + "word " * 12 + "\n"
            "     - " + "item " * 10 + "\n"
            "/cmd [ARG]  " + "does " * 8 + "\n"
            "plain prose " + "goes " * 8)
    console.print(Hanging(text, listing_hang))
    rows = console.export_text().splitlines()
    assert rows[0].startswith("you: word") and rows[1].startswith("     word"), rows
    bullet = next(i for i, r in enumerate(rows) if r.startswith("     - item"))
    assert rows[bullet + 1].startswith("       item"), rows
    cmd = next(i for i, r in enumerate(rows) if r.startswith("/cmd [ARG]  does"))
    assert rows[cmd + 1].startswith("            does"), rows
    prose = next(i for i, r in enumerate(rows) if r.startswith("plain prose"))
    assert rows[prose + 1].startswith("goes"), rows  # prose wraps as a terminal would
    assert all(len(r) <= 40 for r in rows), rows


def test_a_long_message_wraps_without_the_new_line_dots(api: FakeMessagesAPI, bot: SqlStore) -> None:
    pexpect = pytest.importorskip("pexpect")
    api.enqueue_text("got both lines")
    env = {**os.environ, **keyed(api), "TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1"}
    screen = Screen(pexpect.spawn(MEMAGENT, ["chat", "bot"], env=env, dimensions=(40, 80),
                                  encoding="utf-8", timeout=30))
    pos = screen.wait_for("bot>")
    words = " ".join(f"w{i:02d}" for i in range(30))  # 119 columns: wraps once after the prompt
    screen.child.send(words)
    pos = screen.wait_for("w29", after=pos)
    screen.child.send("\x1b\r")  # Alt-Enter: a line of its own, which does get the dots
    screen.child.send("second")
    pos = screen.wait_for("second", after=pos)
    rows = screen.text[screen.text.rindex("bot>"):].split("\n")
    wrapped = next(row for row in rows if "w19" in row)
    assert wrapped.startswith("     ") and "." not in wrapped, rows  # blanks under the prompt, no dots
    assert next(row for row in rows if "second" in row).startswith("...."), rows
    screen.child.send("\r")
    screen.wait_for("got both lines", after=pos)
    screen.child.sendeof()
    assert screen.finish() == 0
    assert api.requests[-1]["messages"][-1]["content"][0]["text"] == f"{words}\nsecond"
