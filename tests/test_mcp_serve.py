"""``memagent mcp serve`` through the SDK's own MCP client, against the real command.

Every case starts ``memagent mcp serve`` as a subprocess (stdio, or streamable HTTP
on a free port) and talks to it with ``mcp.Client``. Each async body runs under
``anyio.fail_after`` and each server process has a kill deadline, so a hang fails
the test instead of the run. Cases that touch the write path run on SQLite and on
Postgres; ``test_two_harnesses_edit_one_agent`` runs ``memagent chat`` (against the
local fake Messages API) and the MCP server on one Postgres database at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation

from bench.fake_messages_api import FakeMessagesAPI
from memagent.vfs import open_store
from memagent.vfs.scopes import AgentView
from tests.cli_helpers import MEMAGENT, err, out, run

CLIENT = Implementation(name="memagent-tests", version="1.2.3")
LIMIT = 90.0  # seconds any one case may take
SKILL = "---\nname: notes\ndescription: Summarise meeting notes. Use when the user pastes notes.\n---\n# Steps\n- a\n"


# This module's ``backend_url`` tests also run through PgBouncer (conftest's PGBOUNCER_MODULES),
# but not all of them: through the pooler run test_every_tool_over_stdio (every tool: each read,
# write, edit, delete, search and history statement the server sends), test_a_stale_write_is_refused_with_read_it_again
# (two server processes on one database) and the two queue tests (the proposals and `memagent
# review`). The cases marked NOT_THROUGH_THE_POOLER send only those same statements (over HTTP
# instead of stdio, or a refusal before any write, or the same write with another approval label,
# or a resource read), and fs log / blame's queries run through it in test_provenance; so they run
# on SQLite and Postgres, where what they check differs.
NOT_THROUGH_THE_POOLER = pytest.mark.parametrize("backend_url", ["sqlite", "postgres"], indirect=True)


@pytest.fixture
def url(backend_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A database (SQLite or Postgres) with agent ``demo``; the servers inherit it via MEMAGENT_DB."""
    monkeypatch.setenv("MEMAGENT_DB", backend_url)
    store = open_store(backend_url)
    store.create_agent("demo", {"/AGENTS.md": "# Preferences\n- Use bullet points.\n", "/skills/notes.md": SKILL,
                                "/notes.md": "start\n"})
    store.close()
    yield backend_url


@pytest.fixture
def sqlite_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    db = f"sqlite:///{tmp_path / 'memagent.db'}"
    monkeypatch.setenv("MEMAGENT_DB", db)
    store = open_store(db)
    store.create_agent("demo", {"/AGENTS.md": "# Preferences\n- Use bullet points.\n", "/notes.md": "start\n"})
    store.close()
    return db


def timed(body: Callable[[], Awaitable[None]]) -> None:
    """Run an async test body under a hard deadline."""
    async def main() -> None:
        with anyio.fail_after(LIMIT):
            await body()
    anyio.run(main)


@contextlib.asynccontextmanager
async def stdio(*args: str, agent: str = "demo", client: Implementation = CLIENT) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=MEMAGENT, args=["mcp", "serve", agent, *args], env=dict(os.environ))
    async with Client(stdio_client(params), client_info=client) as c:
        yield c


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def http_server(*args: str, host: str = "127.0.0.1", env: dict[str, str] | None = None) -> Iterator[str]:
    """``memagent mcp serve demo --http HOST:PORT`` in a subprocess; yields the URL to reach it on 127.0.0.1."""
    port = free_port()
    proc = subprocess.Popen([MEMAGENT, "mcp", "serve", "demo", "--http", f"{host}:{port}", *args],
                            env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    killer = threading.Timer(LIMIT + 10, proc.kill)  # a hang of the server ends the test, not the run
    killer.start()
    try:
        # Until it listens (a hang is ended by the killer, and then reported as an exit).
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"server exited: {proc.stderr.read().decode() if proc.stderr else ''}")
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        killer.cancel()
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


