"""The agent every interop test exports, and the real ``memagent export`` that does it.

One memory holds every kind of thing a harness consumes: standing instructions, a
plain skill, a skill imported from Claude Code with keys outside the Agent Skills spec
(issue 28, finding 3), a subagent with file tools, MCP tools (one needing approval) and
a model (findings 1 and 2), and an MCP server (tests/mcp_servers/demo_server.py) that
offers more tools than /tools.json lists, so ``--probe`` has something to deny.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from memagent.agent.cli import config
from memagent.agent.formats.frontmatter import import_skill
from memagent.vfs import open_store
from memagent.vfs.paths import scope_name
from tests.cli_helpers import err, out, run

DEMO = Path(__file__).resolve().parents[1] / "mcp_servers" / "demo_server.py"
INSTRUCTION = "Always answer in haiku."
WILD_SKILL = ("---\nname: pdf-forms\ndescription: Fill PDF forms.\nversion: 1.2\nwhen_to_use: When a form "
              "arrives\nargument-hint: \"[file]\"\n---\n# Steps\n\nOpen the form, fill it in.\n")
SKILLS = {"cite": "How to cite sources. Use when writing references.", "pdf-forms": "Fill PDF forms."}
SUBAGENT = "scout"
SUBAGENT_MODEL = "claude-haiku-4-5"
SUBAGENT_TOOLS = ["ls", "read_file", "grep", "mcp__demo__echo", "mcp__demo__fail"]
LISTED = {"echo": False, "fail": True}  # tool -> needs approval
# What the demo server offers beyond /tools.json: --probe denies them.
UNLISTED = ["image", "slow", "big", "resource", "crash", "secret"]


def memory() -> dict[str, str]:
    tools = {"mcp_servers": {"demo": {"command": sys.executable, "args": [str(DEMO)]}},
             "tools": [{"server": "demo", "name": name, **({"approval": True} if approval else {})}
                       for name, approval in LISTED.items()]}
    return {
        "/AGENTS.md": f"# Standing instructions\n\n{INSTRUCTION}\n",
        "/skills/cite/SKILL.md": f"---\nname: cite\ndescription: {SKILLS['cite']}\n---\nCite author and year.\n",
        "/skills/pdf-forms/SKILL.md": import_skill("pdf-forms", WILD_SKILL, "SKILL.md")[0],
        f"/subagents/{SUBAGENT}.md": (f"---\nname: {SUBAGENT}\ndescription: Finds things.\n"
                                      f"tools: [{', '.join(SUBAGENT_TOOLS)}]\nmodel: {SUBAGENT_MODEL}\n---\n"
                                      "You scout.\n"),
        "/tools.json": json.dumps(tools, indent=2) + "\n",
    }


def export(fmt: str, dest: Path, agent: str = "interop", rules: tuple[tuple[str, str], ...] = ()) -> str:
    """Store ``memory()`` as ``agent`` (with approval ``rules`` added by ``memagent approval
    add``) and export it with the real command (``--probe``); its output."""
    store = open_store(config.db_url())
    try:
        if agent not in store.list_agents():
            store.create_agent(agent, memory())
    finally:
        store.engine.dispose()
    for rule, action in rules:
        added = run("approval", "add", agent, rule, action)
        assert added.returncode == 0, err(added)
    done = run("export", agent, str(dest), "--format", fmt, "--probe", timeout=120)
    assert done.returncode == 0, err(done)
    return out(done)


def stored(agent: str) -> dict[str, str]:
    store = open_store(config.db_url())
    try:
        scope = scope_name("agent", agent)
        return {i.path: store.read(scope, i.path).content for i in store.all_files(scope)}
    finally:
        store.engine.dispose()
