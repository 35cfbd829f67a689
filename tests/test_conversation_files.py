"""Conversation files and their writer (``vfs/records/conversation_files.py``), on SQLite and Postgres.

What is checked: thousands of threads answer ls, grep, read_file and search through the
tools; a file rendered piece by piece (appends, failed marks, a replaced last message,
the size bound) is byte for byte the whole render of its thread's messages, and its
``version`` is the seq of the last message shown; a write based on an older state
changes nothing; concurrent renders of one thread end in the same whole render.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlalchemy import select

from memagent.agent.gate import Gate
from memagent.agent.tools.memory import MemoryTools
from memagent.agent.tools.search import SearchTools
from memagent.vfs import SqlStore
from memagent.vfs.models import files, messages
from memagent.vfs.records import conversation_files, episodes
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.scopes import AgentView


def said(t: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t}]


def stored(store: SqlStore, path: str, agent: str = "a") -> tuple[str, int]:
    """The file's content and version, straight from the table."""
    with store.engine.connect() as conn:
        row = conn.execute(select(files.c.content, files.c.version)
                           .where(files.c.scope == episodes.scope_of(agent), files.c.path == path)).one()
    return row.content, row.version


def expected(store: SqlStore, threads: ThreadStore, tid: str, agent: str = "a") -> tuple[str, int]:
    """The whole render of the thread, built here from its rows (not by the writer)."""
    info = threads.get(agent, tid)
    with store.engine.connect() as conn:
        rows = conn.execute(select(messages.c.seq, messages.c.role, messages.c.content,
                                   messages.c.created_at, messages.c.state)
                            .where(messages.c.thread_id == tid).order_by(messages.c.seq)).all()
    head = episodes.header(title=info.title, thread_id=tid, agent=agent, model=info.model,
                           created_at=info.created_at)
    body = "".join(episodes.render_message(r.role, r.content, r.created_at, state=r.state) for r in rows)
    return head + body, rows[-1].seq


# -- thousands of threads -------------------------------------------------------------------

THREADS = 3000


def test_thousands_of_threads_answer_ls_grep_read_and_search(store: SqlStore) -> None:
    threads = ThreadStore(store.engine)
    # Most threads in one batch (what create + append leave, in two statements), the
    # last ones one message at a time, as a chat adds them.
    ids = threads.create_many("a", "claude-test", [
        [{"role": "user", "content": said(f"Question {i}: where is quokka{i} kept?")},
         {"role": "assistant", "content": said(f"quokka{i} sleeps in pen {i % 7}.")}]
        for i in range(THREADS - 50)])
    for i in range(THREADS - 50, THREADS):
        tid = threads.create("a", "claude-test")
        threads.append(tid, {"role": "user", "content": said(f"Question {i}: where is quokka{i} kept?")})
        threads.append(tid, {"role": "assistant", "content": said(f"quokka{i} sleeps in pen {i % 7}.")})
        ids.append(tid)
    marigold = ids[1234]
    threads.append(marigold, {"role": "user", "content": said("The boat is called Marigold.")})

    view = AgentView(store, "a", user="tester")
    tools = MemoryTools(view, Gate())
    names = [e.name for e in view.ls("/conversations/")]  # the first look renders every thread
    assert len(names) == THREADS
    assert sorted(n[-11:-3] for n in names) == sorted(t[:8] for t in ids)
    assert "conversations" not in [e.name for e in view.ls("/")]
    listed = tools.run("ls", {"path": "/conversations/"}).content.splitlines()
    assert [line.split("  ")[0] for line in listed] == names

    # grep: one thread's word names exactly its file; read_file shows the thread.
    hit = tools.run("grep", {"pattern": "quokka1777\\b", "path": "/conversations/"})
    assert not hit.is_error
    (path,) = [line for line in hit.content.splitlines() if line.startswith("/conversations/")]
    assert path.endswith(f"-{ids[1777][:8]}.md")
    read = tools.run("read_file", {"file_path": path})
    assert not read.is_error and "Question 1777: where is quokka1777 kept?" in read.content
    assert "quokka1777 sleeps in pen 6." in read.content
    hundred = view.grep("quokka19[0-9]{2} sleeps", path="/conversations/")
    assert len(hundred.files) == 100 and not hundred.truncated

    # search: the store's ranked search over the conversations scope, and the tool.
    ranked = store.search([episodes.scope_of("a")], "quokka42", k=5)
    assert [(r.scope, r.path) for r in ranked] == [(episodes.scope_of("a"), threads.conversation_file(ids[42]))]
    found = SearchTools(view).run("search_memory", {"query": "Marigold boat"})
    assert not found.is_error
    assert found.content.startswith(f"1. /conversations{threads.conversation_file(marigold)}  (score")

    # Every file is its thread's whole render, version = the last seq (a sample).
    for tid in ids[::97] + ids[-3:] + [marigold]:
        name = threads.conversation_file(tid)
        assert name is not None
        assert stored(store, name) == expected(store, threads, tid)

    # A later message reaches only its own thread's file, at the next look.
    threads.append(ids[5], {"role": "user", "content": said("Add a wombat named Basil.")})
    assert view.grep("wombat named Basil", path="/conversations/").files == \
        [f"/conversations{threads.conversation_file(ids[5])}"]
    assert threads.sync_stale("a") == 0


