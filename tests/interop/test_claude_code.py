"""Claude Code (pinned in harnesses.json) loads the ``claude-code`` export.

Its own view is what it sends to the fake Messages API: the instructions, the skills
and subagents it lists, the tools it gives the main agent and the subagent (with its
model), and what its permission rules do with calls the fake model makes: a listed
tool runs, an approval tool is not run without a person (``-p`` cannot ask), a tool
``--probe`` denied does not exist. All compared with the agent's memory.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.fake_messages_api import FakeMessagesAPI
from tests.interop import agent_memory as mem
from tests.interop.conftest import run_harness

MAIN_MODEL = "claude-sonnet-4-5"


def texts(request: dict[str, Any]) -> str:
    return json.dumps(request, ensure_ascii=False)


def tool_results(request: dict[str, Any]) -> dict[str, str]:
    """tool_use_id -> the result's text, for every tool result in the request."""
    found: dict[str, str] = {}
    for message in request["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result":
                content = block["content"]
                found[block["tool_use_id"]] = content if isinstance(content, str) else json.dumps(content)
    return found


def test_claude_code_sees_the_agents_memory(harness: Callable[[str], Path], harness_env: dict[str, str],
                                            tmp_path: Path) -> None:
    claude = harness("claude")
    project = tmp_path / "project"
    notes = mem.export("claude-code", project)
    # Finding 1: the tools Claude Code lacks are said, never dropped silently.
    assert "tool ls left out: Claude Code has no LS tool" in notes
    assert "tool grep left out: Claude Code has no Grep tool" in notes
    settings = json.loads((project / ".claude/settings.json").read_text())["permissions"]
    # Issue 29: an approval tool is in ask only.
    assert settings["ask"] == ["mcp__demo__fail"] and "mcp__demo__fail" not in settings["allow"]

    config_dir = Path(harness_env["CLAUDE_CONFIG_DIR"])
    # What a person does once: trust the folder and approve its .mcp.json servers.
    (config_dir / ".claude.json").write_text(json.dumps({"projects": {str(project): {
        "hasTrustDialogAccepted": True}}}))
    (config_dir / "settings.json").write_text(json.dumps({"enableAllProjectMcpServers": True}))
    demo_log = tmp_path / "demo.log"
    with FakeMessagesAPI() as api:
        main = [api.enqueue_tool_use("mcp__demo__echo", {"text": "hello"})]
        main += [api.enqueue_tool_use("mcp__demo__fail", {"message": "boom"})]
        main += [api.enqueue_tool_use("mcp__demo__secret", {})]
        api.enqueue_tool_use("Agent", {"description": "scout", "prompt": "find it", "subagent_type": mem.SUBAGENT,
                                       "run_in_background": False})
        sub = api.enqueue_tool_use("mcp__demo__fail", {"message": "from the subagent"})
        api.enqueue_text("found")  # the subagent's answer
        api.enqueue_text("done")  # the main agent's
        env = harness_env | {"ANTHROPIC_BASE_URL": api.base_url, "ANTHROPIC_API_KEY": "sk-interop",
                             "ANTHROPIC_MODEL": MAIN_MODEL, "DEMO_LOG": str(demo_log)}
        done = run_harness([claude, "-p", "go", "--output-format", "json"], env, project)
        assert done.returncode == 0, done.stderr
        requests = list(api.requests)

    first = requests[0]
    view = texts(first)
    # Instructions: CLAUDE.md imports AGENTS.md.
    assert mem.INSTRUCTION in view
    # Skills, by name and description (finding 3's skill loads like any other).
    for name, description in mem.SKILLS.items():
        assert f"- {name}: {description}" in view
    # The subagent with the tools memory gives it, as Claude Code names them.
    assert f"- {mem.SUBAGENT}: Finds things. (Tools: Read, mcp__demo__echo, mcp__demo__fail)" in view
    # MCP: the listed tools are offered, the probe's denies are not.
    for name in mem.LISTED:
        assert f"mcp__demo__{name}" in view
    for name in mem.UNLISTED:
        assert f"mcp__demo__{name}" not in view

    by_model = {r["model"] for r in requests}
    assert mem.SUBAGENT_MODEL in by_model
    subagent = [r for r in requests if r["model"] == mem.SUBAGENT_MODEL]
    # Finding 1: every tool the export lists is one Claude Code gives the subagent.
    assert [t["name"] for t in subagent[0]["tools"]] == ["Read", "mcp__demo__echo", "mcp__demo__fail"]

    results = tool_results(requests[-1]) | tool_results(subagent[-1])
    assert "echo: hello" in results[main[0]]  # allow: ran
    assert "haven't granted" in results[main[1]]  # ask: not run without a person
    assert "No such tool available" in results[main[2]]  # denied by --probe: not there
    assert "haven't granted" in results[sub]  # the subagent is bound by the same ask
    calls = [json.loads(line)["tool"] for line in demo_log.read_text().splitlines()]
    assert "echo" in calls and "fail" not in calls and "secret" not in calls
