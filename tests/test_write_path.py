"""The one write path: prepare -> (approve) -> commit, on SQLite and Postgres.

Preparing checks everything and stores nothing; committing stores exactly what was
prepared, or nothing when the file moved on since.
"""

from __future__ import annotations

import random
import re
import string
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memagent.vfs import SqlStore, open_store
from memagent.vfs.errors import (
    EditMismatch,
    InvalidPath,
    IsADirectory,
    NotFound,
    ReadOnly,
    RevisionNotFound,
    StaleVersion,
    ValidationFailed,
)
from memagent.vfs.files.edits import unified_diff
from memagent.vfs.scopes import AgentView
from memagent.vfs.types import PendingChange

S = "agent:a"


def fake_aws_key() -> str:
    rng = random.Random(5)
    return "AK" + "IA" + "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(16))


def test_prepare_stores_nothing_and_describes_the_change(store: SqlStore) -> None:
    before = store.generation(S)
    p = store.prepare_write(S, "notes//a.md", "one\ntwo\n")
    assert isinstance(p, PendingChange)
    assert (p.op, p.scope, p.path, p.shown, p.before, p.after, p.expected_version) == (
        "write", S, "/notes/a.md", "/notes/a.md", None, "one\ntwo\n", 0)
    assert p.new_file
    assert p.diff.startswith("--- /dev/null\n+++ /notes/a.md\n@@ -0,0 +1,2 @@\n+one\n+two\n")
    assert store.generation(S) == before and not store.exists(S, "/notes/a.md")
    change = store.commit(p, author="agent", approval="human")
    assert (change.path, change.version, change.before, change.after) == ("/notes/a.md", 1, None, "one\ntwo\n")
    assert store.history(S, "/notes/a.md")[0].message == "create"


def test_prepare_edit_and_delete(store: SqlStore) -> None:
    store.write(S, "/e.md", "a\nb\nc\n")
    p = store.prepare_edit(S, "/e.md", "b", "B")
    assert (p.op, p.before, p.after, p.expected_version, p.new_file) == ("edit", "a\nb\nc\n", "a\nB\nc\n", 1, False)
    assert "-b\n+B\n" in p.diff
    assert store.read(S, "/e.md").version == 1
    assert store.commit(p, author="agent", approval="yolo").version == 2
    d = store.prepare_delete(S, "/e.md")
    assert (d.op, d.after, d.expected_version) == ("delete", None, 2)
    assert "+++ /dev/null" in d.diff
    store.commit(d, author="agent", approval="human", message="tidy")
    assert not store.exists(S, "/e.md")
    assert [(r.version, r.message) for r in store.history(S, "/e.md")] == [(3, "tidy"), (2, "edit"), (1, "create")]


def test_failed_prepare_stores_nothing(store: SqlStore) -> None:
    store.write(S, "/f.md", "x\n")
    store.write(S, "/dir/in.md", "y\n")
    gen = store.generation(S)
    with pytest.raises(ValidationFailed):
        store.prepare_write(S, "/tools.json", "{not json")
    with pytest.raises(EditMismatch, match="0 matches"):
        store.prepare_edit(S, "/f.md", "zzz", "y")
    with pytest.raises(NotFound, match="no file at /missing.md"):
        store.prepare_edit(S, "/missing.md", "a", "b")
    with pytest.raises(NotFound):
        store.prepare_delete(S, "/missing.md")
    with pytest.raises(IsADirectory):
        store.prepare_write(S, "/dir", "z")
    with pytest.raises(IsADirectory):
        store.prepare_delete(S, "/dir")
    with pytest.raises(InvalidPath, match="is a file"):
        store.prepare_write(S, "/f.md/below.md", "z")
    with pytest.raises(StaleVersion, match="changed since you read it"):
        store.prepare_write(S, "/f.md", "z", expected_version=7)
    with pytest.raises(StaleVersion, match="already exists"):
        store.prepare_write(S, "/f.md", "z", expected_version=0)
    assert store.generation(S) == gen