# -- piece by piece is the whole render ----------------------------------------------------


def test_appends_keep_the_file_equal_to_a_whole_render(store: SqlStore) -> None:
    threads = ThreadStore(store.engine)
    view = AgentView(store, "a")
    tid = threads.create("a", "m")

    def look() -> None:
        view.ls("/conversations/")  # what a reader does; it renders what is new
        name = threads.conversation_file(tid)
        assert name is not None
        assert stored(store, name) == expected(store, threads, tid)

    threads.append(tid, {"role": "user", "content": said("Hello there. Plan the trip to Oslo.")})
    look()
    threads.append(tid, {"role": "assistant", "content": [
        {"type": "text", "text": "Writing it down."},
        {"type": "tool_use", "id": "t1", "name": "write_file",
         "input": {"file_path": "/trip.md", "content": "Oslo\n" * 100}}]})
    threads.append(tid, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "Wrote /trip.md (now version 1)."}]})
    threads.append(tid, {"role": "assistant", "content": said("Done.")})
    look()
    # A failed turn: marked after the file shows it (appended), and before (rendered marked).
    seq = threads.append(tid, {"role": "user", "content": said("And the hotel?")})
    look()
    threads.mark_failed(tid, seq)
    look()
    seq = threads.append(tid, {"role": "user", "content": said("The hotel, please?")})
    threads.mark_failed(tid, seq)
    look()
    # A failed mark on a message the file shows, but not as its last: rendered whole again.
    seq = threads.append(tid, {"role": "user", "content": said("Third try.")})
    threads.append(tid, {"role": "assistant", "content": said("Hotel Bristol.")})
    look()
    threads.mark_failed(tid, seq)
    look()
    # The last message replaced (an interrupted turn merged into it), shown and not yet.
    threads.append(tid, {"role": "user", "content": said("Book it")})
    look()
    threads.replace_last(tid, {"role": "user", "content": said("Book it") + said("for two nights")})
    look()
    threads.append(tid, {"role": "assistant", "content": said("Booked.")})
    threads.replace_last(tid, {"role": "assistant", "content": said("Booked, two nights.")})
    look()
    content, version = stored(store, threads.conversation_file(tid) or "")
    assert version == threads.count(tid)  # the seq of the last message shown
    assert "for two nights" in content and "Booked, two nights." in content
    assert content.count("request for this turn failed") == 3
    assert view.read(f"/conversations{threads.conversation_file(tid)}").version == version


