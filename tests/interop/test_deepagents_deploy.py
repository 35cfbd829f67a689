"""``memagent export --format deepagents`` read by the real ``deepagents deploy --dry-run``.

The deploy command is the ``deepagents-cli`` package (pinned in the ``dev`` extra; the
``deepagents`` library has no CLI). ``--dry-run`` prints the payload it would send
without credentials or network, which is the harness's own view of the export: it is
compared with the agent's memory (instructions, skills, subagents with their models
and tools, tools and approvals), and the files it leaves out are compared with the
export's own "will not pick up" list (issue #28, finding 8). The same export imported
back restores /tools.json exactly and says nothing about adding tools (issue #29).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memagent.vfs import open_store
from tests.cli_helpers import err, out, run

DEPLOY = Path(sys.executable).with_name("deepagents")
PINNED = "deepagents-cli 0.3.0"

AGENTS = "# Preferences\n- Be brief.\n- Cite sources.\n"
SKILL = "---\nname: notes\ndescription: Summarise meeting notes. Use when the user pastes notes.\n---\n# Steps\n- a\n"
FOLDER_SKILL = "---\nname: cite\ndescription: Format citations. Use when a source is quoted.\n---\nSee style.md.\n"
SUBAGENT = ("---\nname: researcher\ndescription: Finds sources for a claim.\ntools: [read_file, grep, "
            "mcp__docs__get_page]\nmodel: claude-sonnet-4-5\n---\nYou research claims.\n")
TOOLS = json.dumps({
    "mcp_servers": {"time": {"command": "uvx", "args": ["mcp-server-time"]},
                    "docs": {"type": "http", "url": "https://docs.example/mcp"}},
    "tools": [{"server": "time", "name": "get_current_time"},
              {"server": "docs", "name": "get_page", "approval": True},
              {"server": "docs", "name": "search"}],
}, indent=2) + "\n"
MEMORY = {"/AGENTS.md": AGENTS, "/skills/notes.md": SKILL, "/skills/cite/SKILL.md": FOLDER_SKILL,
          "/skills/cite/style.md": "APA, 7th edition.\n", "/subagents/researcher.md": SUBAGENT,
          "/tools.json": TOOLS, "/knowledge/citations.md": "# Citations\nUse APA.\n",
          "/knowledge/people.md": "Ann likes tea.\n"}


def deploy_binary() -> Path:
    if not DEPLOY.exists():
        pytest.fail(f"`deepagents` ({PINNED}) is not installed: run `pip install -e '.[dev]'`", pytrace=False)
    return DEPLOY


@pytest.fixture
def exported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = f"sqlite:///{tmp_path / 'm.db'}"
    monkeypatch.setenv("MEMAGENT_DB", db)
    store = open_store(db)
    store.create_agent("demo", MEMORY)
    store.close()
    folder = tmp_path / "export"
    p = run("export", "demo", str(folder), "--format", "deepagents")
    assert p.returncode == 0, err(p)
    (tmp_path / "export-output.txt").write_text(out(p) + err(p))
    return folder


def dry_run(folder: Path, tmp_path: Path) -> dict[str, Any]:
    home = tmp_path / "deploy-home"
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "NO_COLOR": "1",
           "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    p = subprocess.run([str(deploy_binary()), "deploy", "--dir", str(folder), "--dry-run"], env=env,
                       capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    start = p.stdout.index("\n{") + 1  # after the beta warning
    payload: dict[str, Any] = json.loads(p.stdout[start:])
    return payload


def test_the_pinned_deploy_cli_runs() -> None:
    p = subprocess.run([str(deploy_binary()), "--version"], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0 and p.stdout.strip() == PINNED, p.stdout + p.stderr
    print(f"interop: {p.stdout.strip()}")


def test_deploy_sees_instructions_skills_subagents_and_tools(exported: Path, tmp_path: Path) -> None:
    agent = dry_run(exported, tmp_path)["agent_payload"]
    assert agent["name"] == "demo" and agent["system_prompt"] == AGENTS
    skills = {s["name"]: s for s in agent["skills"]}
    assert sorted(skills) == ["cite", "notes"]
    assert skills["notes"]["description"] == "Summarise meeting notes. Use when the user pastes notes."
    assert skills["notes"]["instructions"].strip() == "# Steps\n- a"
    # Files of a folder skill travel with it.
    assert json.dumps(skills["cite"]).count("APA, 7th edition.") == 1
    [sub] = agent["subagents"]
    assert (sub["name"], sub["description"], sub["model_id"]) == ("researcher", "Finds sources for a claim.",
                                                                 "anthropic:claude-sonnet-4-5")
    assert sub["instructions"].strip() == "You research claims."
    assert [t["name"] for t in sub["tools"]["tools"]] == ["get_page"]
    assert sub["tools"]["interrupt_config"] == {"https://docs.example/mcp::get_page": True}
    # The remote server's tools, the approval one interrupting; the stdio server cannot deploy.
    assert [(t["name"], t["mcp_server_url"]) for t in agent["tools"]["tools"]] == [
        ("get_page", "https://docs.example/mcp"), ("search", "https://docs.example/mcp")]
    assert agent["tools"]["interrupt_config"] == {"https://docs.example/mcp::get_page": True}


def test_what_deploy_leaves_out_is_what_the_export_says_it_leaves_out(exported: Path, tmp_path: Path) -> None:
    payload = dry_run(exported, tmp_path)
    bundled = set(payload["directory_files"])
    for skill in payload["agent_payload"]["skills"]:
        bundled.update(f"skills/{skill['name']}/{name}" for name in skill.get("files", {}))
    written = {p.relative_to(exported).as_posix() for p in exported.rglob("*") if p.is_file()}
    # agent.json files are read into the payload's fields (name, description, model), not bundled.
    read = {"agent.json"} | {f"subagents/{s['name']}/agent.json" for s in payload["agent_payload"]["subagents"]}
    left_out = sorted(p for p in written - bundled - read if not p.startswith("."))
    assert left_out == ["knowledge/citations.md", "knowledge/people.md"]
    said = (tmp_path / "export-output.txt").read_text()
    listed = sorted(line.split("exported as ", 1)[1].split(",", 1)[0] for line in said.splitlines()
                    if "`deepagents deploy` does not pick up" in line)
    assert listed == left_out, said


def test_importing_the_export_restores_tools_without_asking_to_add_them(exported: Path) -> None:
    p = run("import", str(exported), "--as", "back", "--yes")
    assert p.returncode == 0, err(p)
    assert "add the ones to use" not in out(p) + err(p)
    shown = run("fs", "cat", "/tools.json", "-a", "back")
    assert out(shown) == TOOLS