def test_stale_commit_is_refused_and_stores_nothing(store: SqlStore) -> None:
    store.write(S, "/s.md", "v1\n")
    mine = store.prepare_edit(S, "/s.md", "v1", "mine")
    store.write(S, "/s.md", "theirs\n")  # someone else commits first
    with pytest.raises(StaleVersion, match="changed since you read it"):
        store.commit(mine, author="agent", approval="human")
    assert store.read(S, "/s.md").content == "theirs\n"
    assert [r.version for r in store.history(S, "/s.md")] == [2, 1]
    gone = store.prepare_delete(S, "/s.md")
    store.delete(S, "/s.md")
    with pytest.raises(StaleVersion, match="deleted"):
        store.commit(gone, author="agent", approval="human")
    assert len(store.history(S, "/s.md")) == 3


def test_creation_race_between_pending_changes(store: SqlStore) -> None:
    first = store.prepare_write(S, "/new.md", "A")
    second = store.prepare_write(S, "/new.md", "B")
    assert first.expected_version == second.expected_version == 0
    store.commit(first, author="agent", approval="human")
    with pytest.raises(StaleVersion):
        store.commit(second, author="agent", approval="human")
    assert store.read(S, "/new.md").content == "A"
    assert len(store.history(S, "/new.md")) == 1


def test_deleted_file_counts_as_not_live(store: SqlStore) -> None:
    store.write(S, "/r.md", "1")
    store.delete(S, "/r.md")
    p = store.prepare_write(S, "/r.md", "3", expected_version=0)
    assert p.new_file and p.expected_version == 0
    assert store.commit(p, author="agent", approval="human").version == 3
    again = store.prepare_write(S, "/r.md", "4")
    store.delete(S, "/r.md")
    with pytest.raises(StaleVersion):
        store.commit(again, author="agent", approval="human")


def test_commit_rechecks_directory_rules(store: SqlStore) -> None:
    p = store.prepare_write(S, "/d", "file")
    store.write(S, "/d/inside.md", "x")  # /d became a directory meanwhile
    with pytest.raises(IsADirectory):
        store.commit(p, author="agent", approval="human")
    q = store.prepare_write(S, "/f/below.md", "x")
    store.write(S, "/f", "now a file")
    with pytest.raises(InvalidPath, match="is a file"):
        store.commit(q, author="agent", approval="human")
    assert not store.exists(S, "/d") and not store.exists(S, "/f/below.md")


def test_commit_scans_the_message_for_secrets(store: SqlStore) -> None:
    p = store.prepare_write(S, "/m.md", "fine\n")
    with pytest.raises(ValidationFailed, match="revision message") as err:
        store.commit(p, author="cli", approval="cli", message=f"rotated {fake_aws_key()}")
    assert fake_aws_key() not in str(err.value)  # never echoed
    assert not store.exists(S, "/m.md")
    with pytest.raises(ValidationFailed):
        store.write(S, "/m.md", "fine\n", message=f"key {fake_aws_key()}")
    assert not store.exists(S, "/m.md")


def test_view_prepare_and_commit_in_view_paths(store: SqlStore) -> None:
    view = AgentView(store, "a", user="tester")
    p = view.prepare_write("/user/prefs.md", "- short answers\n")
    assert (p.scope, p.path, p.shown) == ("user:tester", "/prefs.md", "/user/prefs.md")
    assert "+++ /user/prefs.md" in p.diff
    c = view.commit(p, author="agent", approval="human")
    assert (c.path, c.version) == ("/user/prefs.md", 1)
    e = view.prepare_edit("/user/prefs.md", "short", "brief")
    assert e.expected_version == 1 and view.commit(e, author="agent", approval="yolo").after == "- brief answers\n"
    d = view.prepare_delete("/user/prefs.md", expected_version=2)
    assert view.commit(d, author="user", approval="human").path == "/user/prefs.md"
    assert store.history("user:tester", "/prefs.md")[0].author == "user"


