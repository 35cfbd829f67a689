"""One ``Memory`` per database (issue 38): ``open_memory``, ``Memory.of``, ``memory_of``, ``Ctx.memory``.

What is held here:

- Above ``vfs`` nobody builds the records by hand or reaches for the database object:
  no file of ``agent/`` or ``integrations/`` calls ``ThreadStore(...)`` or
  ``ProposalStore(...)``, reads an attribute ``.db`` or ``.engine`` (of a store, a view,
  threads: anything), or asks ``getattr(x, "db"|"engine", ...)``. Read from the syntax
  tree, so a docstring that names them does not count; a failure names file and line.
- ``open_memory`` on SQLite and Postgres: what one ``Memory`` writes through its
  threads and approval rules, a second ``open_memory`` of the same URL reads back;
  each part is built once; ``Memory.of`` of its store is the same object.
- Closing a ``Memory`` closes every connection its pool opened (and, on SQLite, the
  last one folds the write-ahead log back into the file).
- A store without a database (a double) has no ``Memory``: ``memory_of`` says ``None``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import event
from sqlalchemy.engine import make_url

from memagent.agent.cli.common import Ctx
from memagent.vfs import (
    AgentView,
    DatabaseMissing,
    Memory,
    ProposalStore,
    SqlStore,
    ThreadStore,
    memory_of,
    open_memory,
    parse_rule,
)

ROOT = Path(__file__).resolve().parent.parent
ABOVE_VFS = ("agent", "integrations")
RECORDS = {"ThreadStore", "ProposalStore"}
DATABASE_ATTRS = {"db", "engine"}


def _offences(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in DATABASE_ATTRS:
            yield node.lineno, f"reaches for .{node.attr}: {ast.unparse(node)}"
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in RECORDS:
                yield node.lineno, f"builds {name} by hand (ask a Memory: .threads, .queue)"
            elif (name == "getattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                  and node.args[1].value in DATABASE_ATTRS):
                yield node.lineno, f"asks getattr(..., {node.args[1].value!r}) (memory_of says None instead)"


def test_nothing_above_vfs_builds_records_or_reaches_for_the_database() -> None:
    found = []
    for folder in ABOVE_VFS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text("utf-8"), str(path))
            found += [f"{path.relative_to(ROOT)}:{line}: {what}" for line, what in _offences(tree)]
    assert not found, "\n".join(found)


def test_the_check_sees_each_form() -> None:
    source = """
