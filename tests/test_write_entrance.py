"""vfs/entrance.py: the one entrance from a prepared change to its commit, on both databases.

No-op check, the reason (one bounded line, secret-checked before the policy is
asked), the policies (refuse by default, yolo, a person's own approval, a yes/no
callback, queue for review) and the commit at the version the writer read.
"""

from __future__ import annotations

import pytest

from memagent.vfs import SqlStore, entrance
from memagent.vfs.errors import StaleVersion, ValidationFailed
from memagent.vfs.records.queue import ProposalStore
from memagent.vfs.scopes import AgentView
from memagent.vfs.types import PendingChange
from tests.test_write_path import fake_aws_key

S = "agent:a"


def _state(store: SqlStore) -> list[tuple[str, int]]:
    return [(f.path, f.version) for f in store.all_files(S)]


def test_without_a_policy_nothing_is_stored(store: SqlStore) -> None:
    store.write(S, "/n.md", "one\n")
    before = _state(store)
    for pending in (store.prepare_write(S, "/new.md", "new\n"), store.prepare_edit(S, "/n.md", "one", "two"),
                    store.prepare_delete(S, "/n.md")):
        result = entrance.submit(store, pending, author="agent")
        assert result.status == "rejected" and result.change is None
        assert pending.shown in result.message and "no approver" in result.message
    assert _state(store) == before
    with pytest.raises(entrance.Refused, match="nothing was stored"):
        entrance.require(entrance.submit(store, store.prepare_write(S, "/new.md", "x\n"), author="agent"))
    assert _state(store) == before


def test_yolo_commits_and_records_the_approval_and_reason(store: SqlStore) -> None:
    view = AgentView(store, "a")
    pending = view.prepare_write("/n.md", "one\n")
    result = entrance.submit(store, pending, policy=entrance.yolo, author="agent", reason="  why\nthis  ")
    assert result.committed and result.change is not None
    assert (result.change.path, result.change.version, result.change.after) == ("/n.md", 1, "one\n")
    [rev] = store.history(S, "/n.md")
    assert (rev.author, rev.approval, rev.message) == ("agent", "yolo", "why this")


def test_a_change_that_changes_nothing_asks_no_one_and_stores_nothing(store: SqlStore) -> None:
    store.write(S, "/n.md", "one\n")
    asked: list[PendingChange] = []
    policy = entrance.asking(lambda p: asked.append(p) is None)
    result = entrance.submit(store, store.prepare_write(S, "/n.md", "one\n"), policy=policy, author="agent")
    assert result.status == "unchanged" and not asked
    assert _state(store) == [("/n.md", 1)]


def test_a_secret_in_the_reason_is_refused_before_anyone_is_asked(store: SqlStore) -> None:
    asked: list[PendingChange] = []
    policy = entrance.asking(lambda p: asked.append(p) is None)
    with pytest.raises(ValidationFailed, match="revision message") as err:
        entrance.submit(store, store.prepare_write(S, "/n.md", "x\n"), policy=policy, author="agent",
                      reason=f"rotated {fake_aws_key()}")
    assert fake_aws_key() not in str(err.value)
    assert not asked and _state(store) == []


def test_the_reason_is_one_bounded_line() -> None:
    assert entrance.reason_line("a\n\tb   c") == "a b c"
    assert entrance.reason_line(None) == "" and entrance.reason_line(42) == ""
    long = entrance.reason_line("x" * 1000)
    assert len(long) == entrance.REASON_CHARS and long.endswith("…")


def test_a_callback_decides_each_change(store: SqlStore) -> None:
    policy = entrance.asking(lambda p: "no" not in (p.after or ""))
    ok = entrance.submit(store, store.prepare_write(S, "/ok.md", "yes\n"), policy=policy, author="agent")
    no = entrance.submit(store, store.prepare_write(S, "/no.md", "no\n"), policy=policy, author="agent")
    assert ok.committed and no.status == "rejected" and "refused by the approver" in no.message
    assert store.history(S, "/ok.md")[0].approval == "human"
    assert _state(store) == [("/ok.md", 1)]