def test_view_errors_name_view_paths(store: SqlStore) -> None:
    view = AgentView(store, "a", user="tester", org="acme")
    with pytest.raises(NotFound, match="no file at /user/missing.md;"):
        view.read("/user/missing.md")
    with pytest.raises(NotFound, match="/user/missing.md"):
        view.prepare_edit("/user/missing.md", "a", "b")
    with pytest.raises(NotFound, match="/user/missing.md"):
        view.history("/user/missing.md")
    with pytest.raises(NotFound, match="no directory or file at /user/nothing"):
        view.ls("/user/nothing")
    with pytest.raises(ReadOnly, match="/org/x.md"):
        view.prepare_write("/org/x.md", "x")
    view.write("/user/k.md", "a a\n")
    with pytest.raises(EditMismatch, match="in /user/k.md"):
        view.edit("/user/k.md", "a", "b")
    with pytest.raises(StaleVersion, match="^/user/k.md changed since you read it"):
        view.write("/user/k.md", "b", expected_version=5)
    with pytest.raises(RevisionNotFound, match="/user/k.md has no version 9"):
        view.revert("/user/k.md", 9)
    with pytest.raises(ValidationFailed, match="^/user/skills/x.md"):
        view.write("/user/skills/x.md", "no frontmatter\n")
    with pytest.raises(InvalidPath, match="/user/k.md is a file, so /user/k.md/x.md"):
        view.write("/user/k.md/x.md", "x")
    view.write("/user/dir/f.md", "x")
    with pytest.raises(IsADirectory, match="^/user/dir is a directory"):
        view.read("/user/dir")
    with pytest.raises(IsADirectory, match="^/user/dir is a directory"):
        view.write("/user/dir", "x")
    with pytest.raises(InvalidPath, match="/user names a directory"):
        view.read("/user")
    view.delete("/user/k.md")
    with pytest.raises(NotFound, match="/user/k.md was deleted"):
        view.read("/user/k.md")
    with pytest.raises(Exception, match="/user/dir/f.md, which has 1 lines"):
        view.read("/user/dir/f.md", offset=5)
    view.write("/user/dir/f.md", "y")
    assert view.diff("/user/dir/f.md", 1, 2).startswith("--- /user/dir/f.md@1\n+++ /user/dir/f.md@2\n")
    view.move("/user/dir/f.md", "/user/g.md")
    with pytest.raises(NotFound, match="^/user/dir/f.md was deleted"):
        view.move("/user/dir/f.md", "/user/h.md")


def test_write_edit_delete_are_prepare_and_commit(store: SqlStore) -> None:
    """The old one-call API keeps its behaviour (messages, versions, before/after)."""
    assert store.write(S, "/w.md", "1").version == 1
    assert store.write(S, "/w.md", "2", expected_version=1).before == "1"
    assert store.edit(S, "/w.md", "2", "3").after == "3"
    assert store.delete(S, "/w.md", expected_version=3).after is None
    assert [r.message for r in store.history(S, "/w.md")] == ["delete", "edit", "write", "create"]


def test_one_line_edit_of_repeated_lines_is_a_one_line_diff(store: SqlStore) -> None:
    text = "- same item\n" * 20_000
    store.write(S, "/big.md", text)
    lines = text.splitlines(keepends=True)
    lines[12_345] = "- changed item\n"
    p = store.prepare_write(S, "/big.md", "".join(lines))
    body = p.diff.splitlines()[2:]
    assert [line for line in body if line.startswith("-")] == ["-- same item"]
    assert [line for line in body if line.startswith("+")] == ["+- changed item"]
    assert body[0] == "@@ -12343,7 +12343,7 @@"
    assert len(p.diff) < 300
    store.commit(p, author="agent", approval="human")
    stored = store.diff(S, "/big.md", 1, 2)
    assert stored.count("\n-") == 1 and stored.count("\n+") == 1 + 1  # the +++ header and the line


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ("a\nb\nc\n", "a\nc\n", "--- x\n+++ y\n@@ -1,3 +1,2 @@\n a\n-b\n c\n"),
        ("a\n", "a", "--- x\n+++ y\n@@ -1 +1 @@\n-a\n+a\n\\ No newline at end of file\n"),
        (None, "", ""),
        ("same\n", "same\n", ""),
        ("x\n", None, "--- x\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"),
    ],
)
def test_unified_diff_format(before: str | None, after: str | None, expected: str) -> None:
    assert unified_diff(before, after, "x", "y") == expected