@contextlib.asynccontextmanager
async def http(url: str, token: str | None = None, *, mode: Any = "auto") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as h, \
            Client(streamable_http_client(url, http_client=h), client_info=CLIENT, mode=mode) as c:
        yield c


async def call(c: Client, name: str, **args: Any) -> tuple[bool, str]:
    """(is_error, text) of one tool call."""
    r = await c.call_tool(name, args)
    return bool(r.is_error), "".join(getattr(b, "text", "") for b in r.content)


def history(url: str, path: str, agent: str = "demo") -> list[tuple[int, str, str, str]]:
    """(version, author, approval, origin label), oldest first."""
    store = open_store(url)
    try:
        return [(r.version, r.author, r.approval, r.origin.label() if r.origin else "-")
                for r in sorted(AgentView(store, agent).history(path), key=lambda r: r.version)]
    finally:
        store.close()


def content(url: str, path: str, agent: str = "demo") -> str:
    store = open_store(url)
    try:
        return AgentView(store, agent).read(path).content
    finally:
        store.close()


def numbered_to_text(numbered: str) -> str:
    return "".join(line.split("\t", 1)[1] + "\n" for line in numbered.splitlines() if "\t" in line)


# -- the tools, over stdio ---------------------------------------------------------------------


def test_every_tool_over_stdio(url: str) -> None:
    async def body() -> None:
        async with stdio() as c:
            tools = (await c.list_tools()).tools
            assert [t.name for t in tools] == ["ls", "read_file", "write_file", "edit_file", "delete_file", "glob",
                                               "grep", "search_memory", "history"]
            hints = {t.name: (t.annotations.read_only_hint, t.annotations.destructive_hint) for t in tools
                     if t.annotations}
            assert hints["read_file"] == (True, None) and hints["history"] == (True, None)
            assert hints["edit_file"] == (False, False) and hints["delete_file"] == (False, True)
            is_err, text = await call(c, "ls", path="/")
            assert not is_err and "AGENTS.md" in text and "skills/" in text
            is_err, text = await call(c, "read_file", file_path="/AGENTS.md")
            assert (is_err, text) == (False, "     1\t# Preferences\n     2\t- Use bullet points.\n(version 1)")
            assert await call(c, "write_file", file_path="/journal.md", content="one\n", reason="a new file") \
                == (False, "Wrote /journal.md (now version 1).")
            assert await call(c, "edit_file", file_path="/AGENTS.md", old_string="bullet points",
                              new_string="short bullet points") == (False, "Edited /AGENTS.md (now version 2).")
            assert await call(c, "glob", pattern="*.md") == (False, "/AGENTS.md\n/journal.md\n/notes.md\n"
                                                                    "/skills/notes.md")
            assert await call(c, "grep", pattern="short", output_mode="content") == \
                (False, "/AGENTS.md:2:- Use short bullet points.")
            is_err, text = await call(c, "search_memory", query="meeting notes")
            assert not is_err and "/skills/notes.md" in text
            is_err, text = await call(c, "history", file_path="/AGENTS.md")
            assert not is_err and text.splitlines()[1].startswith("v2") and "mcp (memagent-tests 1.2.3)" in text
            assert await call(c, "delete_file", file_path="/journal.md") == \
                (False, "Deleted /journal.md (now version 2).")
            is_err, text = await call(c, "read_file", file_path="/journal.md")
            assert is_err and "\n" not in text and "/journal.md" in text
    timed(body)
    assert content(url, "/AGENTS.md") == "# Preferences\n- Use short bullet points.\n"
    assert history(url, "/AGENTS.md")[-1] == (2, "agent", "client", "mcp (memagent-tests 1.2.3)")
    assert [h[2] for h in history(url, "/journal.md")] == ["client", "client"]


