"""OpenCode (pinned in harnesses.json) loads the ``opencode`` export.

Its own view: ``opencode debug config`` (MCP servers), ``opencode debug skill``,
``opencode debug agent <name>`` (the resolved permission rules and built-in tools of
the main agent and the subagent, with its model), and the request it sends to the
fake Messages API (instructions, skills, the tools the model is offered). Permissions
are read as OpenCode applies them: the last rule that matches wins.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.fake_messages_api import FakeMessagesAPI
from tests.interop import agent_memory as mem
from tests.interop.conftest import run_harness


def debug(opencode: Path, env: dict[str, str], project: Path, *args: str) -> Any:
    done = run_harness([opencode, "debug", *args], env, project)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def action(agent: dict[str, Any], tool: str) -> str:
    """What OpenCode does when ``agent`` calls ``tool``: the last matching rule's action."""
    matching = [r["action"] for r in agent["permission"] if fnmatch.fnmatchcase(tool, r["permission"])]
    return matching[-1]


def test_opencode_sees_the_agents_memory(harness: Callable[[str], Path], harness_env: dict[str, str],
                                         tmp_path: Path) -> None:
    opencode = harness("opencode")
    project = tmp_path / "project"
    mem.export("opencode", project)
    env = harness_env

    config = debug(opencode, env, project, "config")
    tools_json = json.loads(mem.memory()["/tools.json"])
    server = tools_json["mcp_servers"]["demo"]
    assert config["mcp"] == {"demo": {"type": "local", "command": [server["command"], *server["args"]],
                                      "enabled": True}}

    skills = {s["name"]: s for s in debug(opencode, env, project, "skill")}
    for name, description in mem.SKILLS.items():
        assert skills[name]["description"] == description
        assert skills[name]["location"] == str(project / ".opencode/skills" / name / "SKILL.md")

    main = debug(opencode, env, project, "agent", "build")
    scout = debug(opencode, env, project, "agent", mem.SUBAGENT)
    assert scout["mode"] == "subagent" and scout["description"] == "Finds things."
    assert scout["model"] == {"providerID": "anthropic", "modelID": mem.SUBAGENT_MODEL}
    # Finding 1: ls maps to a tool OpenCode has (glob); read_file and grep as named.
    assert {t for t, on in scout["tools"].items() if on} == {"read", "glob", "grep"}
    for name, approval in mem.LISTED.items():
        expected = "ask" if approval else "allow"
        assert action(main, f"demo_{name}") == expected
        # Finding 2: the subagent never loosens the main agent's ask.
        assert action(scout, f"demo_{name}") == expected
    for name in mem.UNLISTED:
        assert action(main, f"demo_{name}") == "deny" and action(scout, f"demo_{name}") == "deny"

    with FakeMessagesAPI() as api:
        for _ in range(3):
            api.enqueue_text("ok")
        env = harness_env | {"OPENCODE_CONFIG_CONTENT": json.dumps({
            "model": "anthropic/claude-sonnet-4-5", "small_model": "anthropic/claude-sonnet-4-5",
            "share": "disabled", "autoupdate": False,
            "provider": {"anthropic": {"options": {"baseURL": api.base_url + "/v1", "apiKey": "sk-interop"}}}})}
        done = run_harness([opencode, "run", "go"], env, project)
        assert done.returncode == 0, done.stderr
        turn = [r for r in api.requests if r.get("tools")]
    assert turn, "OpenCode sent no request with tools"
    request = turn[0]
    view = json.dumps(request["system"], ensure_ascii=False)
    assert mem.INSTRUCTION in view
    for name, description in mem.SKILLS.items():
        assert f"<name>{name}</name>" in view and description in view
    offered = {t["name"] for t in request["tools"]}
    assert {f"demo_{n}" for n in mem.LISTED} <= offered
    assert not {f"demo_{n}" for n in mem.UNLISTED} & offered
    assert "list" not in offered  # the tool finding 1 is about: OpenCode has none


def test_an_approval_rule_binds_opencode_subagents_too(harness: Callable[[str], Path],
                                                       harness_env: dict[str, str], tmp_path: Path) -> None:
    # Finding 2 with the agent's approval rules: a rule making a tools.json tool stricter
    # for the project is just as strict for the subagent that lists it.
    opencode = harness("opencode")
    project = tmp_path / "project"
    mem.export("opencode", project, agent="ruled", rules=(("mcp__demo__echo", "deny"),))
    main = debug(opencode, harness_env, project, "agent", "build")
    scout = debug(opencode, harness_env, project, "agent", mem.SUBAGENT)
    assert action(main, "demo_echo") == "deny"
    assert action(scout, "demo_echo") == "deny"
    assert action(scout, "demo_fail") == "ask"


def read_action(agent: dict[str, Any], path: str) -> str:
    """What OpenCode does when ``agent`` reads ``path``: the last rule matching tool and path."""
    matching = [r["action"] for r in agent["permission"]
                if fnmatch.fnmatchcase("read", r["permission"]) and fnmatch.fnmatchcase(path, r["pattern"])]
    return matching[-1]


def test_a_subagent_is_asked_before_reading_env_like_the_main_agent(
        harness: Callable[[str], Path], harness_env: dict[str, str], tmp_path: Path) -> None:
    # Issue #36: OpenCode asks before reading .env; the exported subagent's bare
    # "read: allow" came last and won, so it read .env unasked.
    opencode = harness("opencode")
    project = tmp_path / "project"
    mem.export("opencode", project)
    main = debug(opencode, harness_env, project, "agent", "build")
    scout = debug(opencode, harness_env, project, "agent", mem.SUBAGENT)
    for path in (".env", "config/.env", ".env.local", str(project / ".env.production")):
        assert read_action(main, path) == "ask", (path, main["permission"])
        assert read_action(scout, path) == "ask", (path, scout["permission"])
    for path in ("notes.md", ".env.example", str(project / "src/app.py")):
        assert read_action(scout, path) == read_action(main, path) == "allow", path
