"""The README's integration examples run as written.

Each Python block under "Use memagent memory from the Anthropic API" and "Use
memagent memory from deepagents" is copied out of README.md and run in a fresh
interpreter (under a timeout, so a hang fails the test) against the local fake
Messages API, with ``MEMAGENT_DB`` naming a temporary SQLite file; the test then
reads what the scripted model wrote from that database.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from bench.fake_messages_api import FakeMessagesAPI
from memagent.vfs import open_store

ROOT = Path(__file__).resolve().parent.parent


def snippet(heading: str) -> str:
    readme = (ROOT / "README.md").read_text("utf-8")
    section = readme.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, f"expected one python block under {heading!r}"
    return blocks[0]


def run(code: str, api: FakeMessagesAPI, tmp_path: Path) -> tuple[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MEMAGENT_"))}
    db = f"sqlite:///{tmp_path / 'memory.db'}"
    env.update(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=api.base_url, MEMAGENT_DB=db,
               MEMAGENT_HOME=str(tmp_path / "home"))
    script = tmp_path / "example.py"
    script.write_text(code, "utf-8")
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout, db


def test_the_anthropic_example_runs(api: FakeMessagesAPI, tmp_path: Path) -> None:
    api.enqueue_tool_use("memory", {"command": "view", "path": "/memories"})
    api.enqueue_tool_use("memory", {"command": "create", "path": "/memories/coffee.md",
                                    "file_text": "Takes coffee black.\n"})
    api.enqueue_text("Noted: black coffee.")
    stdout, db = run(snippet("Use memagent memory from the Anthropic API"), api, tmp_path)
    assert stdout == "Noted: black coffee.\n"
    with open_store(db) as store:
        assert store.read("agent:assistant", "/coffee.md").content == "Takes coffee black.\n"
        origin = store.history("agent:assistant", "/coffee.md")[0].origin
        assert origin is not None and origin.label() == "integration (anthropic-memory-tool)"


def test_the_deepagents_example_runs(api: FakeMessagesAPI, tmp_path: Path) -> None:
    api.enqueue_tool_use("write_file", {"file_path": "/notes/coffee.md", "content": "Takes coffee black.\n"})
    api.enqueue_tool_use("search_memory", {"query": "coffee"})
    api.enqueue_text("Noted in /notes/coffee.md.")
    stdout, db = run(snippet("Use memagent memory from deepagents"), api, tmp_path)
    assert stdout == "Noted in /notes/coffee.md.\n"
    # The model saw the search result of the extra tool.
    assert "/notes/coffee.md" in str(api.requests[2]["messages"][-1]["content"])
    with open_store(db) as store:
        assert store.read("agent:assistant", "/notes/coffee.md").content == "Takes coffee black.\n"
        origin = store.history("agent:assistant", "/notes/coffee.md")[0].origin
        assert origin is not None and origin.label() == "integration (deepagents)"