@NOT_THROUGH_THE_POOLER
def test_errors_are_tool_errors_with_the_chat_texts_and_the_server_lives_on(url: str) -> None:
    async def body() -> None:
        async with stdio() as c:
            # A validator's refusal: its own text, as an MCP tool error; nothing stored.
            is_err, text = await call(c, "write_file", file_path="/skills/bad.md", content="no frontmatter\n")
            assert is_err and text.startswith("/skills/bad.md was not saved") and "frontmatter" in text
            # Bad arguments, an unknown tool, path rules, a missing file: each one line, then the next call works.
            is_err, text = await call(c, "read_file", file_path=3)
            assert is_err and text == ("bad arguments for read_file: file_path: 3 is not of type 'string'; "
                                       "see the tool's input schema")
            is_err, text = await call(c, "read_file")
            assert is_err and "'file_path' is a required property" in text
            is_err, text = await call(c, "nope")
            assert is_err and text.startswith("unknown tool 'nope'; the tools are: ls, read_file")
            is_err, text = await call(c, "read_file", file_path="/../etc/passwd")
            assert is_err and "\n" not in text
            assert not (await call(c, "read_file", file_path="/AGENTS.md"))[0]
            is_err, text = await call(c, "edit_file", file_path="/AGENTS.md", old_string="", new_string="x")
            assert is_err and text == "old_string is empty; give the exact text to replace (use write_file to " \
                                      "rewrite a file)"
            is_err, text = await call(c, "grep", pattern="(")
            assert is_err
            # Overwriting a file this session never read is refused, as in chat.
            is_err, text = await call(c, "write_file", file_path="/notes.md", content="gone\n")
            assert is_err and "you have not read it" in text
            # So is editing it (finding 7 of issue #28): an MCP client has no prompt that showed it the file.
            assert await call(c, "edit_file", file_path="/notes.md", old_string="start", new_string="gone") == (
                True, "/notes.md exists (version 1) and you have not read it; read_file it first so you do not "
                      "edit what you have not seen, then edit_file again")
            assert await call(c, "read_file", file_path="/notes.md") == (False, "     1\tstart\n(version 1)")
            assert await call(c, "edit_file", file_path="/notes.md", old_string="start", new_string="start") == (
                False, "No change: old_string and new_string are the same, so /notes.md stays as it is "
                       "(version 1); nothing was written.")
    timed(body)
    assert content(url, "/notes.md") == "start\n"
    assert len(history(url, "/notes.md")) == 1
    store = open_store(url)
    try:
        assert not AgentView(store, "demo").exists("/skills/bad.md")
    finally:
        store.close()


def test_a_stale_write_is_refused_with_read_it_again(url: str) -> None:
    other = Implementation(name="other-client", version="0.9")

    async def body() -> None:
        async with stdio() as a, stdio(client=other) as b:
            assert not (await call(a, "read_file", file_path="/notes.md"))[0]
            assert not (await call(b, "read_file", file_path="/notes.md"))[0]
            assert await call(b, "edit_file", file_path="/notes.md", old_string="start", new_string="start\nb") == \
                (False, "Edited /notes.md (now version 2).")
            is_err, text = await call(a, "edit_file", file_path="/notes.md", old_string="start", new_string="a")
            assert is_err and text == ("/notes.md changed since you read it (you saw version 1, it is now "
                                       "version 2); read it again and re-apply your change")
            is_err, text = await call(a, "write_file", file_path="/notes.md", content="a\n")
            assert is_err and "read it again" in text
            # Read again: now it goes through.
            assert not (await call(a, "read_file", file_path="/notes.md"))[0]
            assert await call(a, "edit_file", file_path="/notes.md", old_string="b", new_string="b\na") == \
                (False, "Edited /notes.md (now version 3).")
    timed(body)
    assert content(url, "/notes.md") == "start\nb\na\n"
    assert [h[3] for h in history(url, "/notes.md")] == ["init", "mcp (other-client 0.9)",
                                                         "mcp (memagent-tests 1.2.3)"]


# -- approval modes ------------------------------------------------------------------------------