threads = ThreadStore(ctx.store.db)
queue = vfs.ProposalStore(engine)
database = getattr(view.store, "db", None)
event.listen(store.engine, "commit", f)
"""
    lines = sorted({line for line, _ in _offences(ast.parse(source))})
    assert lines == [2, 3, 4, 5]
    assert not list(_offences(ast.parse('"""ThreadStore(store.db) in a docstring"""\nx = memory.threads\n')))


# -- open_memory on both databases --------------------------------------------------------

USER_TURN = {"role": "user", "content": [{"type": "text", "text": "Remember that Ann prefers tea."}]}


def test_a_thread_written_through_one_memory_is_read_by_another(backend_url: str) -> None:
    with open_memory(backend_url) as first:
        first.files.create_agent("a")
        tid = first.threads.create("a", "scripted")
        first.threads.append(tid, USER_TURN)
        first.rules("a").add("write_file(/knowledge/**)", "allow")
    with open_memory(backend_url, create=False) as second:
        assert second.threads.load(tid) == [USER_TURN]
        assert [t.id for t in second.threads.list("a")] == [tid]
        assert second.rules("a").rules() == [parse_rule("write_file(/knowledge/**)", "allow")]
        # The conversation file the threads keep is memory the agent's view reads.
        view = second.view("a", user="tester")
        assert view.glob("**", "/conversations") and "Ann prefers tea" in view.read(
            "/conversations" + str(second.threads.conversation_file(tid))).content
        assert second.queue.count_pending("a") == 0


def test_each_part_is_built_once_over_the_one_database(backend_url: str) -> None:
    with open_memory(backend_url) as memory:
        assert isinstance(memory.files, SqlStore)
        assert isinstance(memory.threads, ThreadStore) and memory.threads is memory.threads
        assert isinstance(memory.queue, ProposalStore) and memory.queue is memory.queue
        assert memory.rules("a") is memory.rules("a") and memory.rules("a") is not memory.rules("b")
        assert memory.threads.db is memory.files.db and memory.queue.db is memory.files.db
        assert memory.vectors is memory.files.vectors
        assert Memory.of(memory.files) is memory
        view = memory.view("a", user="u", org="o")
        assert (view.store, view.agent, view.user, view.org) == (memory.files, "a", "u", "o")
        assert memory_of(view) is memory and memory_of(memory.files) is memory


def test_closing_the_memory_closes_its_connections(backend_url: str) -> None:
    memory = open_memory(backend_url)
    used: list[object] = []  # each connection the parts took from the pool (old or new)
    closed: list[object] = []
    event.listen(memory.files.engine, "checkout", lambda conn, _record, _proxy: used.append(conn))
    event.listen(memory.files.engine, "close", lambda conn, _record: closed.append(conn))
    memory.files.create_agent("a")
    memory.threads.append(memory.threads.create("a", "scripted"), USER_TURN)
    memory.queue.count_pending("a")
    memory.files.search([memory.view("a").scope], "tea")
    assert used and not closed
    with memory:
        pass  # leaving the block closes it
    assert {id(c) for c in used} <= {id(c) for c in closed}
    memory.close()  # a second close is harmless


def test_closing_a_sqlite_memory_leaves_the_whole_database_in_its_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    wal = tmp_path / "m.db-wal"
    with open_memory(url) as memory:
        memory.files.create_agent("a")
        memory.threads.create("a", "scripted")
        assert wal.exists()
    assert not wal.exists()


def test_open_memory_create_false_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "m.db"
    with pytest.raises(DatabaseMissing):
        open_memory(f"sqlite:///{missing}", create=False)
    assert not missing.parent.exists()


def test_memory_of_a_store_it_did_not_open(store: SqlStore) -> None:
    memory = Memory.of(store)
    assert Memory.of(store) is memory and memory.files is store
    assert memory_of(AgentView(store, "a")) is memory


class _StoreDouble:
    """A store with no database: what a test or another program may hand an integration."""

    def read(self, scope: str, path: str) -> None:
        raise AssertionError("not called")


def test_a_store_without_a_database_has_no_memory() -> None:
    double = _StoreDouble()
    assert memory_of(double) is None  # type: ignore[arg-type]
    assert memory_of(AgentView(double, "a")) is None  # type: ignore[arg-type]


def test_on_statement_hears_each_statement_and_commit(tmp_path: Path) -> None:
    with open_memory(f"sqlite:///{tmp_path / 'm.db'}") as memory:
        heard: list[str] = []
        memory.on_statement(heard.append)
        memory.files.create_agent("a")
        assert any("INSERT" in s.upper() for s in heard) and "COMMIT" in heard


# -- the CLI opens one Memory per command ---------------------------------------------------


def test_ctx_memory_is_the_store_it_opened_and_closes_with_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    ctx = Ctx(url)
    store = ctx.store
    assert ctx.memory is Memory.of(store) and ctx.memory.files is store and ctx.existing_store is store
    ctx.memory.files.create_agent("a")
    assert ctx.memory.threads is ctx.memory.threads
    ctx.close()
    ctx.close()
    assert not (tmp_path / "m.db-wal").exists()  # every connection closed
    # A later command of the same invocation opens it again.
    assert ctx.memory.files.list_agents() == ["a"]
    ctx.close()


def test_ctx_memory_refuses_a_missing_database(tmp_path: Path) -> None:
    missing = tmp_path / "none" / "m.db"
    ctx = Ctx(f"sqlite:///{missing}")
    with pytest.raises(DatabaseMissing):
        _ = ctx.memory
    assert not missing.parent.exists()
    assert make_url(ctx.url).database == str(missing)
