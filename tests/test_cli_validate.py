"""Validation through the CLI: refused writes, `memagent validate`, invalid files stay usable."""

from __future__ import annotations

import json
from pathlib import Path

from memagent.vfs import open_store
from tests.cli_helpers import err, out, run

GOOD_TOOLS = {"mcp_servers": {"search": {"command": "uvx", "args": ["some-mcp-server"]}},
              "tools": [{"server": "search", "name": "web_search"}]}


def test_tools_json_with_undeclared_server_is_refused() -> None:
    run("init", "t")
    assert run("fs", "write", "/tools.json", "-a", "t", stdin=json.dumps(GOOD_TOOLS)).returncode == 0
    bad = {**GOOD_TOOLS, "tools": [{"server": "nowhere", "name": "web_search"}]}
    p = run("fs", "write", "/tools.json", "-a", "t", stdin=json.dumps(bad))
    assert p.returncode == 1 and "Traceback" not in err(p)
    lines = err(p).splitlines()
    assert lines[0] == "memagent: /tools.json was not saved: 1 problem."
    assert lines[1].startswith("- /tools/0/server:") and "nowhere" in lines[1]
    assert json.loads(run("fs", "cat", "/tools.json", "-a", "t").stdout) == GOOD_TOOLS


def test_secret_refused_without_echo() -> None:
    run("init", "s")
    key = "sk-ant-api03-" + "Q" * 90
    p = run("fs", "write", "/knowledge/keys.md", "-a", "s", stdin=f"notes\nkey: {key}\n")
    assert p.returncode == 1 and "line 2" in err(p) and key not in err(p) and "Q" * 20 not in err(p)
    assert run("fs", "cat", "/knowledge/keys.md", "-a", "s").returncode == 1


def test_validate_reports_table_and_invalid_files_stay_usable(isolated_home: Path) -> None:
    run("init", "v", "--template", "assistant")
    assert "no problems" in out(run("validate", "v"))
    # Plant files that break today's rules, as if they were stored under older rules.
    lax = open_store(f"sqlite:///{isolated_home / 'memagent.db'}", validator=lambda p, c: [])
    lax.write("agent:v", "/skills/broken.md", "no frontmatter here\n")
    lax.write("agent:v", "/subagents/helper.md", "---\nname: other\n---\n")
    lax.close()

    p = run("validate", "v")
    assert p.returncode == 1
    table = out(p)
    assert "/skills/broken.md" in table and "/subagents/helper.md" in table
    assert "description" in table and "frontmatter" in table
    assert "problems in 2 of 4 files" in err(p)

    # Reading is never blocked; fixing and deleting work.
    assert run("fs", "cat", "/skills/broken.md", "-a", "v").stdout == b"no frontmatter here\n"
    fixed = "---\nname: broken\ndescription: Fixed now. Use when testing.\n---\nbody\n"
    assert run("fs", "write", "/skills/broken.md", "-a", "v", stdin=fixed).returncode == 0
    assert run("fs", "rm", "/subagents/helper.md", "-a", "v").returncode == 0
    assert run("validate", "v").returncode == 0


def test_init_templates() -> None:
    p = run("init", "tpl", "--template", "assistant")
    assert p.returncode == 0 and "2 files" in out(p)
    assert out(run("fs", "glob", "**", "-a", "tpl")) == "/AGENTS.md\n/skills/meeting-notes.md\n"
    p = run("init", "bad", "--template", "nope")
    assert p.returncode == 1 and "choose one of" in err(p)
    assert "bad" not in out(run("agents"))


def test_validate_shows_names_and_messages_as_text(isolated_home: Path) -> None:
    run("init", "w")
    # A legacy file whose name and content would be rich markup and a terminal escape.
    lax = open_store(f"sqlite:///{isolated_home / 'memagent.db'}", validator=lambda p, c: [])
    lax.write("agent:w", "/knowledge/[bold]x[/bold].md", "line one\nbad \x1b[2J here\n")
    lax.close()
    p = run("validate", "w")
    assert p.returncode == 1
    table = out(p)
    assert "[bold]x[/bold]" in table  # shown as typed, not read as markup
    assert "\x1b" not in table and "U+001B" in table