@NOT_THROUGH_THE_POOLER
def test_yolo_records_yolo(url: str) -> None:
    async def body() -> None:
        async with stdio("--approval", "yolo") as c:
            assert not (await call(c, "write_file", file_path="/new.md", content="x\n"))[0]
    timed(body)
    assert history(url, "/new.md") == [(1, "agent", "yolo", "mcp (memagent-tests 1.2.3)")]


def test_queue_mode_proposes_and_review_applies(url: str) -> None:
    async def body() -> None:
        async with stdio("--approval", "queue") as c:
            await call(c, "read_file", file_path="/AGENTS.md")
            is_err, text = await call(c, "edit_file", file_path="/AGENTS.md", old_string="bullet points",
                                      new_string="numbered lists", reason="the user prefers numbers")
            assert not is_err and text.startswith("Queued for review as proposal #")
            assert "`memagent review demo`" in text and "stays at version 1" in text
            # Still validated and checked before it is queued.
            is_err, text = await call(c, "write_file", file_path="/skills/bad.md", content="x\n")
            assert is_err and "was not saved" in text
    timed(body)
    assert content(url, "/AGENTS.md") == "# Preferences\n- Use bullet points.\n"
    listed = run("review", "demo", "--list")
    assert listed.returncode == 0, err(listed)
    assert "edit   /AGENTS.md" in out(listed) and "the user prefers numbers" in out(listed)
    p = run("review", "demo", stdin="y\n")
    assert p.returncode == 0, err(p)
    assert "-- Use bullet points." in out(p) and "+- Use numbered lists." in out(p)
    assert "1 applied" in out(p)
    assert "a write queued by MCP client memagent-tests 1.2.3" in out(p)
    assert content(url, "/AGENTS.md") == "# Preferences\n- Use numbered lists.\n"
    # The applied revision still names the client that asked for it.
    last = history(url, "/AGENTS.md")[-1]
    assert last[:3] == (2, "agent", "human")
    assert last[3].startswith("mcp (memagent-tests 1.2.3, queued as proposal #"), last


def test_queue_refuses_a_stale_base_too(url: str) -> None:
    async def body() -> None:
        async with stdio("--approval", "queue") as q, stdio() as direct:
            await call(q, "read_file", file_path="/notes.md")
            await call(direct, "read_file", file_path="/notes.md")
            assert not (await call(direct, "write_file", file_path="/notes.md", content="direct\n"))[0]
            is_err, text = await call(q, "write_file", file_path="/notes.md", content="queued\n")
            assert is_err and "read it again" in text
    timed(body)
    assert "No proposals waiting" in out(run("review", "demo", "--list"))


# -- resources and prompts -------------------------------------------------------------------------


@NOT_THROUGH_THE_POOLER
def test_resources_and_prompts(url: str) -> None:
    async def body() -> None:
        async with stdio() as c:
            listed = (await c.list_resources()).resources
            assert [(r.name, str(r.uri)) for r in listed] == [
                ("AGENTS.md", "memagent://demo/AGENTS.md"), ("skills/notes.md", "memagent://demo/skills/notes.md")]
            got = await c.read_resource("memagent://demo/skills/notes.md")
            assert [getattr(x, "text", None) for x in got.contents] == [SKILL]
            # The current version, always: change it, read again (a resource read counts as a read).
            await c.read_resource("memagent://demo/AGENTS.md")
            assert await call(c, "edit_file", file_path="/AGENTS.md", old_string="bullet", new_string="short") == \
                (False, "Edited /AGENTS.md (now version 2).")
            got = await c.read_resource("memagent://demo/AGENTS.md")
            assert getattr(got.contents[0], "text", None) == "# Preferences\n- Use short points.\n"
            with pytest.raises(Exception, match="not a resource"):
                await c.read_resource("memagent://demo/notes.md")
            with pytest.raises(Exception, match="not a resource of this server"):
                await c.read_resource("memagent://other/AGENTS.md")
            prompts = {p.name: p for p in (await c.list_prompts()).prompts}
            assert sorted(prompts) == ["compact", "remember"]
            names = [a.name for a in prompts["remember"].arguments or []]
            assert names == ["hint", *(f"hint{i}" for i in range(2, 25))]
            got_prompt = await c.get_prompt("remember", {"hint": "tabs over spaces"})
            text = getattr(got_prompt.messages[0].content, "text", "")
            assert text.startswith("Look back over this conversation")
            assert "read_file a file before you change it" in text
            assert text.endswith("about what to remember: tabs over spaces")
            # A client that splits on spaces (Claude Code: one word per declared argument) loses nothing.
            split = await c.get_prompt("remember", {"hint": "focus", "hint2": "on", "hint3": "citations"})
            assert getattr(split.messages[0].content, "text", "").endswith("about what to remember: focus on "
                                                                           "citations")
            # Never "it is in your instructions" next to a note that says how to read it.
            assert "(it is in your instructions)" not in text
            compact = await c.get_prompt("compact")
            assert getattr(compact.messages[0].content, "text", "").startswith("Compact your memory")
    timed(body)


