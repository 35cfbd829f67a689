"""Look-alike names (issue #36): a new name that reads like an existing sibling is refused,
naming the sibling; characters that read as a folder separator are refused outright; two
spellings that render the same (NFC and NFD) are one path. On SQLite and Postgres, for
every writer that can create a file: ``prepare_write`` (tools, CLI, MCP, integrations),
moves, reverts, ``bulk_write`` (import) and ``create_agent``.
"""

from __future__ import annotations

import pytest

from memagent.agent.gate import Decision
from memagent.vfs import SqlStore, entrance
from memagent.vfs.errors import InvalidPath
from memagent.vfs.records.rules import RuleBook
from memagent.vfs.scopes import AgentView
from tests.agent_helpers import last_tool_result, make_agent

S = "agent:a"

# Each reads as /knowledge/ to a person who approves by eye.
LOOKALIKE_FOLDERS = [
    "/Knowledge/x.md", "/KNOWLEDGE/deep/er/x.md", "/\uff4bnowledge/x.md", "/kno\u0301wledge/x.md",
    "/kn\u00f3wledge/x.md", "/knowledge\u0338/x.md", "/knowledge /x.md", "/knowledge./x.md",
    "/knowledge\u00a0/x.md", "/kn\u043ewledge/x.md", "/knowledge\u2009/x.md",
]
# Each reads as /knowledge/a.md.
LOOKALIKE_FILES = ["/knowledge/A.md", "/knowledge/a.md ", "/knowledge/a.md.", "/knowledge/\uff41.md",
                   "/knowledge/a\u0308.md", "/knowledge/\u0430.md", "/knowledge/a.MD"]
SLASHES = ["/knowledge\u2215x.md", "/knowledge\u2044x.md", "/knowledge\uff0fx.md", "/knowledge\u29f8x.md",
           "/knowledge\u2571x.md", "/knowledge%2fx.md", "/knowledge%2Fx.md"]


def refusal(store: SqlStore, path: str) -> str:
    with pytest.raises(InvalidPath) as err:
        store.prepare_write(S, path, "x\n")
    msg = str(err.value)
    assert "\n" not in msg and "Traceback" not in msg
    return msg


def test_a_new_folder_that_looks_like_an_existing_one_is_refused_naming_it(store: SqlStore) -> None:
    store.write(S, "/knowledge/a.md", "a\n")
    for path in LOOKALIKE_FOLDERS:
        msg = refusal(store, path)
        assert "looks like the existing folder /knowledge/" in msg, (path, msg)
        assert "did you mean /knowledge/" in msg, (path, msg)
    assert [e.name for e in store.ls(S, "/")] == ["knowledge"]


def test_a_new_file_that_looks_like_an_existing_sibling_is_refused_naming_it(store: SqlStore) -> None:
    store.write(S, "/knowledge/a.md", "a\n")
    for path in LOOKALIKE_FILES:
        msg = refusal(store, path)
        assert "looks like the existing file /knowledge/a.md" in msg and "did you mean /knowledge/a.md?" in msg, \
            (path, msg)
    # A file that reads like a folder beside it, and the other way round.
    assert "existing folder /knowledge/" in refusal(store, "/Knowledge")
    store.write(S, "/notes.md", "n\n")
    assert "existing file /notes.md" in refusal(store, "/Notes.md/x.md")
    assert [e.name for e in store.ls(S, "/knowledge")] == ["a.md"]


def test_slash_lookalikes_are_refused_outright(store: SqlStore) -> None:
    for path in SLASHES:  # even with no /knowledge/ to look like
        msg = refusal(store, path)
        assert "looks like" in msg or "percent-encoded" in msg, (path, msg)
    assert store.all_files(S) == []


def test_ordinary_distinct_names_keep_working(store: SqlStore) -> None:
    store.write(S, "/knowledge/a.md", "a\n")
    for path in ("/notes.md", "/notes2.md", "/notes.txt", "/knowledge/a2.md", "/knowledge/b.md",
                 "/other/Knowledge/x.md", "/other/knowledge.md", "/knowledge-base/x.md", "/k/a-b.md", "/k/a_b.md"):
        store.write(S, path, "x\n")
    store.write(S, "/knowledge/a.md", "again\n")  # an existing path in its own spelling
    assert store.read(S, "/knowledge/a.md").version == 2
    store.write(S, "/other/knowledge.md", "y\n")
    assert store.read(S, "/other/knowledge.md").version == 2


def test_nfd_and_nfc_spellings_are_one_path(store: SqlStore) -> None:
    nfc, nfd = "/caf\u00e9/t.md", "/cafe\u0301/t.md"
    store.write(S, nfd, "one\n")
    store.write(S, nfc, "two\n")
    assert [f.path for f in store.all_files(S)] == [nfc]
    assert store.read(S, nfd).content == "two\n" and store.read(S, nfc).version == 2
    assert [e.name for e in store.ls(S, "/")] == ["caf\u00e9"]


