"""Codex (pinned in harnesses.json) loads the ``codex`` export.

Its own view: ``codex mcp get <server> --json`` (the server and its ``enabled_tools``
allow-list, as Codex resolved ``.codex/config.toml`` of a trusted project) and
``codex debug prompt-input`` (what the model is given: AGENTS.md, the skills list, the
custom agents as roles). Codex runs OpenAI models and its custom agents have no tool
list, so the subagent's model and tools are not carried (the export says so).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path

from tests.interop import agent_memory as mem
from tests.interop.conftest import run_harness


def test_codex_sees_the_agents_memory(harness: Callable[[str], Path], harness_env: dict[str, str],
                                      tmp_path: Path) -> None:
    codex = harness("codex")
    project = tmp_path / "project"
    notes = mem.export("codex", project)
    assert "Codex custom agents have no tool list" in notes
    # A person trusts the project once (Codex reads .codex/config.toml only then).
    (Path(harness_env["CODEX_HOME"]) / "config.toml").write_text(
        f'[projects.{json.dumps(str(project))}]\ntrust_level = "trusted"\n')

    done = run_harness([codex, "mcp", "get", "demo", "--json"], harness_env, project)
    assert done.returncode == 0, done.stderr
    server = json.loads(done.stdout)
    expected = json.loads(mem.memory()["/tools.json"])["mcp_servers"]["demo"]
    assert server["enabled"] is True
    assert server["transport"]["type"] == "stdio"
    assert [server["transport"]["command"], *server["transport"]["args"]] == [expected["command"], *expected["args"]]
    assert server["enabled_tools"] == list(mem.LISTED)
    # Approval: Codex's config carries it per tool (not shown by `mcp get`).
    config = tomllib.loads((project / ".codex/config.toml").read_text())
    assert {t: spec.get("approval_mode") for t, spec in config["mcp_servers"]["demo"].get("tools", {}).items()} == \
        {t: "prompt" for t, approval in mem.LISTED.items() if approval}

    done = run_harness([codex, "debug", "prompt-input", "go"], harness_env, project)
    assert done.returncode == 0, done.stderr
    view = done.stdout
    assert mem.INSTRUCTION in view
    for name, description in mem.SKILLS.items():
        assert f"- {name}: {description}" in view
    assert f"{mem.SUBAGENT}: {{\\nFinds things.\\n}}" in view