# -- streamable HTTP -------------------------------------------------------------------------------


# Not through the pooler (see NOT_THROUGH_THE_POOLER); the legacy protocol on SQLite only: the
# mode is how client and server speak HTTP, the same on any database, and the server's HTTP
# sessions on Postgres are the auto case's.
@pytest.mark.parametrize(("backend_url", "mode"), [("sqlite", "auto"), ("postgres", "auto"), ("sqlite", "legacy")],
                         indirect=["backend_url"])
def test_every_tool_over_http(url: str, mode: str) -> None:
    with http_server() as where:
        async def body() -> None:
            async with http(where, mode=mode) as c:
                assert len((await c.list_tools()).tools) == 9
                await call(c, "read_file", file_path="/notes.md")
                assert await call(c, "edit_file", file_path="/notes.md", old_string="start",
                                  new_string="over http") == (False, "Edited /notes.md (now version 2).")
                assert (await call(c, "write_file", file_path="/skills/x.md", content="x"))[0]
                assert not (await call(c, "ls"))[0] and not (await call(c, "glob", pattern="**"))[0]
                assert not (await call(c, "grep", pattern="http"))[0]
                assert not (await call(c, "search_memory", query="http"))[0]
                assert "mcp (memagent-tests 1.2.3)" in (await call(c, "history", file_path="/notes.md"))[1]
                assert (await call(c, "delete_file", file_path="/notes.md"))[1] == \
                    "Deleted /notes.md (now version 3)."
                assert len((await c.list_resources()).resources) == 2
                assert len((await c.list_prompts()).prompts) == 2
        timed(body)
    assert history(url, "/notes.md")[1] == (2, "agent", "client", "mcp (memagent-tests 1.2.3)")


def test_http_sessions_keep_their_own_reads(sqlite_url: str) -> None:
    """Two HTTP sessions of the same client program: what one read does not count for the other."""
    with http_server() as where:
        async def body() -> None:
            async with http(where, mode="legacy") as a, http(where, mode="legacy") as b:
                await call(a, "read_file", file_path="/notes.md")
                is_err, text = await call(b, "write_file", file_path="/notes.md", content="b\n")
                assert is_err and "you have not read it" in text
                assert not (await call(a, "write_file", file_path="/notes.md", content="a\n"))[0]
        timed(body)