def test_diff_hunks_use_whole_file_line_numbers() -> None:
    old = "".join(f"{i}\n" for i in range(1, 101))
    new = old.replace("10\n", "ten\n", 1).replace("90\n", "ninety\n", 1)
    out = unified_diff(old, new, "x", "y")
    assert "@@ -7,7 +7,7 @@\n 7\n 8\n 9\n-10\n+ten\n 11\n 12\n 13\n" in out
    assert "@@ -87,7 +87,7 @@\n" in out


def test_close_and_context_manager(backend_url: str) -> None:
    with open_store(backend_url) as st:
        st.create_agent("c")
        assert st.list_agents() == ["c"]
    assert st.engine.pool.checkedout() == 0
    st2 = open_store(backend_url)
    st2.close()
    st2.close()  # closing twice is harmless


def _apply(before: str, diff: str) -> str:
    """Apply a unified diff made by ``unified_diff`` (checks hunk headers and context)."""
    old = before.splitlines(keepends=True)
    lines = diff.splitlines(keepends=True)[2:]
    out: list[str] = []
    pos = i = 0
    while i < len(lines):
        m = re.fullmatch(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@\n", lines[i])
        assert m, lines[i]
        n_old = 1 if m[2] is None else int(m[2])  # "@@ -5 +5 @@" counts one line
        n_new = 1 if m[4] is None else int(m[4])
        start = int(m[1]) - 1 if n_old else int(m[1])
        out += old[pos:start]
        pos = start
        assert len(out) == (int(m[3]) - 1 if n_new else int(m[3]))
        i += 1
        seen_old = seen_new = 0
        while i < len(lines) and not lines[i].startswith("@@"):
            line = lines[i]
            i += 1
            body = line[1:]
            if i < len(lines) and lines[i] == "\\ No newline at end of file\n":
                body, i = body[:-1], i + 1
            if line[0] in " -":
                assert old[pos] == body
                pos, seen_old = pos + 1, seen_old + 1
            if line[0] in " +":
                out.append(body)
                seen_new += 1
        assert (seen_old, seen_new) == (n_old, n_new)
    return "".join(out + old[pos:])


lines_of = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "same\n", "x"]), max_size=40).map("".join)


@given(lines_of, lines_of)
@settings(max_examples=300)
def test_unified_diff_applies(before: str, after: str) -> None:
    out = unified_diff(before, after, "x", "y")
    assert (out == "") == (before == after)
    assert _apply(before, out) == after


def test_scattered_edits_in_repeated_lines_stay_small() -> None:
    before = "- same item\n" * 20_000
    lines = before.splitlines(keepends=True)
    for i in range(0, 20_000, 1_000):
        lines[i] = "- other item\n"
    after = "".join(lines)
    out = unified_diff(before, after, "x", "x")
    body = out.splitlines()[2:]
    assert sum(1 for line in body if line.startswith("-")) == 20
    assert sum(1 for line in body if line.startswith("+")) == 20
    assert _apply(before, out) == after


def test_big_rewrites_are_not_quadratic() -> None:
    """Whole-file rewrites of repeated lines finish well inside a generous bound."""
    for a, b in ((3, 5), (1, 2)):
        before = "".join(f"{i % a}\n" for i in range(20_000))
        after = "".join(f"{i % b}\n" for i in range(20_000))
        started = time.monotonic()
        out = unified_diff(before, after, "x", "x")
        assert time.monotonic() - started < 20
        assert _apply(before, out) == after
