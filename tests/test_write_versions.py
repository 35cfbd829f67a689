"""Every write is checked against the version its own call's read saw (issue #22).

- Over MCP (``memagent mcp serve`` through the SDK's client, one session, SQLite and
  Postgres): 50 concurrent read-then-write calls that pass ``expected_version`` lose
  nothing: every acknowledged line is in the file, every other call was refused as
  stale, and a client that re-reads and re-applies gets all 50 lines in.
- In one MCP session without ``expected_version``: a write issued while another
  call of the session was in flight and changed the file is refused (``Session``
  driven in process, the bases taken as the server takes them on arrival).
- In one model turn: parallel tool calls are checked against what the model had
  seen before the batch, so the second of two writes to one file is refused.
- Subagents read for themselves: the parent's reads do not vouch for them, and the
  parent's reads do not survive the subagent's changes.

The concurrent cases wait for every call's result (a task group), never on time.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import Implementation

from memagent.agent.gate import Decision
from memagent.agent.serve.server import Session
from memagent.vfs import SqlStore, open_store
from memagent.vfs.scopes import AgentView
from tests.agent_helpers import make_agent
from tests.cli_helpers import MEMAGENT

S = "agent:a"
CLIENT = Implementation(name="memagent-write-versions", version="1.0")
LIMIT = 240.0  # seconds an MCP case may take before it fails instead of hanging
CALLS = 50
STALE = re.compile(r"^/one\.md changed since you read it \(you saw version \d+, it is now version \d+\); "
                   r"read it again and re-apply your change$")


# -- over MCP: one session, concurrent calls -----------------------------------------------------


@pytest.fixture
def url(backend_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A database (SQLite or Postgres) with agent ``demo`` and ``/one.md``; the server inherits it."""
    monkeypatch.setenv("MEMAGENT_DB", backend_url)
    store = open_store(backend_url)
    store.create_agent("demo", {"/one.md": "start\n"})
    store.close()
    yield backend_url


@contextlib.asynccontextmanager
async def session() -> AsyncIterator[Client]:
    """One ``memagent mcp serve demo`` over stdio: one process, one MCP session."""
    params = StdioServerParameters(command=MEMAGENT, args=["mcp", "serve", "demo"], env=dict(os.environ))
    async with Client(stdio_client(params), client_info=CLIENT) as c:
        yield c


async def read(c: Client, path: str) -> tuple[str, int]:
    """The file's text and the version read, from ``_meta``; the text's last line says the same."""
    r = await c.call_tool("read_file", {"file_path": path})
    assert not r.is_error
    text = "".join(getattr(b, "text", "") for b in r.content)
    assert r.meta is not None and r.meta["path"] == path
    version = int(r.meta["version"])
    lines = text.split("\n")
    assert lines[-1] == f"(version {version})"
    return "".join(line.split("\t", 1)[1] + "\n" for line in lines[:-1]), version


async def write(c: Client, path: str, content: str, version: int) -> tuple[bool, str]:
    r = await c.call_tool("write_file", {"file_path": path, "content": content, "expected_version": version})
    return bool(r.is_error), "".join(getattr(b, "text", "") for b in r.content)


def final(url: str) -> tuple[str, int]:
    store = open_store(url)
    try:
        view = AgentView(store, "demo")
        return view.read("/one.md").content, len(view.history("/one.md"))
    finally:
        store.close()