def test_a_stale_change_is_refused_and_nothing_is_stored(store: SqlStore) -> None:
    store.write(S, "/n.md", "one\n")
    pending = store.prepare_edit(S, "/n.md", "one", "two")

    def meddle(request: entrance.Request) -> entrance.Verdict:
        # Another writer commits between this writer's read and its commit.
        store.write(S, "/n.md", "someone else\n")
        return entrance.Verdict.approve("human")

    with pytest.raises(StaleVersion):
        entrance.submit(store, pending, policy=meddle, author="agent")
    assert store.read(S, "/n.md").content == "someone else\n"
    assert [r.version for r in store.history(S, "/n.md")] == [2, 1]


def test_a_person_s_own_command_is_approved_as_theirs(store: SqlStore) -> None:
    view = AgentView(store, "a")
    result = entrance.submit(store, view.prepare_write("/n.md", "x\n"), policy=entrance.approved("cli"), author="cli")
    assert result.committed
    assert (store.history(S, "/n.md")[0].author, store.history(S, "/n.md")[0].approval) == ("cli", "cli")


def test_queue_stores_a_proposal_and_no_file(store: SqlStore) -> None:
    store.write(S, "/n.md", "one\n")
    queue = ProposalStore(store.engine)
    policy = entrance.queue(queue, "a", by="test")
    result = entrance.submit(store, store.prepare_edit(S, "/n.md", "one", "two"), policy=policy, author="agent",
                           reason="tidy")
    assert result.status == "queued" and result.proposal is not None
    assert f"proposal #{result.proposal}" in result.message and "memagent review a" in result.message
    assert store.read(S, "/n.md").content == "one\n"
    [p] = queue.pending("a")
    assert (p.id, p.op, p.base_version, p.before, p.after, p.reason) == (
        result.proposal, "edit", 1, "one\n", "two\n", "tidy")


def test_a_move_takes_the_entrance(store: SqlStore) -> None:
    store.write(S, "/a.md", "alpha\n")
    before = _state(store)
    # Without a policy nothing moves; a queueing policy is refused before it stores a proposal.
    result = entrance.move(store, S, "/a.md", "/b.md", author="agent")
    assert result.status == "rejected" and "no approver" in result.message
    with pytest.raises(entrance.Refused, match="cannot be queued"):
        entrance.move(store, S, "/a.md", "/b.md", author="agent",
                    policy=entrance.queue(ProposalStore(store.engine), "a", by="test"))
    assert ProposalStore(store.engine).pending("a") == []
    assert _state(store) == before
    # The policy sees the file as it would arrive.
    asked: list[PendingChange] = []
    result = entrance.move(store, S, "/a.md", "/b.md", author="agent", reason="tidy",
                         policy=entrance.asking(lambda p: asked.append(p) is None))
    assert [(p.shown, p.after) for p in asked] == [("/b.md", "alpha\n")]
    assert result.status == "committed" and result.change is not None and result.change.path == "/b.md"
    assert not store.exists(S, "/a.md") and store.read(S, "/b.md").content == "alpha\n"
    assert store.history(S, "/b.md")[-1].message == "tidy"


def test_a_move_of_a_file_changed_since_its_read_stores_nothing(store: SqlStore) -> None:
    store.write(S, "/a.md", "alpha\n")

    def meanwhile(request: entrance.Request) -> entrance.Verdict:
        store.write(S, "/a.md", "beta\n", expected_version=1)  # another writer, after the read
        return entrance.Verdict.approve("yolo")

    with pytest.raises(StaleVersion):
        entrance.move(store, S, "/a.md", "/b.md", author="agent", policy=meanwhile)
    assert store.read(S, "/a.md").content == "beta\n" and not store.exists(S, "/b.md")


def test_a_view_move_goes_through_the_policy(store: SqlStore) -> None:
    view = AgentView(store, "a")
    view.write("/a.md", "alpha\n")
    with pytest.raises(entrance.Refused, match="refused"):
        view.move("/a.md", "/b.md", policy=entrance.refuse)
    assert view.exists("/a.md") and not view.exists("/b.md")
    assert view.move("/a.md", "/b.md", policy=entrance.yolo).path == "/b.md"
