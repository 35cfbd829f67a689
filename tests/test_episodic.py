"""Episodic memory: past threads as read-only Markdown files under /conversations/, on
SQLite and Postgres; and a long ``memagent chat`` (real command, real SDK, local
Messages API) that stays under its budget and keeps an early noted fact."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.fake_messages_api import FakeMessagesAPI
from memagent.agent.cli import config
from memagent.vfs import SqlStore, open_store
from memagent.vfs.errors import ReadOnly
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.scopes import AgentView
from tests.cli_helpers import err, out, run


def text(t: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t}]


def a_thread(threads: ThreadStore, agent: str = "a") -> str:
    tid = threads.create(agent, "claude-test")
    threads.append(tid, {"role": "user", "content": text("Please note this: the boat is called Marigold.")})
    threads.append(tid, {"role": "assistant", "content": [
        {"type": "text", "text": "Noted, I will remember the boat."},
        {"type": "tool_use", "id": "t1", "name": "edit_file",
         "input": {"file_path": "/AGENTS.md", "old_string": "a", "new_string": "b"}}]})
    threads.append(tid, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "Edited /AGENTS.md (now version 2)."}]})
    threads.append(tid, {"role": "assistant", "content": text("Saved it in AGENTS.md.")})
    return tid


def test_threads_render_as_files_and_grep_finds_them(store: SqlStore) -> None:
    threads = ThreadStore(store.engine)
    tid = a_thread(threads)
    view = AgentView(store, "a", user="tester")
    names = [e.name for e in view.ls("/conversations/")]
    assert len(names) == 1 and names[0].endswith(f"-{tid[:8]}.md")
    assert names[0][:11].count("-") == 3 and "please-note-this" not in names[0]  # date, then a slug of the title
    path = "/conversations/" + names[0]
    body = view.read(path).content
    assert body.startswith("# Note this: the boat is called Marigold.")
    assert f"- thread: {tid}" in body
    assert "## User" in body and "## Assistant" in body
    assert "- tool call: edit_file(" in body and "- memory edit: edited /AGENTS.md, now version 2" in body
    hits = view.grep("Marigold", path="/conversations/", output_mode="content")
    assert [p for p, _, _ in hits.lines] == [path, path]
    assert view.glob("*.md", "/conversations/") == [path]
    assert "conversations" not in [e.name for e in view.ls("/")]  # ls / is memory
    # A grep over memory does not wade through past threads.
    assert view.grep("Marigold").files == []
    # New messages show up at the next look, appended to the same file.
    threads.append(tid, {"role": "user", "content": text("And the harbour is Dunmore.")})
    assert view.grep("Dunmore", path="/conversations/").files == [path]


def test_writes_under_conversations_are_refused(store: SqlStore) -> None:
    a_thread(ThreadStore(store.engine))
    view = AgentView(store, "a")
    path = view.glob("*.md", "/conversations/")[0]
    for attempt in (lambda: view.write(path, "x"), lambda: view.write("/conversations/new.md", "x"),
                    lambda: view.delete(path), lambda: view.edit(path, "boat", "ship"),
                    lambda: view.move(path, "/kept.md")):
        with pytest.raises(ReadOnly) as info:
            attempt()
        assert "read-only" in str(info.value) and "\n" not in str(info.value)


def test_failed_turn_is_marked_in_the_file(store: SqlStore) -> None:
    threads = ThreadStore(store.engine)
    tid = threads.create("a", "m")
    seq = threads.append(tid, {"role": "user", "content": text("hello?")})
    threads.mark_failed(tid, seq)
    view = AgentView(store, "a")
    body = view.read(view.glob("*.md", "/conversations/")[0]).content
    assert "request for this turn failed" in body
    assert threads.load(tid) == []


def test_each_agent_sees_only_its_own_conversations(store: SqlStore) -> None:
    store.create_agent("b")
    a_thread(ThreadStore(store.engine), "b")
    assert AgentView(store, "a").glob("*", "/conversations/") == []
    assert len(AgentView(store, "b").glob("*", "/conversations/")) == 1


# -- the real command --------------------------------------------------------------------


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "MEMAGENT_STREAM",
                "MEMAGENT_CONTEXT_BUDGET"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "userhome"))
    monkeypatch.setenv("NO_COLOR", "1")


@pytest.fixture
def cli_store(cli_env: None) -> Iterator[SqlStore]:
    s = open_store(config.db_url())
    s.create_agent("bot", {"/AGENTS.md": "# Rules\n- Be brief.\n"})
    yield s
    s.close()


WORDS = ["harbour", "lantern", "meadow", "copper", "violet", "thunder", "orchard", "pebble",
         "whistle", "saddle", "ember", "glacier", "ribbon", "falcon", "marble", "canyon"]


def long_turn(n: int) -> str:
    body = " ".join(WORDS[(n * 7 + i) % len(WORDS)] for i in range(6000))
    if n == 2:
        return "Please note this: the launch code is ZEBRA-3141. " + body
    return f"Part {n} of the report follows. " + body


def test_a_long_chat_stays_under_the_budget_and_keeps_an_early_fact(cli_store: SqlStore) -> None:
    budget = 30_000
    turns = 40
    with FakeMessagesAPI() as api:
        def answer(body: dict[str, Any]) -> Any:
            system = json.dumps(body.get("system"))
            if "running summary" in system:
                return "- The user is sending a long report in parts."  # a summariser that forgets
            return "Got it."

        for _ in range(turns * 3):
            api.enqueue_callable(answer)
        stdin = "".join(long_turn(n) + "\n" for n in range(1, turns + 1)) + "/context\n"
        env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.base_url,
               "MEMAGENT_CONTEXT_BUDGET": str(budget)}
        p = run("chat", "bot", stdin=stdin, env=env)
        assert p.returncode == 0, err(p)
        assert err(p) == ""
        chats = [r for r in api.requests if "running summary" not in json.dumps(r.get("system"))]
        assert len(chats) == turns
        for request in api.requests:
            assert api.input_tokens(request) <= budget
        last = json.dumps(chats[-1]["messages"])
        assert "ZEBRA-3141" in last and "Part 40 of the report" in last
        assert chats[-1]["messages"][0]["role"] == "user"
        assert f"of {budget:,} tokens" in out(p) and "ZEBRA-3141" in out(p)
    # Memory is not history: every turn is in the database, whole.
    threads = ThreadStore(cli_store.engine)
    tid = threads.latest("bot")
    assert tid is not None
    saved = [m for m in threads.load(tid) if m["role"] == "user"]
    assert len(saved) == turns and saved[1]["content"][0]["text"] == long_turn(2)
    # And the thread is a file under /conversations/ that grep finds.
    p = run("fs", "grep", "ZEBRA-3141", "/conversations/", "-a", "bot")
    assert p.returncode == 0 and "/conversations/" in out(p), err(p)
    p = run("fs", "write", "/conversations/x.md", "-a", "bot", stdin="nope")
    assert p.returncode == 1 and "read-only" in err(p) and err(p).count("\n") == 1


def test_budget_option_is_validated(cli_env: None) -> None:
    p = run("chat", "bot", "--context-budget", "10", env={"ANTHROPIC_API_KEY": "k"})
    assert p.returncode == 2 and "context-budget" in err(p)