def test_concurrent_read_then_write_in_one_mcp_session_loses_nothing(url: str) -> None:
    acknowledged: list[int] = []
    refused: list[int] = []
    retried: list[int] = []

    async def body() -> None:
        async with session() as c:
            # 50 calls read the file at once; each then appends its own line with the version
            # it read. All reads finish before any write is sent, so every write names the same
            # version: exactly one lands and the others must be refused, never merged.
            reads: dict[int, tuple[str, int]] = {}

            async def read_one(i: int) -> None:
                reads[i] = await read(c, "/one.md")

            async with anyio.create_task_group() as tg:
                for i in range(CALLS):
                    tg.start_soon(read_one, i)
            assert {v for _, v in reads.values()} == {1}

            async def write_one(i: int) -> None:
                text, version = reads[i]
                is_err, msg = await write(c, "/one.md", f"{text}line {i}\n", version)
                if is_err:
                    assert STALE.match(msg), msg
                    refused.append(i)
                else:
                    assert re.fullmatch(r"Wrote /one\.md \(now version \d+\)\.", msg), msg
                    acknowledged.append(i)

            async with anyio.create_task_group() as tg:
                for i in range(CALLS):
                    tg.start_soon(write_one, i)

            # The refused calls do what the error says, all at once: read again, re-apply,
            # until their write is acknowledged. Nothing that was acknowledged may be lost.
            async def until_written(i: int) -> None:
                while True:
                    text, version = await read(c, "/one.md")
                    is_err, msg = await write(c, "/one.md", f"{text}line {i}\n", version)
                    if not is_err:
                        retried.append(i)
                        return
                    assert STALE.match(msg), msg

            async with anyio.create_task_group() as tg:
                for i in list(refused):
                    tg.start_soon(until_written, i)

    async def timed() -> None:
        with anyio.fail_after(LIMIT):
            await body()

    anyio.run(timed)
    assert len(acknowledged) == 1 and len(refused) == CALLS - 1
    assert sorted(retried) == sorted(refused)
    text, revisions = final(url)
    lines = text.splitlines()
    assert lines[0] == "start" and sorted(lines[1:]) == sorted(f"line {i}" for i in range(CALLS))
    assert revisions == 1 + CALLS  # one revision per acknowledged write, none for a refused one


def test_expected_version_over_mcp_zero_and_bad_values(url: str) -> None:
    async def body() -> None:
        async with session() as c:
            # 0: the file must not exist yet.
            assert await write(c, "/new.md", "fresh\n", 0) == (False, "Wrote /new.md (now version 1).")
            is_err, msg = await write(c, "/new.md", "again\n", 0)
            assert is_err and msg == ("/new.md already exists (version 1) but expected_version 0 says you "
                                      "expected no file there; read it again and re-apply your change")
            r = await c.call_tool("edit_file", {"file_path": "/one.md", "old_string": "start",
                                                "new_string": "x", "expected_version": -1})
            assert r.is_error and "expected_version" in "".join(getattr(b, "text", "") for b in r.content)
            # A stale delete is refused too; the right version deletes.
            r = await c.call_tool("delete_file", {"file_path": "/new.md", "expected_version": 7})
            assert r.is_error
            r = await c.call_tool("delete_file", {"file_path": "/new.md", "expected_version": 1})
            assert not r.is_error and r.meta is not None
            assert (r.meta["path"], r.meta["version"]) == ("/new.md", 2)

    async def timed() -> None:
        with anyio.fail_after(LIMIT):
            await body()

    anyio.run(timed)
    text, revisions = final(url)
    assert (text, revisions) == ("start\n", 1)


def test_versionless_writes_in_flight_together_in_one_session(store: SqlStore) -> None:
    """Two calls arrive (their bases taken, as the server does on arrival) before either runs."""
    store.write(S, "/n.md", "one\n")
    s = Session(AgentView(store, "a"), "yolo", "test client", None)
    assert not s.run("read_file", {"file_path": "/n.md"}).is_error
    first, second = s.basis(), s.basis()
    assert s.run("edit_file", {"file_path": "/n.md", "old_string": "one", "new_string": "one\ntwo"},
                 first).content == "Edited /n.md (now version 2)."
    refused = s.run("write_file", {"file_path": "/n.md", "content": "one\nthree\n"}, second)
    assert refused.is_error and refused.content == (
        "/n.md changed since you read it (you saw version 1, it is now version 2); read it again and "
        "re-apply your change")
    # A file the session had not read is refused at once (over MCP an edit needs a read, as a
    # blind write does).
    store.write(S, "/m.md", "a\n")
    blind = s.run("edit_file", {"file_path": "/m.md", "old_string": "a", "new_string": "b"})
    assert blind.is_error and "you have not read it" in blind.content
    # Read once, then two edits in flight together: the second is refused.
    assert not s.run("read_file", {"file_path": "/m.md"}).is_error
    first, second = s.basis(), s.basis()
    assert not s.run("edit_file", {"file_path": "/m.md", "old_string": "a", "new_string": "b"}, first).is_error
    refused = s.run("edit_file", {"file_path": "/m.md", "old_string": "b", "new_string": "c"}, second)
    assert refused.is_error and refused.content.startswith("/m.md changed since you read it")
    # A call that arrives after the write finished is based on it (the documented limit).
    assert not s.run("edit_file", {"file_path": "/m.md", "old_string": "b", "new_string": "c"}).is_error
    assert store.read(S, "/n.md").content == "one\ntwo\n" and store.read(S, "/m.md").content == "c\n"


