"""MCP tools from /tools.json, with real servers: the demo server of this suite (stdio,
streamable HTTP), the published ``mcp-server-time``, and servers that fail.

Sessions run in process (``build_session`` + ``PlainUI`` + the scripted model) or
as the real ``memagent chat`` / ``memagent tools`` commands in a subprocess. Every
test checks the process table for the servers it started (each carries a ``--tag``
unique to the test), so a leaked server fails the test.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from bench.fake_messages_api import FakeMessagesAPI
from memagent.agent.chat.session import Session, build_session
from memagent.agent.chat.ui.plain import PlainUI
from memagent.agent.mcp.config import ToolsConfig, expand, parse_tools_json
from memagent.agent.mcp.results import MAX_TEXT_CHARS, convert_result
from memagent.agent.model.scripted import ScriptedModel
from memagent.vfs import SqlStore, open_store
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.scopes import AgentView
from tests.cli_helpers import MEMAGENT, err, out, run
from tests.process_helpers import server_tag

DEMO = str(Path(__file__).parent / "mcp_servers" / "demo_server.py")
PY = sys.executable
LISTED = ["echo", "image", "fail", "slow", "big", "resource", "crash"]  # not "secret"
FILE_TOOLS = {"ls", "read_file", "write_file", "edit_file", "delete_file", "glob", "grep", "task"}


def mcp_names(names: set[str]) -> set[str]:
    return {n for n in names if n.startswith("mcp__")}


# -- fixtures and helpers -------------------------------------------------------------------


@pytest.fixture(autouse=True)
def mcp_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The demo server logs its calls here. The connect timeout is a hang guard, not a margin:
    on a loaded machine a Python MCP server took over 40 s to answer its handshake (a test
    that wants a server to time out sets its own, shorter timeout)."""
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("DEMO_LOG", str(log))
    monkeypatch.setenv("MEMAGENT_MCP_TIMEOUT", "600")
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "MEMAGENT_MCP_CALL_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)
    return log


@pytest.fixture
def tag(tmp_path: Path) -> Iterator[str]:
    """A marker on the command line of every server this test starts; none may survive it."""
    yield from server_tag("t", tmp_path)