def test_bearer_token_off_loopback(sqlite_url: str) -> None:
    refused = run("mcp", "serve", "demo", "--http", "0.0.0.0:1", env={"MEMAGENT_MCP_TOKEN": ""})
    assert refused.returncode == 2  # a usage mistake: nothing started
    assert err(refused).strip().splitlines() == [
        "memagent: serving on 0.0.0.0 (not loopback) needs a bearer token: set $MEMAGENT_MCP_TOKEN or pass "
        "--token, and give clients the header 'Authorization: Bearer <token>'"]
    with http_server(host="0.0.0.0", env={"MEMAGENT_MCP_TOKEN": "s3cret-token"}) as where:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"}):
            r = httpx2.post(where, headers={**headers, "Content-Type": "application/json",
                                            "Accept": "application/json, text/event-stream"},
                            content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}), timeout=10)
            assert r.status_code == 401, headers
            assert r.headers["www-authenticate"].startswith("Bearer")

        async def body() -> None:
            with pytest.raises(Exception):  # noqa: B017 - the SDK's error for a 401 is generic
                async with http(where, "wrong") as c:
                    await c.list_tools()
            async with http(where, "s3cret-token") as c:
                await call(c, "read_file", file_path="/notes.md")
                assert not (await call(c, "write_file", file_path="/notes.md", content="with token\n"))[0]
        timed(body)
    assert content(sqlite_url, "/notes.md") == "with token\n"


# -- a person at the terminal ----------------------------------------------------------------------


def test_start_and_stop_like_a_person(sqlite_url: str) -> None:
    # End of stdin: a clean stop.
    p = run("mcp", "serve", "demo", stdin="", timeout=30)
    assert p.returncode == 0 and out(p) == ""
    assert err(p).splitlines() == ["memagent: serving agent 'demo' over MCP at stdio (approval: client); "
                                   "ctrl-C stops", "memagent: MCP server stopped"]
    # ctrl-C on stdio and on HTTP: exit 0, no traceback.
    port = free_port()
    for args in ([], ["--http", f"127.0.0.1:{port}"]):
        proc = subprocess.Popen([MEMAGENT, "mcp", "serve", "demo", *args], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        killer = threading.Timer(LIMIT, proc.kill)  # a hang ends the test, not the run
        killer.start()
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline().decode()
            assert "serving agent 'demo'" in line
            # At once: ctrl-C stops it whenever it comes after the start line (no pause
            # that a busy machine could make too short).
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate()
        finally:
            killer.cancel()
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, stderr.decode()
        assert "Traceback" not in stderr.decode() and stdout == b""
    # Mistakes: one line, exit 1 (2 for usage).
    p = run("mcp", "serve", "nobody", stdin="")
    assert p.returncode == 1 and err(p).strip().count("\n") == 0 and "no agent named 'nobody'" in err(p)
    p = run("mcp", "serve", "demo", "--http", "nowhere")
    assert p.returncode == 2 and err(p).strip() == ("memagent: --http takes HOST:PORT, e.g. 127.0.0.1:8765 "
                                                    "(got 'nowhere')")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        p = run("mcp", "serve", "demo", "--http", f"127.0.0.1:{taken.getsockname()[1]}")
    assert p.returncode == 1 and "cannot listen on 127.0.0.1" in err(p) and err(p).strip().count("\n") == 0
    assert run("mcp", "serve", "demo", "--approval", "maybe").returncode == 2


@NOT_THROUGH_THE_POOLER
def test_fs_log_and_blame_show_the_client(url: str) -> None:
    async def body() -> None:
        async with stdio() as c:
            await call(c, "read_file", file_path="/notes.md")
            await call(c, "edit_file", file_path="/notes.md", old_string="start", new_string="from mcp",
                       reason="say where it came from")
    timed(body)
    log = run("fs", "log", "/notes.md", "-a", "demo")
    assert log.returncode == 0, err(log)
    assert "mcp (memagent-tests 1.2.3)" in out(log) and "say where it came from" in out(log)
    blame = run("fs", "blame", "/notes.md", "-a", "demo")
    assert "mcp (memagent-tests 1.2.3)" in out(blame) and "| from mcp" in out(blame)


# -- two harnesses, one memory -------------------------------------------------------------------


class ChatModel:
    """The chat's model, scripted: each user turn reads /notes.md, then writes it back with one
    more line, then says what it was told. Records what every write attempt was told."""

    def __init__(self, api: FakeMessagesAPI, turns: int, *, hold_first_write: threading.Event,
                 first_read: threading.Event) -> None:
        self.api = api
        self.told: list[tuple[str, bool, str]] = []  # (line, is_error, tool result text)
        self.first_read = first_read
        self.hold_first_write = hold_first_write
        self.wrote_second = threading.Event()
        self.hold_second_write = threading.Event()
        self.turn = 0
        for _ in range(turns * 3):
            api.enqueue_callable(self.answer)

    def answer(self, body: dict[str, Any]) -> dict[str, Any] | str:
        last = body["messages"][-1]
        blocks = last["content"] if isinstance(last["content"], list) else [{"type": "text", "text": last["content"]}]
        result = next((b for b in blocks if b.get("type") == "tool_result"), None)
        if result is None:
            self.turn += 1
            return self._tool("read_file", {"file_path": "/notes.md"})
        uses = {b["id"]: b for m in body["messages"] if m["role"] == "assistant" and isinstance(m["content"], list)
                for b in m["content"] if b.get("type") == "tool_use"}
        use = uses[result["tool_use_id"]]
        text = result["content"] if isinstance(result["content"], str) else \
            "".join(b.get("text", "") for b in result["content"])
        if use["name"] == "read_file":
            if self.turn == 1:
                self.first_read.set()
                assert self.hold_first_write.wait(LIMIT), "the MCP side never wrote"
            if self.turn == 2:
                assert self.hold_second_write.wait(LIMIT), "the MCP side never read again"
            line = f"chat-{self.turn}"
            return self._tool("write_file", {"file_path": "/notes.md", "content": numbered_to_text(text) + line + "\n"})
        self.told.append((use["input"]["content"].splitlines()[-1], bool(result.get("is_error")), text))
        if self.turn == 2:
            self.wrote_second.set()
        return "done"

    def _tool(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "tool_use", "id": f"t{random.getrandbits(40)}", "name": name, "input": args}],
                "stop_reason": "tool_use"}


