"""``memagent mcp serve`` driven by the real MCP Inspector CLI (pinned in harnesses.json).

Each call is one ``inspector --cli`` run, so one MCP session: over stdio the
Inspector starts ``memagent mcp serve`` itself (and stops it by closing its stdin);
over streamable HTTP it talks to a server this test started. What the Inspector
prints is its own view of the server: the tools and their hints, the prompts and
their arguments, and the result of a call. Regressions of issue #28: a multi-word
prompt argument arrives whole, whether sent as one argument or split on spaces the
way Claude Code sends it (finding 6); ``edit_file`` of a file the session never read
is refused as a blind ``write_file`` is (finding 7).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memagent.vfs import open_store
from memagent.vfs.scopes import AgentView
from tests.cli_helpers import MEMAGENT
from tests.interop.conftest import run_harness

LIMIT = 120.0
AGENTS = "# Preferences\n- Be brief.\n"
SKILL = "---\nname: notes\ndescription: Summarise meeting notes. Use when the user pastes notes.\n---\n# Steps\n- a\n"
TOOLS = ["ls", "read_file", "write_file", "edit_file", "delete_file", "glob", "grep", "search_memory", "history"]


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'memagent.db'}"
    store = open_store(url)
    store.create_agent("demo", {"/AGENTS.md": AGENTS, "/skills/notes.md": SKILL, "/notes.md": "start\n"})
    store.close()
    return url


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(db: str) -> tuple[subprocess.Popen[bytes], int]:
    """A listening ``memagent mcp serve demo --http`` on a free port (another port when another
    process took the chosen one first: the machine is shared)."""
    for _ in range(5):
        port = _free_port()
        proc = subprocess.Popen([MEMAGENT, "mcp", "serve", "demo", "--http", f"127.0.0.1:{port}"],
                                env={**os.environ, "MEMAGENT_DB": db}, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        hang = threading.Timer(LIMIT, proc.kill)  # a server that never listens is ended, then reported
        hang.start()
        while proc.poll() is None:  # until it listens or exits
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                hang.cancel()
                return proc, port
            time.sleep(0.1)
        hang.cancel()
        stderr = proc.stderr.read().decode() if proc.stderr else ""
        if "cannot listen" not in stderr:
            raise AssertionError(f"server exited: {stderr}")
    raise AssertionError("no free port found for the server")


@contextlib.contextmanager
def http_server(db: str) -> Iterator[str]:
    """``memagent mcp serve demo --http`` until the block ends; yields its URL."""
    proc, port = _start(db)
    killer = threading.Timer(LIMIT * 4, proc.kill)  # a hang ends the test, not the run
    killer.start()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        killer.cancel()
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


Call = Callable[..., tuple[int, Any]]


@pytest.fixture(params=["stdio", "http"])
def inspect(request: pytest.FixtureRequest, db: str, harness: Callable[[str], Path],
            harness_env: dict[str, str], tmp_path: Path) -> Iterator[Call]:
    """``inspect("--method", "tools/list")`` -> (exit status, the JSON the Inspector printed)."""
    inspector = harness("inspector")
    env = {**harness_env, "MCP_CATALOG_PATH": str(tmp_path / "catalog.json")}
    if request.param == "http":
        # The Inspector refuses to start with a proxy set and no proxy agent; it reaches only
        # the local server here, so the closed-port proxy is not needed.
        env = {k: v for k, v in env.items() if "proxy" not in k.lower()}

    def call(target: list[str], *args: str) -> tuple[int, Any]:
        p = run_harness([inspector, "--cli", *target, *args], env, tmp_path, timeout=LIMIT)
        try:
            return p.returncode, json.loads(p.stdout)
        except ValueError:
            raise AssertionError(f"inspector printed no JSON (exit {p.returncode}):\n{p.stdout}\n{p.stderr}") from None

    if request.param == "stdio":
        yield lambda *args: call(["-e", f"MEMAGENT_DB={db}", MEMAGENT, "mcp", "serve", "demo"], *args)
    else:
        with http_server(db) as url:
            yield lambda *args: call([url, "--transport", "http"], *args)


def _text(result: Any) -> str:
    return "".join(block.get("text", "") for block in result.get("content", []))


def _content(db: str, path: str) -> str:
    store = open_store(db)
    try:
        return AgentView(store, "demo").read(path).content
    finally:
        store.close()


def test_tools_resources_and_prompts_as_the_inspector_lists_them(inspect: Call) -> None:
    status, listed = inspect("--method", "tools/list")
    assert status == 0 and [t["name"] for t in listed["tools"]] == TOOLS
    hints = {t["name"]: t.get("annotations", {}) for t in listed["tools"]}
    assert hints["read_file"]["readOnlyHint"] is True and hints["delete_file"]["destructiveHint"] is True
    status, resources = inspect("--method", "resources/list")
    assert status == 0 and [r["uri"] for r in resources["resources"]] == [
        "memagent://demo/AGENTS.md", "memagent://demo/skills/notes.md"]
    status, prompts = inspect("--method", "prompts/list")
    names = {p["name"]: [a["name"] for a in p.get("arguments") or []] for p in prompts["prompts"]}
    assert status == 0 and names["compact"] == [] and names["remember"][:3] == ["hint", "hint2", "hint3"]


@pytest.mark.parametrize("args", [["hint=focus on citations"], ["hint=focus", "hint2=on", "hint3=citations"]],
                         ids=["one-argument", "split-on-spaces"])
def test_a_multi_word_prompt_argument_arrives_whole(inspect: Call, args: list[str]) -> None:
    status, got = inspect("--method", "prompts/get", "--prompt-name", "remember", "--prompt-args", *args)
    assert status == 0
    [message] = got["messages"]
    text = message["content"]["text"]
    assert text.endswith("The user adds this hint about what to remember: focus on citations")
    assert "(it is in your instructions)" not in text


def test_the_compact_prompt_says_one_thing_about_agents_md(inspect: Call) -> None:
    status, got = inspect("--method", "prompts/get", "--prompt-name", "compact")
    text = got["messages"][0]["content"]["text"]
    assert status == 0 and text.startswith("Compact your memory")
    assert "(it is in your instructions)" not in text and "is not in your instructions" not in text
    assert "read_file a file before you change it" in text


def test_edit_without_a_read_is_refused_like_a_blind_write(inspect: Call, db: str) -> None:
    status, edited = inspect("--method", "tools/call", "--tool-name", "edit_file", "--tool-arg",
                             "file_path=/notes.md", "old_string=start", "new_string=changed")
    assert status != 0 and edited["isError"] is True
    assert _text(edited) == ("/notes.md exists (version 1) and you have not read it; read_file it first so you "
                             "do not edit what you have not seen, then edit_file again")
    status, written = inspect("--method", "tools/call", "--tool-name", "write_file", "--tool-arg",
                              "file_path=/notes.md", "content=changed")
    assert status != 0 and written["isError"] is True and "you have not read it" in _text(written)
    assert _content(db, "/notes.md") == "start\n"
    # Naming the version read (what a client that read it in another session passes) is enough.
    status, edited = inspect("--method", "tools/call", "--tool-name", "edit_file", "--tool-arg",
                             "file_path=/notes.md", "old_string=start", "new_string=changed", "expected_version=1")
    assert status == 0 and _text(edited) == "Edited /notes.md (now version 2)."
    assert _content(db, "/notes.md") == "changed\n"
