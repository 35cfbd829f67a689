"""MCP servers start behind the chat prompt: ``memagent chat`` in a pseudo-terminal
with real stdio servers and the fake Messages API.

A server that hangs (``mcp_servers/hang_server.py``, which notes when it got the
client's first message) must not keep the prompt away, nor a turn that needs no MCP
tool; a server that comes up later is announced above the waiting prompt and its
tools join the next request; quitting does not wait for the hanging one. Every
assertion waits on a state (a line on the screen, the server's note, a process),
never on a duration.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from bench.fake_messages_api import FakeMessagesAPI
from memagent.agent.cli import config
from memagent.vfs import SqlStore, open_store
from tests.cli_helpers import MEMAGENT
from tests.process_helpers import procs, server_tag, wait_gone
from tests.pty_helpers import Screen
from tests.pty_helpers import terminal_env as pty_terminal_env

pexpect = pytest.importorskip("pexpect")
if sys.platform == "win32":  # pragma: no cover
    pytest.skip("needs a POSIX pseudo-terminal", allow_module_level=True)

SERVERS = Path(__file__).parent / "mcp_servers"
HANG = str(SERVERS / "hang_server.py")
DEMO = str(SERVERS / "demo_server.py")


@pytest.fixture(autouse=True)
def terminal_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pty_terminal_env(monkeypatch, tmp_path)
    # Far past the test's length: the hanging server is still starting at every check.
    monkeypatch.setenv("MEMAGENT_MCP_TIMEOUT", "3600")
    monkeypatch.setenv("HANG_LOG", str(tmp_path / "hang.jsonl"))
    monkeypatch.setenv("DEMO_LOG", str(tmp_path / "demo.jsonl"))


@pytest.fixture
def tag(tmp_path: Path) -> Iterator[str]:
    """A marker on the command line of every server this test starts; none may survive it."""
    yield from server_tag("bg", tmp_path)


def wait_hanging(log: Path, timeout: float = 60) -> dict[str, Any]:
    """The hanging server's note that it got the client's first message (and kept it)."""
    deadline = time.monotonic() + timeout
    while not (log.exists() and log.read_text().strip()):
        assert time.monotonic() < deadline, "the hanging server was never started"
        time.sleep(0.05)
    note: dict[str, Any] = json.loads(log.read_text().splitlines()[0])
    return note


def tools_json(servers: dict[str, Any], tools: list[tuple[str, str]]) -> str:
    return json.dumps({"mcp_servers": servers, "tools": [{"server": s, "name": n} for s, n in tools]})


def hang_server(tag: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [HANG, "--tag", tag], "env": {"HANG_LOG": "${HANG_LOG}"}}


def demo_server(tag: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [DEMO, "--tag", tag], "env": {"DEMO_LOG": "${DEMO_LOG}"}}


@pytest.fixture
def store() -> Iterator[SqlStore]:
    s = open_store(config.db_url())
    s.create_agent("bot", {"/AGENTS.md": ""})
    yield s
    s.close()


@pytest.fixture
def api() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as server:
        yield server


def start(api: FakeMessagesAPI, columns: int = 80) -> Screen:
    env = {**os.environ, "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.base_url}
    child = pexpect.spawn(MEMAGENT, ["chat", "bot"], env=env, dimensions=(40, columns),
                          encoding="utf-8", timeout=30)
    return Screen(child)


def mcp_tools(request: dict[str, Any]) -> list[str]:
    return [t["name"] for t in request.get("tools", []) if t["name"].startswith("mcp__")]


def test_the_prompt_and_a_turn_do_not_wait_for_a_hanging_server(
        api: FakeMessagesAPI, store: SqlStore, tag: str, tmp_path: Path) -> None:
    store.write("agent:bot", "/tools.json", tools_json({"slow": hang_server(tag)}, [("slow", "anything")]))
    api.enqueue_text("Hello, answered while the server hangs.")
    screen = start(api)
    pos = screen.wait_for("MCP server starting: slow (the prompt does not wait")
    pos = screen.wait_for("bot>", after=pos)
    # The server has the client's first message and will never answer it: the prompt
    # is up while it hangs, and nothing claims it is ready or failed.
    note = wait_hanging(tmp_path / "hang.jsonl")
    assert psutil.pid_exists(note["pid"]) and procs(tag)
    assert "ready" not in screen.text[pos:] and "failed" not in screen.text[pos:]

    screen.type("hello")
    pos = screen.wait_for("MCP server 'slow' still starting: sent without its tools", after=pos)
    pos = screen.wait_for("Hello, answered while the server hangs.", after=pos)
    pos = screen.wait_for("bot>", after=pos)
    assert len(api.requests) == 1 and mcp_tools(api.requests[0]) == []
    assert "(still starting, their tools come later: slow)" in json.dumps(api.requests[0]["system"])
    assert procs(tag), "the hanging server is still there, still starting"

    screen.type("/tools")
    pos = screen.wait_for("slow  starting", after=pos)
    pos = screen.wait_for("bot>", after=pos)
    screen.type("/exit")
    assert screen.finish() == 0
    assert not wait_gone(tag), "quitting stopped the hanging server"


def test_a_server_that_comes_up_is_announced_and_joins_the_next_request(
        api: FakeMessagesAPI, store: SqlStore, tag: str) -> None:
    store.write("agent:bot", "/tools.json", tools_json(
        {"demo": demo_server(tag), "gone": {"command": "no-such-mcp-server-" + tag}},
        [("demo", "echo"), ("gone", "x")]))
    api.enqueue_text("Now I have echo.")
    screen = start(api, columns=160)
    pos = screen.wait_for("MCP servers starting: demo, gone", after=0)
    prompt = screen.wait_for("bot>", after=pos)
    # Announced above the waiting prompt, without anything typed.
    screen.wait_for("MCP server 'demo' is ready: echo", after=prompt)
    # The line wraps at a space that moves with the tag's length (it holds a process id), so
    # the command's name is awaited on its own, after the words before it.
    failed = screen.wait_for("MCP server 'gone' failed: command", after=prompt)
    screen.wait_for(f"'no-such-mcp-server-{tag}'", after=failed)
    screen.type("what can you do?")
    pos = screen.wait_for("Now I have echo.", after=prompt)
    assert mcp_tools(api.requests[0]) == ["mcp__demo__echo"]
    assert "still starting" not in screen.text[prompt:pos]
    screen.child.sendeof()
    assert screen.finish() == 0