def test_an_nfc_rule_matches_the_nfd_spelling(store: SqlStore) -> None:
    RuleBook(store, "a").add("write_file(/caf\u00e9/**)", "deny")
    agent, model, approver = make_agent(store, answers=[Decision("approve")] * 3)
    model.enqueue_tool_use("write_file", {"file_path": "/cafe\u0301/t.md", "content": "t\n"})
    model.enqueue_text("ok")
    agent.turn("write it")
    result = last_tool_result(model)
    assert result["is_error"] and "refused by approval rule 1" in str(result["content"])
    assert approver.asked == [] and store.all_files(S) == []


def test_a_model_under_a_deny_rule_stores_no_lookalike(store: SqlStore) -> None:
    """The attack: with /knowledge/** denied, every look-alike spelling was stored, one
    approval at a time by a person who read it as something else."""
    store.write(S, "/knowledge/a.md", "a\n")
    RuleBook(store, "a").add("write_file(/knowledge/**)", "deny")
    tries = [*LOOKALIKE_FOLDERS, *SLASHES]
    agent, model, approver = make_agent(store, answers=[Decision("approve")] * len(tries))
    for path in tries:
        model.enqueue_tool_use("write_file", {"file_path": path, "content": "x\n"})
    model.enqueue_text("done")
    agent.turn("file these")
    assert [f.path for f in store.all_files(S)] == ["/knowledge/a.md"]
    assert approver.asked == []  # refused before anyone was asked
    for i, path in enumerate(tries):
        result = last_tool_result(model, i + 1)
        assert result["is_error"], (path, result)


def test_mounts_count_as_siblings_of_the_agents_root(store: SqlStore) -> None:
    view = AgentView(store, "a", user="tester")
    view.write("/user/notes.md", "n\n")
    for path in ("/User/x.md", "/\uff55ser/x.md"):
        with pytest.raises(InvalidPath, match="looks like the reserved folder /user/"):
            view.prepare_write(path, "x\n")
    with pytest.raises(InvalidPath, match="did you mean /user/notes.md"):
        view.prepare_write("/user/Notes.md", "x\n")  # the mount's own scope, named as the view shows it


def test_move_and_revert_destinations_are_checked(store: SqlStore) -> None:
    store.write(S, "/knowledge/a.md", "a\n")
    store.write(S, "/draft.md", "d\n")
    with pytest.raises(InvalidPath, match="did you mean /knowledge/draft.md"):
        store.move(S, "/draft.md", "/Knowledge/draft.md")
    with pytest.raises(InvalidPath, match="existing folder /knowledge/"):
        entrance.move(store, S, "/draft.md", "/knowledge /draft.md", policy=entrance.yolo, author="cli")
    store.move(S, "/draft.md", "/knowledge/draft.md")  # the existing spelling
    # A deleted file's name is free; reverting it back beside a look-alike is not.
    store.write(S, "/k/Notes.md", "1\n")
    store.delete(S, "/k/Notes.md")
    store.write(S, "/k/notes.md", "2\n")
    with pytest.raises(InvalidPath, match="existing file /k/notes.md"):
        store.revert(S, "/k/Notes.md", 1)
    assert sorted(f.path for f in store.all_files(S)) == ["/k/notes.md", "/knowledge/a.md", "/knowledge/draft.md"]


def test_bulk_writes_are_checked_against_the_store_and_themselves(store: SqlStore) -> None:
    store.write(S, "/knowledge/a.md", "a\n")
    with pytest.raises(InvalidPath, match="existing folder /knowledge/"):
        store.bulk_write(S, {"/fine.md": "f\n", "/Knowledge/b.md": "b\n"})
    with pytest.raises(InvalidPath, match=r"/n/ \(also in this batch\)|/N/ \(also in this batch\)"):
        store.bulk_write(S, {"/n/a.md": "a\n", "/N/b.md": "b\n"})
    with pytest.raises(InvalidPath, match="also in this batch"):
        store.create_agent("b", {"/notes.md": "1\n", "/Notes.md": "2\n"})
    assert "b" not in store.list_agents()
    assert [f.path for f in store.all_files(S)] == ["/knowledge/a.md"]
    # Overwriting existing files and adding distinct ones still works in one batch.
    store.bulk_write(S, {"/knowledge/a.md": "a2\n", "/knowledge/b.md": "b\n", "/x/y.md": "y\n"})
    assert [f.path for f in store.all_files(S)] == ["/knowledge/a.md", "/knowledge/b.md", "/x/y.md"]