def calls(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def demo_server(tag: str, *extra: str) -> dict[str, Any]:
    return {"command": PY, "args": [DEMO, "--tag", tag, *extra], "env": {"DEMO_LOG": "${DEMO_LOG}"}}


def tools_json(servers: dict[str, Any], tools: list[tuple[str, str] | tuple[str, str, bool]]) -> str:
    entries = [{"server": t[0], "name": t[1], **({"approval": True} if len(t) > 2 and t[2] else {})}
               for t in tools]
    return json.dumps({"mcp_servers": servers, "tools": entries}, indent=2)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    s = open_store(f"sqlite:///{tmp_path / 'm.db'}")
    s.create_agent("a", {"/AGENTS.md": "- Be brief.\n"})
    yield s
    s.close()


@dataclass
class Run:
    session: Session
    out: str
    err: str


def chat(store: SqlStore, model: ScriptedModel, lines: list[str], *, yolo: bool = False) -> Run:
    stdin = io.StringIO("".join(line + "\n" for line in lines))
    stdout, stderr = io.StringIO(), io.StringIO()
    ui = PlainUI(stdin, stdout, stderr)
    session = build_session(AgentView(store, "a", user="tester"), model, ui, threads=ThreadStore(store.engine),
                            yolo=yolo)
    session.run()
    return Run(session, stdout.getvalue(), stderr.getvalue())


def tool_names(model: ScriptedModel, index: int) -> set[str]:
    return {t["name"] for t in model.requests[index]["tools"]}


def result_of(model: ScriptedModel, index: int, n: int = -1) -> dict[str, Any]:
    blocks = [b for b in model.requests[index]["messages"][-1]["content"] if b.get("type") == "tool_result"]
    return blocks[n]


def text_of(block: dict[str, Any]) -> str:
    content = block["content"]
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


# -- pure parts ---------------------------------------------------------------------------------


def test_expand_follows_the_shell() -> None:
    env = {"A": "1", "EMPTY": ""}
    assert expand("x${A}y", env) == ("x1y", [])
    assert expand("${EMPTY:-d}/${NOPE:-dflt}", env) == ("d/dflt", [])
    assert expand("Bearer ${NOPE}", env) == ("Bearer ", ["NOPE"])
    assert expand("${EMPTY}", env) == ("", [])


def test_invalid_tools_json_is_an_empty_config_with_the_reason() -> None:
    config = parse_tools_json('{"mcp_servers": {}, "tools": [{"server": "x", "name": "y"}]}')
    assert config.servers == {} and config.tools == ()
    assert config.error.startswith("/tools.json is not valid: /tools/0/server")
    assert parse_tools_json(None) == ToolsConfig()


def test_results_are_converted_and_capped() -> None:
    from mcp_types import AudioContent, CallToolResult, ImageContent, TextContent

    image = ImageContent(data="aGVsbG8=", mime_type="image/png")
    got = convert_result(CallToolResult(content=[TextContent(text="a"), image,
                                                 ImageContent(data="aGVsbG8=", mime_type="image/tiff"),
                                                 AudioContent(data="aGVsbG8=", mime_type="audio/wav")]))
    assert got.blocks is not None and [b["type"] for b in got.blocks] == ["text", "image", "text", "text"]
    assert got.blocks[1]["source"] == {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="}
    assert "image/tiff" in got.text and "cannot be shown" in got.text and "[audio content: audio/wav" in got.text
    long = convert_result(CallToolResult(content=[TextContent(text="y" * (MAX_TEXT_CHARS + 5))], is_error=True))
    assert long.is_error and long.blocks is None
    assert long.text.startswith("y" * 100) and "[result cut: 5 more characters" in long.text
    assert convert_result(CallToolResult(content=[], structured_content={"k": 1})).text == '{\n  "k": 1\n}'


# -- a session with real servers ------------------------------------------------------------------


def test_model_sees_exactly_the_allowed_tools_and_results_come_back(store: SqlStore, tag: str,
                                                                   mcp_env: Path) -> None:
    store.write("agent:a", "/tools.json", tools_json(
        {"demo": demo_server(tag), "time": {"command": PY, "args": ["-m", "mcp_server_time"]}},
        [*[("demo", n) for n in LISTED], ("time", "get_current_time")]))
    model = ScriptedModel()
    model.enqueue_tool_use("mcp__demo__echo", {"text": "hi"})
    model.enqueue_tool_use("mcp__demo__image", {})
    model.enqueue_tool_use("mcp__demo__fail", {"message": "boom"})
    model.enqueue_tool_use("mcp__demo__resource", {})
    model.enqueue_tool_use("mcp__demo__big", {"n": MAX_TEXT_CHARS + 10})
    model.enqueue_tool_use("mcp__demo__secret", {})
    model.enqueue_tool_use("mcp__time__get_current_time", {"timezone": "UTC"})
    model.enqueue_text("done")
    run = chat(store, model, ["go", "/tools"])
    assert "failed" not in run.err, run.err
    expected = {f"mcp__demo__{n}" for n in LISTED} | {"mcp__time__get_current_time"}
    assert mcp_names(tool_names(model, 0)) == expected and tool_names(model, 0) >= FILE_TOOLS
    echo = next(t for t in model.requests[0]["tools"] if t["name"] == "mcp__demo__echo")
    assert echo["description"] == "Echo the text back."
    assert echo["input_schema"]["properties"]["text"]["type"] == "string"
    system = model.requests[0]["system"][0]["text"]
    assert "- demo: mcp__demo__echo, mcp__demo__image" in system
    assert "- time: mcp__time__get_current_time" in system
    assert text_of(result_of(model, 1)) == "echo: hi"
    image = result_of(model, 2)["content"]
    assert image[0]["type"] == "image" and image[0]["source"]["media_type"] == "image/png"
    fail = result_of(model, 3)
    assert fail.get("is_error") and text_of(fail).endswith("boom")
    assert "[resource <memo://one> (text/plain)]\nresource body" in text_of(result_of(model, 4))
    assert "[resource link: two <memo://two>" in text_of(result_of(model, 4))
    big = text_of(result_of(model, 5))
    assert len(big) < MAX_TEXT_CHARS + 300  # the request's context budget may cut it further
    kept = [text_of(b) for m in run.session.agent.messages if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result" and b["tool_use_id"] == result_of(model, 5)[
                "tool_use_id"]]
    assert kept and "[result cut: 10 more characters" in kept[0] and len(kept[0]) < MAX_TEXT_CHARS + 300
    secret = result_of(model, 6)
    assert secret.get("is_error") and "unknown tool 'mcp__demo__secret'" in text_of(secret)
    assert "mcp__demo__echo" in text_of(secret)
    now = json.loads(text_of(result_of(model, 7)))
    assert now["timezone"] == "UTC"
    assert [c["tool"] for c in calls(mcp_env) if c["tool"] != "start"] == ["echo", "image", "fail", "resource",
                                                                           "big"]
    # /tools: status, allowed, offered-but-not-allowed
    assert "demo  connected" in run.out and "time  connected" in run.out
    assert "offered, not allowed: secret" in run.out
    assert "offered, not allowed: convert_time" in run.out
    assert "* mcp__demo__echo({\"text\": \"hi\"})" in run.out
    children = [" ".join(c.cmdline()) for c in psutil.Process().children(recursive=True)]
    assert not [c for c in children if "mcp_server_time" in c]


def test_approval_waits_and_a_rejected_call_never_reaches_the_server(store: SqlStore, tag: str,
                                                                     mcp_env: Path) -> None:
    store.write("agent:a", "/tools.json", tools_json({"demo": demo_server(tag)}, [("demo", "echo", True)]))
    model = ScriptedModel()
    model.enqueue_tool_use("mcp__demo__echo", {"text": "first"})
    model.enqueue_tool_use("mcp__demo__echo", {"text": "second"})
    model.enqueue_text("ok")
    run = chat(store, model, ["go", "n: not that one", "y"])
    assert "--- call mcp__demo__echo ---\nserver: demo\ntool: echo\narguments:\n{\n  \"text\": \"first\"\n}" \
        in run.out
    rejected = result_of(model, 1)
    assert rejected.get("is_error") and "rejected" in text_of(rejected) and "not that one" in text_of(rejected)
    assert text_of(result_of(model, 2)) == "echo: second"
    assert [c["args"] for c in calls(mcp_env) if c["tool"] == "echo"] == [{"text": "second"}]


def test_yolo_calls_approval_tools_without_asking(store: SqlStore, tag: str, mcp_env: Path) -> None:
    store.write("agent:a", "/tools.json", tools_json({"demo": demo_server(tag)}, [("demo", "echo", True)]))
    model = ScriptedModel()
    model.enqueue_tool_use("mcp__demo__echo", {"text": "x"})
    model.enqueue_text("ok")
    run = chat(store, model, ["go"], yolo=True)
    assert "Approve?" not in run.out and text_of(result_of(model, 1)) == "echo: x"


def test_servers_that_fail_to_start_are_warnings_and_the_chat_goes_on(
        store: SqlStore, tag: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMAGENT_MCP_TIMEOUT", "3")
    store.write("agent:a", "/tools.json", tools_json(
        {"gone": {"command": "no-such-mcp-server-" + tag}, "hang": demo_server(tag, "--hang"),
         "idle": demo_server(tag)},
        [("gone", "x"), ("hang", "image")]))
    model = ScriptedModel()
    model.enqueue_text("still here")
    started = time.monotonic()
    run = chat(store, model, ["go", "/tools"])
    assert time.monotonic() - started < 30
    err_lines = run.err.splitlines()
    assert any("MCP server 'gone' failed: command 'no-such-mcp-server-" in ln for ln in err_lines), run.err
    assert any("MCP server 'hang' failed: did not start and list its tools within 3 s" in ln
               for ln in err_lines), run.err
    assert mcp_names(tool_names(model, 0)) == set() and tool_names(model, 0) >= FILE_TOOLS
    assert "still here" in run.out
    assert "gone  failed: command 'no-such-mcp-server-" in run.out
    assert "hang  failed: did not start" in run.out
    assert "idle  disabled: no tool of it is listed in /tools.json" in run.out
    assert "(not available in this session: gone, hang)" in model.requests[0]["system"][0]["text"]


def test_a_server_that_crashes_mid_call_is_dropped(store: SqlStore, tag: str) -> None:
    store.write("agent:a", "/tools.json", tools_json({"demo": demo_server(tag)},
                                                      [("demo", "echo"), ("demo", "crash")]))
    model = ScriptedModel()
    model.enqueue_tool_use("mcp__demo__crash", {})
    model.enqueue_tool_use("mcp__demo__echo", {"text": "after"})
    model.enqueue_text("still here")
    run = chat(store, model, ["go", "/tools"])
    assert mcp_names(tool_names(model, 0)) == {"mcp__demo__echo", "mcp__demo__crash"}
    crash = result_of(model, 1)
    assert crash.get("is_error") and "closed the connection during the call to crash" in text_of(crash)
    assert "MCP server 'demo' closed the connection" in run.err
    assert "mcp__demo__echo" not in tool_names(model, 1)  # the dead server's tools are gone
    assert "unknown tool 'mcp__demo__echo'" in text_of(result_of(model, 2))
    assert "still here" in run.out
    assert "demo  failed: it closed the connection mid-session" in run.out


def test_edited_tools_json_changes_the_next_request(store: SqlStore, tag: str, mcp_env: Path) -> None:
    store.write("agent:a", "/tools.json", tools_json({"demo": demo_server(tag)}, [("demo", "echo")]))
    new = tools_json({"demo": demo_server(tag)}, [("demo", "echo"), ("demo", "image")])
    model = ScriptedModel()
    model.enqueue_tool_use("read_file", {"file_path": "/tools.json"})
    model.enqueue_tool_use("write_file", {"file_path": "/tools.json", "content": new})
    model.enqueue_tool_use("mcp__demo__image", {})
    model.enqueue_text("ok")
    run = chat(store, model, ["go", "y"])
    assert "mcp__demo__image" not in tool_names(model, 1)
    assert "mcp__demo__image" in tool_names(model, 2)
    assert result_of(model, 3)["content"][0]["type"] == "image"
    assert "--- overwrite /tools.json ---" in run.out
    starts = [c for c in calls(mcp_env) if c["tool"] == "start"]
    assert len(starts) == 1  # same server settings: the connection was kept


def test_a_write_naming_a_missing_tool_is_refused_with_the_real_names(store: SqlStore, tag: str,
                                                                       mcp_env: Path) -> None:
    store.write("agent:a", "/tools.json", tools_json({"demo": demo_server(tag)}, [("demo", "echo")]))
    bad = tools_json({"demo": demo_server(tag), "gone": {"command": "no-such-mcp-" + tag}},
                     [("demo", "echo"), ("demo", "imagee"), ("gone", "x")])
    model = ScriptedModel()
    model.enqueue_tool_use("read_file", {"file_path": "/tools.json"})
    model.enqueue_tool_use("write_file", {"file_path": "/tools.json", "content": bad})
    unreachable = tools_json({"demo": demo_server(tag), "gone": {"command": "no-such-mcp-" + tag}},
                             [("demo", "echo"), ("gone", "x")])
    model.enqueue_tool_use("write_file", {"file_path": "/tools.json", "content": unreachable})
    model.enqueue_text("ok")
    run = chat(store, model, ["go", "n"])
    refused = text_of(result_of(model, 2))
    assert result_of(model, 2).get("is_error")
    assert "'imagee' on server 'demo' (it offers: image," in refused and "nothing was written" in refused
    assert "secret" in refused
    assert AgentView(store, "a").read("/tools.json").version == 1
    # An unreachable server does not block the write: the approval panel says so.
    assert "note: MCP server 'gone' could not be reached to check its tools (command 'no-such-mcp-" in run.out


SUBAGENT = """---
name: timekeeper
description: Echoes things. Use to echo.
tools: [read_file, mcp__demo__echo, mcp__demo__secret]
---
You echo what you are told.
"""


def test_subagents_get_only_their_listed_mcp_tools(store: SqlStore, tag: str, mcp_env: Path) -> None:
    store.write("agent:a", "/tools.json", tools_json({"demo": demo_server(tag)},
                                                      [("demo", "echo", True), ("demo", "image")]))
    store.write("agent:a", "/subagents/timekeeper.md", SUBAGENT)
    model = ScriptedModel()
    model.enqueue_tool_use("task", {"subagent": "timekeeper", "description": "echo hello"})
    model.enqueue_tool_use("mcp__demo__echo", {"text": "hello"})  # the subagent
    model.enqueue_text("echoed")  # the subagent's answer
    model.enqueue_text("The subagent echoed.")
    run = chat(store, model, ["go", "y", "/agents"])
    assert tool_names(model, 1) == {"read_file", "mcp__demo__echo"}  # secret is not allowed by tools.json
    assert "* task(timekeeper) echo hello\n  * mcp__demo__echo(" in run.out
    assert "--- call mcp__demo__echo (asked by subagent timekeeper) ---" in run.out
    assert "timekeeper: Echoes things. Use to echo." in run.out
    assert "tools: read_file, mcp__demo__echo, mcp__demo__secret (unavailable)" in run.out


def test_streamable_http_with_a_header_from_the_environment(store: SqlStore, tag: str, mcp_env: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "DEMO_TOKEN": "tok-123"}
    server = subprocess.Popen([PY, DEMO, "--http", str(port), "--tag", tag], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # Wait for the server to listen (a Python MCP server took over 30 s to start on a
        # loaded machine); the bound only guards against a hang.
        deadline = time.monotonic() + 600
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, "the demo MCP server exited before it listened"
                assert time.monotonic() < deadline, "the demo MCP server never listened"
                time.sleep(0.2)
        monkeypatch.setenv("DEMO_TOKEN", "tok-123")
        url = f"http://127.0.0.1:{port}/mcp"
        store.write("agent:a", "/tools.json", tools_json(
            {"web": {"type": "http", "url": url, "headers": {"X-Demo-Token": "${DEMO_TOKEN}"}},
             "bad": {"type": "http", "url": url, "headers": {"X-Demo-Token": "${NOT_SET_ANYWHERE}"}}},
            [("web", "echo"), ("bad", "image")]))
        model = ScriptedModel()
        model.enqueue_tool_use("mcp__web__echo", {"text": "over http"})
        model.enqueue_text("ok")
        run = chat(store, model, ["go"])
        assert text_of(result_of(model, 1)) == "echo: over http"
        assert "mcp__bad__image" not in tool_names(model, 0)
        assert "MCP server 'bad': ${NOT_SET_ANYWHERE} is not set" in run.err
        assert "MCP server 'bad' failed: the server answered HTTP 401" in run.err
        assert {"tok-123", ""} <= {c["args"]["token"] for c in calls(mcp_env) if c["tool"] == "request"}
    finally:
        server.terminate()
        server.wait(10)


# -- the real commands -------------------------------------------------------------------------------


def test_memagent_tools_reports_and_leaves_nothing_running(tag: str, mcp_env: Path) -> None:
    assert run("init", "bot").returncode == 0
    content = tools_json({"demo": demo_server(tag), "gone": {"command": "no-such-mcp-" + tag},
                          "idle": demo_server(tag)},
                         [("demo", "echo", True), ("demo", "nope"), ("gone", "x")])
    assert run("fs", "write", "/tools.json", "--agent", "bot", stdin=content).returncode == 0
    # Hang guards, not timing margins: three servers start, each within MEMAGENT_MCP_TIMEOUT.
    p = run("tools", "bot", timeout=600)
    assert p.returncode == 0, err(p)
    text = out(p)
    assert "demo  connected\n" in text and "allowed: echo (approval)" in text
    assert "listed but not offered by the server: nope" in text
    assert "offered, not allowed: image, fail, slow, big, resource, crash, secret" in text
    assert "gone  failed: command 'no-such-mcp-" in text
    assert "idle  connected" in text  # the command shows what every declared server offers
    p = run("tools", "bot", "--json", timeout=600)
    data = json.loads(out(p))
    demo = next(s for s in data["servers"] if s["name"] == "demo")
    assert demo["status"] == "connected" and demo["allowed"] == ["echo"] and demo["approval"] == ["echo"]
    assert demo["missing"] == ["nope"] and "secret" in demo["not_allowed"]
    assert run("init", "empty").returncode == 0
    assert "has no /tools.json" in out(run("tools", "empty"))


def _chat_proc(api: FakeMessagesAPI) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": api.base_url, "NO_COLOR": "1"}
    return subprocess.Popen([MEMAGENT, "chat", "bot"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)


def _wait_started(log: Path, n: int, timeout: float = 40) -> None:
    deadline = time.monotonic() + timeout
    while sum(1 for c in calls(log) if c["tool"] == "start") < n:
        assert time.monotonic() < deadline, "the servers did not start"
        time.sleep(0.1)


@pytest.mark.parametrize("how", ["eof", "sigterm", "sigint"])
def test_memagent_chat_uses_mcp_tools_and_leaves_no_process(how: str, tag: str, mcp_env: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # eof: the hung server must fail to start (and the session go on); a signal: it must
    # still be starting when the signal comes.
    monkeypatch.setenv("MEMAGENT_MCP_TIMEOUT", "15" if how == "eof" else "3600")
    assert run("init", "bot").returncode == 0
    content = tools_json({"demo": demo_server(tag), "hang": demo_server(tag, "--hang")},
                         [("demo", "echo"), ("hang", "image")])
    assert run("fs", "write", "/tools.json", "--agent", "bot", stdin=content).returncode == 0
    with FakeMessagesAPI() as api:
        api.enqueue_tool_use("mcp__demo__echo", {"text": "from chat"})
        api.enqueue_text("Echoed.")
        proc = _chat_proc(api)
        try:
            if how == "eof":
                stdout, stderr = proc.communicate(b"hello\n/tools\n", timeout=90)
            else:
                # While the servers start: the hung one keeps the session waiting for it,
                # and with a start-up limit far past the test's length it is still waiting
                # when the signal comes, however slowly this machine got there.
                _wait_started(mcp_env, 2)
                proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
                stdout, stderr = proc.communicate(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
        text = stdout.decode()
        if how == "eof":
            assert proc.returncode == 0, stderr.decode()
            assert "-> echo: from chat" in text
            names = {t["name"] for t in api.requests[0]["tools"]}
            assert "mcp__demo__echo" in names and "mcp__hang__image" not in names
            assert "hang  failed: did not start" in text
            assert "MCP server 'hang' failed" in stderr.decode()
        elif how == "sigterm":
            assert proc.returncode == 128 + signal.SIGTERM
        else:
            assert proc.returncode == 130 and "interrupted" in stderr.decode()
            assert "Traceback" not in stderr.decode()
    # the tag fixture checks that every server is gone
