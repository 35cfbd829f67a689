"""Concurrent versionless writes in ONE ``memagent mcp serve`` session lose nothing.

Issue #36: 50 concurrent read-then-``write_file`` calls in one session, none passing
``expected_version``, were all acknowledged while most of their lines were missing
from the file (a write that arrived after another call's write had finished looked
fresh, though its read came before that write). Each case starts the real command on
stdio and drives it with the SDK's own ``mcp.Client``, on SQLite and Postgres. What is
asserted is the promise, not a schedule: every acknowledged line is in the file,
whatever order the server ran the calls in (refusals are fine), and a client that runs
its calls one at a time keeps working without ``expected_version``.
"""

from __future__ import annotations

import anyio
from mcp import Client

from tests.test_mcp_serve import call, content, history, numbered_to_text, stdio, timed, url  # noqa: F401

WRITERS = 50


def test_concurrent_versionless_read_then_write_loses_no_acknowledged_line(url: str) -> None:  # noqa: F811
    told: list[tuple[str, bool, str]] = []

    async def writer(c: Client, line: str) -> None:
        is_err, text = await call(c, "read_file", file_path="/notes.md")
        assert not is_err, text
        result = await call(c, "write_file", file_path="/notes.md", content=numbered_to_text(text) + line + "\n")
        told.append((line, *result))

    async def body() -> None:
        async with stdio() as c, anyio.create_task_group() as tg:
            for i in range(WRITERS):
                tg.start_soon(writer, c, f"line-{i}")

    timed(body)
    assert len(told) == WRITERS
    acked = [line for line, is_err, _ in told if not is_err]
    refused = [(line, text) for line, is_err, text in told if is_err]
    final = content(url, "/notes.md").splitlines()
    # Every acknowledged write is in the file; the first write to run always lands.
    assert acked and sorted(final[1:]) == sorted(acked) and final[0] == "start"
    assert len(history(url, "/notes.md")) == 1 + len(acked)
    for line, text in refused:
        assert "read it again" in text and "expected_version" in text, (line, text)


def test_one_call_at_a_time_keeps_working_without_expected_version(url: str) -> None:  # noqa: F811
    async def body() -> None:
        async with stdio() as c:
            # read, write, read, write, write: each write based on what the client saw last.
            _, text = await call(c, "read_file", file_path="/notes.md")
            assert await call(c, "write_file", file_path="/notes.md", content=numbered_to_text(text) + "a\n") == \
                (False, "Wrote /notes.md (now version 2).")
            _, text = await call(c, "read_file", file_path="/notes.md")
            assert await call(c, "write_file", file_path="/notes.md", content=numbered_to_text(text) + "b\n") == \
                (False, "Wrote /notes.md (now version 3).")
            assert await call(c, "edit_file", file_path="/notes.md", old_string="b\n", new_string="b\nc\n") == \
                (False, "Edited /notes.md (now version 4).")
            assert await call(c, "write_file", file_path="/notes.md", content="start\na\nb\nc\nd\n") == \
                (False, "Wrote /notes.md (now version 5).")
            # A second read of the same file and only one write: the server cannot tell the spare read from
            # another caller's, so a versionless write after that write is refused; expected_version works.
            await call(c, "read_file", file_path="/AGENTS.md")
            _, text = await call(c, "read_file", file_path="/AGENTS.md")
            assert await call(c, "edit_file", file_path="/AGENTS.md", old_string="Use", new_string="Use short") == \
                (False, "Edited /AGENTS.md (now version 2).")
            is_err, text = await call(c, "edit_file", file_path="/AGENTS.md", old_string="short",
                                      new_string="very short")
            assert is_err and "expected_version" in text and "read it again" in text
            assert await call(c, "edit_file", file_path="/AGENTS.md", old_string="short", new_string="very short",
                              expected_version=2) == (False, "Edited /AGENTS.md (now version 3).")
    timed(body)
    assert content(url, "/notes.md") == "start\na\nb\nc\nd\n"
    assert content(url, "/AGENTS.md") == "# Preferences\n- Use very short bullet points.\n"
