"""memagent.integrations.anthropic: Claude's memory tool over an agent's memory.

Driven through the real SDK's tool runner (``client.beta.messages.tool_runner``)
against the local fake Messages API: the scripted model calls the memory tool, the
SDK runs our handler and sends the result back, and the test reads both what the
model was told and the revisions in the store (SQLite and Postgres).
"""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import pytest
from anthropic.lib.tools import ToolError

from bench.fake_messages_api import FakeMessagesAPI
from memagent.integrations.anthropic import AsyncMemagentMemoryTool, MemagentMemoryTool
from memagent.vfs import SqlStore
from memagent.vfs.types import PendingChange

MODEL = "claude-sonnet-5-5"


def _client(api: FakeMessagesAPI) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test-key", base_url=api.base_url, max_retries=0)


def _run(api: FakeMessagesAPI, tool: MemagentMemoryTool, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Script one memory call per model turn, then a closing text; run the SDK's tool
    runner to the end; return the tool_result blocks the SDK sent back, in order."""
    for call in calls:
        api.enqueue_tool_use("memory", call)
    api.enqueue_text("Done.")
    runner = _client(api).beta.messages.tool_runner(
        model=MODEL, max_tokens=1024, tools=[tool],
        messages=[{"role": "user", "content": "Remember that I like espresso."}],
    )
    final = runner.until_done()
    assert final.content[0].type == "text" and final.content[0].text == "Done."
    assert api.pending == 0
    results = []
    for body in api.requests[1:]:
        block = body["messages"][-1]["content"][0]
        assert block["type"] == "tool_result"
        results.append(block)
    return results


def _text(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(part["text"] for part in content)


def test_a_scripted_conversation_leaves_validated_revisions(store: SqlStore, api: FakeMessagesAPI) -> None:
    store.write("agent:a", "/AGENTS.md", "Be brief.\n")
    tool = MemagentMemoryTool(store, "a", approve="yolo")
    results = _run(api, tool, [
        {"command": "view", "path": "/memories"},
        {"command": "create", "path": "/memories/notes/coffee.md", "file_text": "likes: espresso\n"},
        {"command": "str_replace", "path": "/memories/notes/coffee.md", "old_str": "espresso",
         "new_str": "flat white"},
        {"command": "insert", "path": "/memories/notes/coffee.md", "insert_line": 0, "insert_text": "# Coffee\n"},
        {"command": "view", "path": "/memories/notes/coffee.md"},
        {"command": "rename", "path": None, "old_path": "/memories/notes/coffee.md",
         "new_path": "/memories/people/me.md"},
        {"command": "create", "path": "/memories/skills/bad.md", "file_text": "no frontmatter here\n"},
        {"command": "view", "path": "/memories"},
        {"command": "delete", "path": "/memories/people/me.md"},
    ])
    # The request advertised the client-side memory tool.
    assert api.requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    texts = [_text(r) for r in results]
    errors = [bool(r.get("is_error")) for r in results]
    assert errors == [False] * 6 + [True] + [False] * 2
    assert texts[0] == ("Here're the files and directories up to 2 levels deep in /memories, excluding hidden "
                        "items:\n4K\t/memories\n10B\t/memories/AGENTS.md")
    assert texts[1] == "File created successfully at: /memories/notes/coffee.md"
    assert texts[2] == ("The memory file has been edited. Here is the snippet showing the change (with line "
                        "numbers):\n     1\tlikes: flat white\n     2\t")
    assert texts[3] == "The file /memories/notes/coffee.md has been edited."
    assert texts[4] == ("Here's the content of /memories/notes/coffee.md with line numbers:\n"
                        "     1\t# Coffee\n     2\tlikes: flat white\n     3\t")
    assert texts[5] == "Successfully renamed /memories/notes/coffee.md to /memories/people/me.md"
    # The skill validator refused the file; the model is told why, naming its path.
    assert "/memories/skills/bad.md" in texts[6] and "frontmatter" in texts[6]
    assert texts[7].splitlines()[1:] == ["4K\t/memories", "10B\t/memories/AGENTS.md", "4K\t/memories/people/",
                                         "27B\t/memories/people/me.md"]
    assert texts[8] == "Successfully deleted /memories/people/me.md"

    # Every change is a revision: author agent, approval yolo (chosen explicitly), origin integration.
    old = store.history("agent:a", "/notes/coffee.md")
    assert [(r.version, r.message, r.deleted) for r in old] == [
        (4, "moved to /people/me.md", True), (3, "memory tool: insert", False),
        (2, "memory tool: str_replace", False), (1, "memory tool: create", False)]
    new = store.history("agent:a", "/people/me.md")
    assert [(r.version, r.deleted) for r in new] == [(2, True), (1, False)]
    for rev in [*old, *new]:
        assert (rev.author, rev.approval) == ("agent", "yolo")
        assert rev.origin is not None
        assert (rev.origin.kind, rev.origin.detail) == ("integration", "anthropic-memory-tool")
    assert not store.exists("agent:a", "/skills/bad.md")
    # Revertible: the deleted file comes back with its content.
    store.revert("agent:a", "/people/me.md", 1)
    assert store.read("agent:a", "/people/me.md").content == "# Coffee\nlikes: flat white\n"


HOSTILE = [
    "/etc/passwd",
    "memories/notes.md",
    "/memoriesevil/notes.md",
    "/memories/../etc/passwd",
    "/memories/notes/../../etc/passwd",
    "/memories/%2e%2e/etc/passwd",
    "/memories/..%2fetc%2fpasswd",
    "/memories/%2E%2E%2F",
    "/memories/a\\..\\..\\b",
    "/memories/x\x00.md",
    "/memories/\u202egnp.md",
    "/memories/user/notes.md",
    "/memories/conversations/x.md",
    "/memories/" + "a" * 300,
    "~/notes.md",
    "",
]


@pytest.mark.parametrize("path", HOSTILE)
def test_hostile_paths_are_refused_and_change_nothing(store: SqlStore, path: str) -> None:
    tool = MemagentMemoryTool(store, "a", approve="yolo")
    before = store.generation("agent:a")
    for command in ({"command": "create", "path": path, "file_text": "x\n"},
                    {"command": "view", "path": path},
                    {"command": "delete", "path": path},
                    {"command": "rename", "old_path": "/memories/a.md", "new_path": path}):
        with pytest.raises(ToolError) as err:
            tool.call(command)
        message = str(err.value)
        assert "\n" not in message and len(message) < 600
    assert store.generation("agent:a") == before
    assert store.all_files("agent:a") == []


def test_a_hostile_path_through_the_runner_is_an_error_result(store: SqlStore, api: FakeMessagesAPI) -> None:
    tool = MemagentMemoryTool(store, "a", approve="yolo")
    results = _run(api, tool, [{"command": "create", "path": "/memories/../../etc/cron.d/x", "file_text": "x"}])
    assert results[0]["is_error"] is True
    assert "would escape /memories" in _text(results[0])
    assert store.all_files("agent:a") == []


def test_sdk_error_texts(store: SqlStore) -> None:
    tool = MemagentMemoryTool(store, "a", approve="yolo")
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "x\nx\n"})
    cases = [
        ({"command": "view", "path": "/memories/none.md"},
         "The path /memories/none.md does not exist. Please provide a valid path."),
        ({"command": "create", "path": "/memories/a.md", "file_text": "y"}, "File /memories/a.md already exists"),
        ({"command": "str_replace", "path": "/memories/a.md", "old_str": "zz", "new_str": "y"},
         "No replacement was performed, old_str `zz` did not appear verbatim in /memories/a.md."),
        ({"command": "str_replace", "path": "/memories/a.md", "old_str": "x", "new_str": "y"},
         "No replacement was performed. Multiple occurrences of old_str `x` in lines: 1, 2. "
         "Please ensure it is unique"),
        ({"command": "insert", "path": "/memories/a.md", "insert_line": 5, "insert_text": "y"},
         "Invalid `insert_line` parameter: 5. It should be within the range [0, 2]."),
        ({"command": "delete", "path": "/memories"}, "Cannot delete the /memories directory itself"),
        ({"command": "delete", "path": "/memories/none.md"}, "The path /memories/none.md does not exist"),
        ({"command": "rename", "old_path": "/memories", "new_path": "/memories/b"},
         "Cannot rename the /memories directory itself"),
        ({"command": "rename", "old_path": "/memories/none.md", "new_path": "/memories/b.md"},
         "The path /memories/none.md does not exist"),
        ({"command": "rename", "old_path": "/memories/none.md", "new_path": "/memories/a.md"},
         "The destination /memories/a.md already exists"),
    ]
    for command, message in cases:
        with pytest.raises(ToolError) as err:
            tool.call(command)
        assert str(err.value) == message, command
    assert [r.version for r in store.history("agent:a", "/a.md")] == [1]


def test_view_range_and_directories(store: SqlStore) -> None:
    tool = MemagentMemoryTool(store, "a", approve="yolo")
    store.bulk_write("agent:a", {"/k/one.md": "1\n2\n3\n4\n", "/k/deep/er/x.md": "x", "/k/.hidden.md": "h"})
    assert tool.call({"command": "view", "path": "/memories/k/one.md", "view_range": [2, 3]}) == (
        "Here's the content of /memories/k/one.md with line numbers:\n     2\t2\n     3\t3")
    assert tool.call({"command": "view", "path": "/memories/k/one.md", "view_range": [3, -1]}).endswith(
        "     3\t3\n     4\t4\n     5\t")
    listing = tool.call({"command": "view", "path": "/memories/k"})
    assert isinstance(listing, str)
    # Two levels deep: deep/ and deep/er/ are listed, deep/er/x.md (level 3) is not; hidden names are not.
    assert listing.splitlines()[1:] == ["4K\t/memories/k", "4K\t/memories/k/deep/", "4K\t/memories/k/deep/er/",
                                        "8B\t/memories/k/one.md"]


def test_directory_rename_and_delete_move_every_file(store: SqlStore) -> None:
    tool = MemagentMemoryTool(store, "a", approve="yolo")
    store.bulk_write("agent:a", {"/d/a.md": "a", "/d/sub/b.md": "b"})
    assert tool.call({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}) == (
        "Successfully renamed /memories/d to /memories/e")
    assert [f.path for f in store.all_files("agent:a")] == ["/e/a.md", "/e/sub/b.md"]
    with pytest.raises(ToolError, match="into itself"):
        tool.call({"command": "rename", "old_path": "/memories/e", "new_path": "/memories/e/f"})
    assert tool.call({"command": "delete", "path": "/memories/e"}) == "Successfully deleted /memories/e"
    assert store.all_files("agent:a") == []
    assert store.history("agent:a", "/e/sub/b.md")[0].deleted


def test_root_narrows_memories_to_a_folder(store: SqlStore) -> None:
    store.write("agent:a", "/AGENTS.md", "Be brief.\n")
    tool = MemagentMemoryTool(store, "a", root="/knowledge/claude", approve="yolo")
    tool.call({"command": "create", "path": "/memories/x.md", "file_text": "x\n"})
    assert store.read("agent:a", "/knowledge/claude/x.md").content == "x\n"
    listing = tool.call({"command": "view", "path": "/memories"})
    assert isinstance(listing, str) and "AGENTS.md" not in listing and "/memories/x.md" in listing
    with pytest.raises(ToolError, match="escape"):
        tool.call({"command": "view", "path": "/memories/../../AGENTS.md"})


def test_the_approver_decides_and_is_recorded(store: SqlStore) -> None:
    seen: list[PendingChange] = []

    def approve(pending: PendingChange) -> bool:
        seen.append(pending)
        return "secret plan" not in (pending.after or "")

    tool = MemagentMemoryTool(store, "a", approve=approve)
    tool.call({"command": "create", "path": "/memories/ok.md", "file_text": "fine\n"})
    with pytest.raises(ToolError, match="refused by the approver; nothing was stored"):
        tool.call({"command": "create", "path": "/memories/no.md", "file_text": "secret plan\n"})
    assert [p.shown for p in seen] == ["/memories/ok.md", "/memories/no.md"]
    assert "+fine" in seen[0].diff
    assert store.history("agent:a", "/ok.md")[0].approval == "human"
    assert not store.exists("agent:a", "/no.md")


def test_a_concurrent_change_is_refused_not_merged(store: SqlStore) -> None:
    store.write("agent:a", "/n.md", "one\n")

    def meddle(pending: PendingChange) -> bool:
        # Another writer changes the file between our read and our commit.
        store.write("agent:a", "/n.md", "someone else\n")
        return True

    tool = MemagentMemoryTool(store, "a", approve=meddle)
    with pytest.raises(ToolError, match="changed since you read it"):
        tool.call({"command": "str_replace", "path": "/memories/n.md", "old_str": "one", "new_str": "two"})
    assert store.read("agent:a", "/n.md").content == "someone else\n"


def test_the_async_tool_through_the_async_runner(store: SqlStore, api: FakeMessagesAPI) -> None:
    tool = AsyncMemagentMemoryTool(store, "a", approve="yolo")
    api.enqueue_tool_use("memory", {"command": "create", "path": "/memories/x.md", "file_text": "x\n"})
    api.enqueue_tool_use("memory", {"command": "view", "path": "/memories/nope.md"})
    api.enqueue_text("Done.")

    async def main() -> None:
        client = anthropic.AsyncAnthropic(api_key="k", base_url=api.base_url, max_retries=0)
        runner = client.beta.messages.tool_runner(
            model=MODEL, max_tokens=100, tools=[tool], messages=[{"role": "user", "content": "hi"}])
        await runner.until_done()

    asyncio.run(main())
    assert store.read("agent:a", "/x.md").content == "x\n"
    last = api.requests[2]["messages"][-1]["content"][0]
    assert last["is_error"] is True and "does not exist" in _text(last)


def test_an_unknown_agent_is_one_clear_error(store: SqlStore) -> None:
    from memagent.vfs.errors import AgentNotFound

    with pytest.raises(AgentNotFound, match="no agent named 'ghost'"):
        MemagentMemoryTool(store, "ghost")


def _snapshot(store: SqlStore) -> list[tuple[str, int]]:
    return [(f.path, f.version) for f in store.all_files("agent:a")]


def test_without_an_approver_nothing_is_applied(store: SqlStore, api: FakeMessagesAPI) -> None:
    store.write("agent:a", "/n.md", "one\n")
    store.write("agent:a", "/d/x.md", "x\n")
    before = _snapshot(store)
    tool = MemagentMemoryTool(store, "a")
    results = _run(api, tool, [
        {"command": "create", "path": "/memories/new.md", "file_text": "new\n"},
        {"command": "str_replace", "path": "/memories/n.md", "old_str": "one", "new_str": "two"},
        {"command": "insert", "path": "/memories/n.md", "insert_line": 0, "insert_text": "zero"},
        {"command": "delete", "path": "/memories/n.md"},
        {"command": "delete", "path": "/memories/d"},
        {"command": "rename", "old_path": "/memories/n.md", "new_path": "/memories/m.md"},
    ])
    assert _snapshot(store) == before
    for block in results:
        assert block["is_error"] is True
        text = _text(block)
        assert "no approver was given" in text and 'approve="yolo"' in text and "nothing was stored" in text
        assert "\n" not in text
    with pytest.raises(ToolError, match='approve="yolo"'):
        tool.clear_all_memory()
    assert _snapshot(store) == before


def test_approve_queue_stores_proposals_not_files(store: SqlStore) -> None:
    from memagent.vfs.records.queue import ProposalStore

    store.write("agent:a", "/n.md", "one\n")
    tool = MemagentMemoryTool(store, "a", approve="queue")
    with pytest.raises(ToolError, match="Queued for review as proposal #"):
        tool.call({"command": "str_replace", "path": "/memories/n.md", "old_str": "one", "new_str": "two"})
    with pytest.raises(ToolError, match="cannot be queued"):
        tool.call({"command": "rename", "old_path": "/memories/n.md", "new_path": "/memories/m.md"})
    assert store.read("agent:a", "/n.md").content == "one\n" and not store.exists("agent:a", "/m.md")
    [p] = ProposalStore(store.engine).pending("a")
    assert (p.shown, p.op, p.base_version, p.after) == ("/memories/n.md", "edit", 1, "two\n")


# -- the SDK's own filesystem memory tool, side by side ------------------------------------------


def test_answers_match_the_sdks_filesystem_memory_tool(store: SqlStore, tmp_path: Any) -> None:
    """The same commands to the anthropic SDK's ``BetaLocalFilesystemMemoryTool`` and to ours
    give the same texts: listings (folders at 4K, hidden names left out, paths as given), reads,
    edits, ``..`` resolved inside /memories or refused in the SDK's words."""
    from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool

    theirs = BetaLocalFilesystemMemoryTool(str(tmp_path / "sdk"))
    ours = MemagentMemoryTool(store, "a", approve="yolo")

    def answer(tool: Any, command: dict[str, Any]) -> str:
        try:
            return str(tool.call(command))
        except ToolError as exc:
            return f"error: {exc}"

    commands: list[dict[str, Any]] = [
        {"command": "view", "path": "/memories"},
        *({"command": "create", "path": p, "file_text": t} for p, t in [
            ("/memories/notes.md", "hello\n"), ("/memories/a/b.md", "x" * 2000), ("/memories/a/c/d.md", "d\n"),
            ("/memories/a/c/e/f.md", "f\n"), ("/memories/.hidden/x.md", "h\n"), ("/memories/z.md", "")]),
        {"command": "view", "path": "/memories"},
        {"command": "view", "path": "/memories/"},
        {"command": "view", "path": "/memories/a"},
        {"command": "view", "path": "/memories/a/../notes.md"},
        {"command": "view", "path": "/memories/./a/c/d.md", "view_range": [1, -1]},
        {"command": "view", "path": "/memories/../x"},
        {"command": "view", "path": "/memories/a/../../x"},
        {"command": "view", "path": "/memories/nope"},
        {"command": "view", "path": "/other"},
        {"command": "create", "path": "/memories/notes.md", "file_text": "again\n"},
        {"command": "str_replace", "path": "/memories/a/../notes.md", "old_str": "hello", "new_str": "hi"},
        {"command": "str_replace", "path": "/memories/notes.md", "old_str": "absent", "new_str": "x"},
        {"command": "insert", "path": "/memories/notes.md", "insert_line": 1, "insert_text": "two"},
        {"command": "insert", "path": "/memories/notes.md", "insert_line": 9, "insert_text": "x"},
        {"command": "view", "path": "/memories/notes.md"},
        {"command": "rename", "old_path": "/memories/z.md", "new_path": "/memories/notes.md"},
        {"command": "rename", "old_path": "/memories/gone.md", "new_path": "/memories/y.md"},
        {"command": "rename", "old_path": "/memories/z.md", "new_path": "/memories/y.md"},
        {"command": "delete", "path": "/memories/gone.md"},
        {"command": "delete", "path": "/memories/a/c"},
        {"command": "view", "path": "/memories"},
    ]
    for command in commands:
        assert answer(ours, command) == answer(theirs, command), command