# -- one model turn: parallel tool calls -------------------------------------------------------------


def results(model: Any, index: int = -1) -> list[dict[str, Any]]:
    return [b for b in model.requests[index]["messages"][-1]["content"] if b.get("type") == "tool_result"]


def test_parallel_tool_calls_are_checked_against_the_batch_start(store: SqlStore) -> None:
    store.write(S, "/k/a.md", "one\n")
    store.write(S, "/k/b.md", "bee\n")
    agent, model, _ = make_agent(store, yolo=True)
    model.enqueue_tool_use("read_file", {"file_path": "/k/a.md"})
    # Two writes to one file in one batch: both were issued on version 1; the second is refused.
    model.enqueue_tool_uses([("edit_file", {"file_path": "/k/a.md", "old_string": "one", "new_string": "one\ntwo"}),
                             ("write_file", {"file_path": "/k/a.md", "content": "one\nthree\n"})])
    # A read issued together with a write does not vouch for it; nor does a create for an edit.
    model.enqueue_tool_uses([("read_file", {"file_path": "/k/b.md"}),
                             ("write_file", {"file_path": "/k/b.md", "content": "gone\n"}),
                             ("write_file", {"file_path": "/k/c.md", "content": "c\n"}),
                             ("edit_file", {"file_path": "/k/c.md", "old_string": "c", "new_string": "d"})])
    # The next batch saw all that: it may write.
    model.enqueue_tool_uses([("write_file", {"file_path": "/k/b.md", "content": "bee\nb\n"}),
                             ("edit_file", {"file_path": "/k/c.md", "old_string": "c", "new_string": "d"})])
    model.enqueue_text("done")
    agent.turn("go")
    first = results(model, 2)
    assert first[0]["content"] == "Edited /k/a.md (now version 2)." and not first[0].get("is_error")
    assert first[1]["is_error"] and first[1]["content"] == (
        "/k/a.md changed since you read it (you saw version 1, it is now version 2); read it again and "
        "re-apply your change")
    second = results(model, 3)
    assert second[0]["content"] == "     1\tbee\n(version 1)"
    assert second[1]["is_error"] and "not read it (a read_file issued together with this call does not count)" \
        in second[1]["content"]
    assert second[2]["content"] == "Wrote /k/c.md (now version 1)."
    assert second[3]["is_error"] and second[3]["content"].startswith(
        "/k/c.md changed since you read it (another call changed it to version 1 after this call was issued")
    third = results(model, 4)
    assert [r.get("is_error", False) for r in third] == [False, False]
    assert store.read(S, "/k/a.md").content == "one\ntwo\n"
    assert store.read(S, "/k/b.md").content == "bee\nb\n"
    assert store.read(S, "/k/c.md").content == "d\n"