def test_the_size_bound_cuts_the_same_piece_by_piece_and_at_once(store: SqlStore,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conversation_files, "MAX_BYTES", 4000)
    threads = ThreadStore(store.engine)
    view = AgentView(store, "a")
    bodies = [f"Message {i}: " + ("é" * 150 if i % 2 else "ab " * 100) for i in range(20)]
    one_by_one = threads.create("a", "m")
    at_once = threads.create("a", "m")
    for i, body in enumerate(bodies):
        for tid in (one_by_one, at_once):
            threads.append(tid, {"role": "user" if i % 2 == 0 else "assistant", "content": said(body)})
        threads.sync(one_by_one)
    view.ls("/conversations/")
    with store.engine.connect() as conn:
        rows = {tid: [conversation_files.Message(r.seq, r.role, r.content, r.created_at, r.state)
                      for r in conn.execute(select(messages).where(messages.c.thread_id == tid)
                                            .order_by(messages.c.seq))]
                for tid in (one_by_one, at_once)}
    for tid in (one_by_one, at_once):
        info = threads.get("a", tid)
        whole = conversation_files.render_whole(conversation_files.header(
            title=info.title, thread_id=tid, agent="a", model="m", created_at=info.created_at), rows[tid])
        content, version = stored(store, threads.conversation_file(tid) or "")
        assert content == whole and version == len(bodies)
        assert len(content.encode("utf-8")) <= 4000
        assert content.count(conversation_files.CUT_NOTE) == 1 and content.endswith(conversation_files.CUT_NOTE)
        assert "Message 0:" in content and "Message 19:" not in content


# -- stale writes and concurrent renders ------------------------------------------------------


def test_a_stale_update_never_overwrites_newer_content(store: SqlStore) -> None:
    threads = ThreadStore(store.engine)
    tid = threads.create("a", "m")
    threads.append(tid, {"role": "user", "content": said("first")})
    threads.sync(tid)
    path = threads.conversation_file(tid) or ""
    with store.engine.connect() as conn:
        old = conversation_files.state(conn, "a", path)
    assert old is not None and old.upto == 1
    threads.append(tid, {"role": "assistant", "content": said("second")})
    threads.sync(tid)
    newer = stored(store, path)
    assert newer[1] == 2 and "second" in newer[0]
    stale_piece = conversation_files.Grow(path, "\nSTALE\n", old, 2)
    with store.engine.begin() as conn:
        assert conversation_files.append_one(conn, "a", stale_piece) is False
        conversation_files.append(conn, "a", [stale_piece])
        assert conversation_files.replace(conn, "a", path, "STALE", have=old, upto=2) is False
    assert stored(store, path) == newer
    with store.engine.begin() as conn:
        current = conversation_files.state(conn, "a", path)
        assert current is not None
        assert conversation_files.append_one(conn, "a", conversation_files.Grow(path, "", current, 2)) is True


def test_concurrent_renders_of_one_thread_end_in_its_whole_render(store: SqlStore) -> None:
    threads = ThreadStore(store.engine)
    tid = threads.create("a", "m")
    threads.append(tid, {"role": "user", "content": said("start")})
    done = threading.Event()
    errors: list[BaseException] = []

    def render() -> None:
        mine = ThreadStore(store.engine)  # as another session or process would
        try:
            while not done.is_set():
                mine.sync(tid)
                mine.sync_stale("a")
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    workers = [threading.Thread(target=render) for _ in range(3)]
    for w in workers:
        w.start()
    try:
        for i in range(40):
            threads.append(tid, {"role": "assistant" if i % 2 == 0 else "user",
                                 "content": said(f"line {i}")})
    finally:
        done.set()
        for w in workers:
            w.join()
    assert errors == []
    threads.sync(tid)
    assert stored(store, threads.conversation_file(tid) or "") == expected(store, threads, tid)


def test_memory_writers_never_write_a_conversations_scope(store: SqlStore) -> None:
    from memagent.vfs.errors import ReadOnly
    from memagent.vfs.paths import scope_name

    scope = scope_name("conversations", "a")
    for attempt in (lambda: store.write(scope, "/x.md", "hi\n"),
                    lambda: store.bulk_write(scope, {"/x.md": "hi\n"}),
                    lambda: store.prepare_delete(scope, "/x.md"),
                    lambda: store.move(scope, "/x.md", "/y.md"),
                    lambda: store.revert(scope, "/x.md", 1)):
        with pytest.raises(ReadOnly, match="/conversations/ holds past threads"):
            attempt()
    assert store.all_files(scope) == []