def test_two_harnesses_edit_one_agent(fresh_pg_url: str, api: FakeMessagesAPI, chat_env: None,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``memagent chat`` and ``memagent mcp serve`` on one Postgres database, editing /notes.md at once:
    every acknowledged write is in history (and in the final file), every refused one was told
    "read it again", and no write is ever merged over one its writer had not read."""
    monkeypatch.setenv("MEMAGENT_DB", fresh_pg_url)
    store = open_store(fresh_pg_url)
    store.create_agent("demo", {"/notes.md": "start\n"})
    store.close()
    turns = 8
    first_read, mcp_wrote = threading.Event(), threading.Event()
    model = ChatModel(api, turns, hold_first_write=mcp_wrote, first_read=first_read)
    mcp_told: list[tuple[str, bool, str]] = []
    chat_out: dict[str, Any] = {}

    def chat() -> None:
        env = {**os.environ, "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.base_url}
        proc = subprocess.Popen([MEMAGENT, "chat", "demo", "--yolo"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            stdout, stderr = proc.communicate("".join(f"turn {i}\n" for i in range(turns)).encode(), timeout=LIMIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        chat_out.update(rc=proc.returncode, out=stdout.decode(), err=stderr.decode())

    def until(event: threading.Event) -> bool:
        while not event.wait(0.5):
            if chat_out:  # the chat has exited: the event can no longer come
                return event.is_set()
        return True

    async def write(c: Client, line: str) -> None:
        is_err, text = await call(c, "read_file", file_path="/notes.md")
        assert not is_err
        await anyio.sleep(random.uniform(0, 0.05))
        result = await call(c, "write_file", file_path="/notes.md", content=numbered_to_text(text) + line + "\n")
        mcp_told.append((line, *result))

    async def body() -> None:
        async with stdio() as c, anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, chat)
            # 1. chat has read version 1; the MCP client writes over it: the chat's write is stale.
            # Waits end on the event, or as soon as the chat has exited (it then never comes);
            # only the case's own deadline (LIMIT) bounds them: a busy machine may take a
            # while to start the chat, and no event depends on how long that takes.
            assert await anyio.to_thread.run_sync(until, first_read)
            await write(c, "mcp-1")
            mcp_wrote.set()
            # 2. the MCP client reads, chat then writes: the MCP client's write is stale.
            is_err, seen = await call(c, "read_file", file_path="/notes.md")
            model.hold_second_write.set()
            assert await anyio.to_thread.run_sync(until, model.wrote_second)
            result = await call(c, "write_file", file_path="/notes.md", content=numbered_to_text(seen) + "mcp-2\n")
            mcp_told.append(("mcp-2", *result))
            # 3. both at once, at random.
            for i in range(3, 9):
                await write(c, f"mcp-{i}")
    timed(body)

    assert chat_out["rc"] == 0, chat_out["err"]
    assert len(model.told) == turns
    told = model.told + mcp_told
    acked = {line: text for line, is_err, text in told if not is_err}
    refused = {line: text for line, is_err, text in told if is_err}
    assert "chat-1" in refused and "mcp-2" in refused and "chat-2" in acked and "mcp-1" in acked
    for line, text in refused.items():
        assert "changed since you read it" in text and "read it again" in text, (line, text)
    final = content(fresh_pg_url, "/notes.md").splitlines()
    store = open_store(fresh_pg_url)
    try:
        view = AgentView(store, "demo")
        revs = sorted(view.history("/notes.md"), key=lambda r: r.version)
        versions = {r.version: r for r in revs}
        for line, text in acked.items():
            version = int(text.rsplit("version ", 1)[1].rstrip(")."))
            rev = versions[version]
            assert line in (view.revision_content("/notes.md", version) or "").splitlines()
            assert rev.origin is not None
            assert rev.origin.kind == ("mcp" if line.startswith("mcp") else "chat")
            assert rev.approval == ("client" if line.startswith("mcp") else "yolo")
        # Nothing lost: one revision per acknowledged write, every acknowledged line in the final file,
        # no refused line anywhere.
        assert len(revs) == 1 + len(acked)
        assert sorted(final[1:]) == sorted(acked) and final[0] == "start"
        for line in refused:
            assert all(line not in (view.revision_content("/notes.md", r.version) or "") for r in revs)
    finally:
        store.close()


# -- export --live -----------------------------------------------------------------------------------


def test_export_live_points_claude_code_at_the_server(sqlite_url: str, tmp_path: Path) -> None:
    outdir = tmp_path / "project"
    p = run("export", "demo", str(outdir), "--format", "claude-code", "--live")
    assert p.returncode == 0, err(p)
    files = sorted(str(f.relative_to(outdir)) for f in outdir.rglob("*") if f.is_file())
    assert files == [".mcp.json", "CLAUDE.md"]
    config = json.loads((outdir / ".mcp.json").read_text())
    assert config == {"mcpServers": {"memagent": {
        "type": "stdio", "command": "memagent", "args": ["mcp", "serve", "demo"],
        "env": {"MEMAGENT_DB": "${MEMAGENT_DB:-}"}}}}
    claude = (outdir / "CLAUDE.md").read_text()
    assert "mcp__memagent__read_file" in claude and "memagent://demo/AGENTS.md" in claude
    assert "@AGENTS.md" not in claude
    # The entry runs: the command and arguments it names start a server a client can use.
    entry = config["mcpServers"]["memagent"]

    async def body() -> None:
        params = StdioServerParameters(command=str(Path(MEMAGENT).with_name(entry["command"])), args=entry["args"],
                                       env={**os.environ, "MEMAGENT_DB": sqlite_url})
        async with Client(stdio_client(params), client_info=CLIENT) as c:
            assert (await call(c, "read_file", file_path="/notes.md")) == (False, "     1\tstart\n(version 1)")
    timed(body)
    p = run("export", "demo", str(tmp_path / "zipped"), "--format", "folder", "--live")
    assert p.returncode == 1 and "--live" in err(p) and "claude-code" in err(p)