def test_expected_version_in_chat(store: SqlStore) -> None:
    store.write(S, "/k/a.md", "one\n")
    store.write(S, "/k/a.md", "one\ntwo\n")
    agent, _, _ = make_agent(store, yolo=True)
    tools = agent.tools
    # Named version wins over "not read": the caller says what it read.
    stale = tools.run("write_file", {"file_path": "/k/a.md", "content": "x\n", "expected_version": 1})
    assert stale.is_error and stale.content == (
        "/k/a.md changed since you read it (you saw version 1, it is now version 2); read it again and "
        "re-apply your change")
    done = tools.run("write_file", {"file_path": "/k/a.md", "content": "x\n", "expected_version": 2})
    assert done.content == "Wrote /k/a.md (now version 3)." and done.data == {"path": "/k/a.md", "version": 3}
    bad = tools.run("edit_file", {"file_path": "/k/a.md", "old_string": "x", "new_string": "y",
                                  "expected_version": "3"})
    assert bad.is_error and bad.content.startswith("bad arguments for edit_file: expected_version must be")
    gone = tools.run("delete_file", {"file_path": "/k/a.md", "expected_version": 3})
    assert not gone.is_error
    again = tools.run("write_file", {"file_path": "/k/a.md", "content": "back\n", "expected_version": 3})
    assert again.is_error and "(you saw version 3, it is now gone)" in again.content
    assert tools.run("write_file", {"file_path": "/k/a.md", "content": "back\n", "expected_version": 0}).content \
        == "Wrote /k/a.md (now version 5)."
    empty = tools.run("write_file", {"file_path": "/k/e.md", "content": "", "expected_version": 0})
    assert not empty.is_error
    read = tools.run("read_file", {"file_path": "/k/e.md"})
    assert read.content == "(/k/e.md is empty, version 1)" and read.data == {"path": "/k/e.md", "version": 1}


# -- subagents --------------------------------------------------------------------------------------

SCRIBE = """---
name: scribe
description: Writes notes. Use to file a note.
tools: [read_file, write_file, edit_file]
---
You write notes under /k/.
"""


def test_subagent_versions_are_its_own(store: SqlStore) -> None:
    store.write(S, "/subagents/scribe.md", SCRIBE)
    store.write(S, "/k/a.md", "one\n")
    store.write(S, "/k/c.md", "see\n")
    agent, model, _ = make_agent(store, answers=[Decision("approve"), Decision("approve")])
    model.enqueue_tool_use("read_file", {"file_path": "/k/a.md"})  # the parent reads version 1
    # The parent runs the subagent and, in the same batch, edits /k/c.md, which it never read.
    model.enqueue_tool_uses([("task", {"subagent": "scribe", "description": "File it."}),
                             ("edit_file", {"file_path": "/k/c.md", "old_string": "see", "new_string": "sea"})])
    # The subagent: the parent's read does not count for it; it reads, then writes.
    model.enqueue_tool_use("write_file", {"file_path": "/k/a.md", "content": "sub\n"})
    model.enqueue_tool_use("read_file", {"file_path": "/k/a.md"})
    model.enqueue_tool_uses([("write_file", {"file_path": "/k/a.md", "content": "one\nsub\n"}),
                             ("edit_file", {"file_path": "/k/c.md", "old_string": "see", "new_string": "see\nsaw"})])
    model.enqueue_text("Filed.")
    # Back in the parent: its read of version 1 no longer vouches for a write.
    model.enqueue_tool_use("write_file", {"file_path": "/k/a.md", "content": "parent\n"})
    model.enqueue_text("Done.")
    agent.turn("file it")
    sub_first = results(model, 3)[0]
    assert sub_first["is_error"] and "already exists (version 1) and you have not read it" in sub_first["content"]
    sub_writes = results(model, 5)
    assert [r["content"] for r in sub_writes] == ["Wrote /k/a.md (now version 2).", "Edited /k/c.md (now version 2)."]
    parent_batch = results(model, 6)
    assert not parent_batch[0].get("is_error")  # the task's answer
    assert parent_batch[1]["is_error"] and parent_batch[1]["content"].startswith(
        "/k/c.md changed since you read it (another call changed it to version 2 after this call was issued")
    parent_write = results(model, 7)[0]
    assert parent_write["is_error"] and parent_write["content"] == (
        "/k/a.md changed since you read it (you saw version 1, it is now version 2); read it again and "
        "re-apply your change")
    assert store.read(S, "/k/a.md").content == "one\nsub\n" and store.read(S, "/k/c.md").content == "see\nsaw\n"
