"""The agent's approval rules in the integrations (issue #36, "rules ignored by the integrations").

A ``write_file(/knowledge/**) deny`` rule was ignored by the deepagents backend and the
Anthropic memory-tool adapter: with an approving callback the files were stored, and
with ``approve="queue"`` proposals were queued for the denied path. Both adapters now
apply the rules as chat, ``run`` and ``mcp serve`` do: allow stores without asking,
ask is the adapter's own policy, queue makes a proposal, deny refuses with the rule's
message (also under ``approve="queue"``), and ``approve="yolo"`` overrides them as
``--yolo`` does. Each case runs on both adapters, on SQLite and Postgres, through the
adapters' own entry points (deepagents' ``BackendProtocol`` methods; the memory tool's
``call``, which the SDK's tool runner uses).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from anthropic.lib.tools import ToolError

from memagent.integrations._folder import Approve
from memagent.integrations.anthropic import MemagentMemoryTool
from memagent.integrations.deepagents import MemagentBackend
from memagent.vfs import SqlStore
from memagent.vfs.records.queue import ProposalStore
from memagent.vfs.records.rules import RuleBook
from memagent.vfs.types import PendingChange

SCOPE = "agent:a"
RULES = [("write_file(/knowledge/**)", "deny"), ("edit_file(/knowledge/**)", "deny"),
         ("delete_file(/knowledge/**)", "deny"), ("write_file(/inbox/**)", "allow"),
         ("write_file(/drafts/**)", "queue")]


@dataclass
class Adapter:
    """One integration driven through its own entry points: each call returns "" or the error it reported."""

    write: Callable[[str, str], str]
    edit: Callable[[str, str, str], str]
    delete: Callable[[str], str]
    move: Callable[[str, str], str] | None  # only the memory tool renames


def _deepagents(store: SqlStore, approve: Approve) -> Adapter:
    b = MemagentBackend(store, "a", approve=approve)
    return Adapter(write=lambda p, c: b.write(p, c).error or "",
                   edit=lambda p, o, n: b.edit(p, o, n).error or "",
                   delete=lambda p: b.delete(p).error or "", move=None)


def _anthropic(store: SqlStore, approve: Approve) -> Adapter:
    tool = MemagentMemoryTool(store, "a", approve=approve)

    def run(command: dict[str, Any]) -> str:
        try:
            tool.call(command)
        except ToolError as exc:
            return str(exc)
        return ""

    return Adapter(
        write=lambda p, c: run({"command": "create", "path": "/memories" + p, "file_text": c}),
        edit=lambda p, o, n: run({"command": "str_replace", "path": "/memories" + p, "old_str": o, "new_str": n}),
        delete=lambda p: run({"command": "delete", "path": "/memories" + p}),
        move=lambda a, b: run({"command": "rename", "old_path": "/memories" + a, "new_path": "/memories" + b}))


ADAPTERS = {"deepagents": _deepagents, "anthropic": _anthropic}


@pytest.fixture(params=sorted(ADAPTERS))
def adapter(request: pytest.FixtureRequest, store: SqlStore) -> Callable[[Approve], Adapter]:
    """The adapter under test over ``store``'s agent ``a``, which has ``RULES``, /knowledge/old.md and /outside.md."""
    book = RuleBook(store, "a")
    for spec, action in RULES:
        book.add(spec, action)
    store.write(SCOPE, "/knowledge/old.md", "kept\n")
    store.write(SCOPE, "/outside.md", "outside\n")
    make = ADAPTERS[request.param]
    return lambda approve: make(store, approve)


def _asked() -> tuple[list[str], Callable[[PendingChange], bool]]:
    asked: list[str] = []

    def approve(p: PendingChange) -> bool:
        asked.append(p.path)
        return True

    return asked, approve


def _pending(store: SqlStore) -> list[tuple[str, str]]:
    return [(p.op, p.path) for p in ProposalStore(store.db).pending("a")]


def test_a_deny_rule_refuses_even_an_approving_callback(adapter: Callable[[Approve], Adapter],
                                                          store: SqlStore) -> None:
    asked, approve = _asked()
    a = adapter(approve)
    error = a.write("/knowledge/new.md", "secret plan\n")
    assert "/knowledge/new.md was refused by approval rule 1 (write_file(/knowledge/**) deny)" in error
    assert "nothing was stored" in error and "\n" not in error
    assert "approval rule 2" in a.edit("/knowledge/old.md", "kept", "changed")
    assert "approval rule 3" in a.delete("/knowledge/old.md")
    if a.move is not None:  # moving a file out of /knowledge deletes it there
        assert "approval rule 3" in a.move("/knowledge/old.md", "/elsewhere.md")
        assert "approval rule 1" in a.move("/outside.md", "/knowledge/moved.md")
        assert store.exists(SCOPE, "/outside.md") and not store.exists(SCOPE, "/knowledge/moved.md")
    assert asked == []  # the rule decided; the callback was never asked
    assert not store.exists(SCOPE, "/knowledge/new.md") and not store.exists(SCOPE, "/elsewhere.md")
    assert store.read(SCOPE, "/knowledge/old.md").content == "kept\n"
    assert len(store.history(SCOPE, "/knowledge/old.md")) == 1
    # No rule: the callback is asked, as before.
    assert a.write("/notes.md", "hello\n") == ""
    assert asked == ["/notes.md"] and store.history(SCOPE, "/notes.md")[-1].approval == "human"


def test_a_deny_rule_refuses_under_queue_instead_of_queueing(adapter: Callable[[Approve], Adapter],
                                                              store: SqlStore) -> None:
    a = adapter("queue")
    error = a.write("/knowledge/new.md", "secret plan\n")
    assert "refused by approval rule 1" in error and "Queued" not in error
    assert "refused by approval rule 2" in a.edit("/knowledge/old.md", "kept", "changed")
    assert "refused by approval rule 3" in a.delete("/knowledge/old.md")
    assert _pending(store) == []
    # Without a rule the change is queued, as before.
    assert "Queued for review" in a.write("/notes.md", "hello\n")
    assert _pending(store) == [("write", "/notes.md")]
    assert not store.exists(SCOPE, "/knowledge/new.md") and not store.exists(SCOPE, "/notes.md")


def test_allow_stores_without_asking_and_queue_makes_a_proposal(adapter: Callable[[Approve], Adapter],
                                                                store: SqlStore) -> None:
    asked, approve = _asked()
    a = adapter(approve)
    assert a.write("/inbox/today.md", "call Bob\n") == ""
    assert store.history(SCOPE, "/inbox/today.md")[-1].approval == "rule"
    error = a.write("/drafts/idea.md", "an idea\n")
    assert "Queued for review" in error
    assert _pending(store) == [("write", "/drafts/idea.md")] and not store.exists(SCOPE, "/drafts/idea.md")
    assert asked == []
    # An allow rule needs no approver at all (a person set it with `memagent approval add`) ...
    assert adapter(None).write("/inbox/later.md", "more\n") == ""
    # ... and approve="yolo" overrides the rules, as --yolo does everywhere.
    assert adapter("yolo").write("/knowledge/yolo.md", "stored\n") == ""
    assert store.history(SCOPE, "/knowledge/yolo.md")[-1].approval == "yolo"
