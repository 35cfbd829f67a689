"""memagent.integrations.deepagents: a backend-protocol suite, run on ours and on theirs.

The contract tests are written from deepagents' documented semantics (the
``BackendProtocol`` docstrings and its result types) and run against
``MemagentBackend`` on SQLite and Postgres *and* against deepagents' own
``StoreBackend`` over LangGraph's ``InMemoryStore``: passing on theirs shows the suite
states their contract, passing on ours shows we keep it. Tests marked ``ours`` check
what only memagent adds (revisions, validators, path rules, regex grep, ranked
search) or where we deliberately differ (said in the module docstring of the backend).
A last test runs a real ``create_deep_agent`` graph with ``ChatAnthropic`` against
the local fake Messages API.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from deepagents.backends.protocol import BackendProtocol
from deepagents.backends.store import StoreBackend
from deepagents.backends.utils import EMPTY_OLD_STRING_ERROR
from langgraph.store.memory import InMemoryStore

from bench.fake_messages_api import FakeMessagesAPI
from memagent.integrations.deepagents import MemagentBackend
from memagent.vfs import SqlStore, open_store
from memagent.vfs.errors import InvalidPath
from memagent.vfs.types import PendingChange


def _memagent(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemagentBackend]:
    url = f"sqlite:///{tmp_path / 'm.db'}" if request.param == "sqlite" else request.getfixturevalue("fresh_pg_url")
    store = open_store(url)
    store.create_agent("a")
    yield MemagentBackend(store, "a", approve="yolo")
    store.close()


@pytest.fixture(params=["sqlite", "postgres", "deepagents-store"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BackendProtocol]:
    """The contract suite's subject: ours on both databases, and deepagents' own StoreBackend."""
    if request.param == "deepagents-store":
        yield StoreBackend(store=InMemoryStore(), namespace=lambda _rt: ("filesystem",))
        return
    yield from _memagent(request, tmp_path)


@pytest.fixture(params=["sqlite", "postgres"])
def ours(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemagentBackend]:
    """memagent's backend only, for what deepagents' contract does not cover."""
    yield from _memagent(request, tmp_path)


def _seed(b: BackendProtocol, files: dict[str, str]) -> None:
    for path, content in files.items():
        assert b.write(path, content).error is None, path


def _content(b: BackendProtocol, path: str) -> str | None:
    r = b.read(path, 0, 10_000)
    return None if r.error or r.file_data is None else r.file_data["content"]


TREE = {
    "/README.md": "top readme\nTODO: write more\n",
    "/docs/guide.md": "guide line one\nsee a.c for details\nabc is not a.c\n",
    "/docs/api/ref.md": "TODO reference\n",
    "/src/app.py": "print('TODO')\nfoo|bar\n",
    "/src/util/helpers.py": "def helper():\n    return 'a.c'\n",
    "/.ci/ci.yml": "steps: TODO\n",
    "/a.txt": "alpha\n",
    "/b.txt": "beta\n",
}

# -- read / write ---------------------------------------------------------------------


def test_write_then_read_round_trips_with_pagination_fields(backend: BackendProtocol) -> None:
    w = backend.write("/notes/n.md", "one\ntwo\nthree\n")
    assert (w.error, w.path) == (None, "/notes/n.md")
    r = backend.read("/notes/n.md")
    assert r.error is None and r.file_data is not None
    assert r.file_data["content"] == "one\ntwo\nthree\n"
    assert (r.start_line, r.end_line, r.total_lines, r.next_offset) == (1, 3, 3, None)


def test_write_overwrites_an_existing_file(backend: BackendProtocol) -> None:
    _seed(backend, {"/n.md": "old\n"})
    assert backend.write("/n.md", "new\n").error is None
    assert _content(backend, "/n.md") == "new\n"


def test_read_a_window(backend: BackendProtocol) -> None:
    _seed(backend, {"/n.md": "l1\nl2\nl3\nl4\nl5\n"})
    r = backend.read("/n.md", offset=1, limit=2)
    assert r.file_data is not None and r.file_data["content"] == "l2\nl3\n"
    assert (r.start_line, r.end_line, r.total_lines, r.next_offset) == (2, 3, 5, 3)
    past = backend.read("/n.md", offset=10, limit=2)
    assert past.error == "Line offset 10 exceeds file length (5 lines)"
    none = backend.read("/n.md", offset=0, limit=0)
    assert none.no_lines_requested and none.file_data is not None and none.file_data["content"] == ""
    negative = backend.read("/n.md", offset=-3, limit=1)
    assert negative.file_data is not None and negative.file_data["content"] == "l1\n"


def test_read_an_empty_file_has_no_pagination(ours: MemagentBackend) -> None:
    # (An empty file is not valid memagent content for every kind, but plain files may be empty.)
    assert ours.write("/empty.txt", "").error is None
    r = ours.read("/empty.txt")
    assert r.error is None and r.file_data is not None and r.file_data["content"] == ""
    assert r.start_line is None and r.total_lines is None


def test_read_a_missing_file(backend: BackendProtocol) -> None:
    assert backend.read("/nope.md").error == "File '/nope.md' not found"


# -- edit -----------------------------------------------------------------------------


def test_edit_contract(backend: BackendProtocol) -> None:
    _seed(backend, {"/e.md": "cat dog cat bird cat\n"})
    ok = backend.edit("/e.md", "dog", "wolf")
    assert (ok.error, ok.path, ok.occurrences) == (None, "/e.md", 1)
    assert _content(backend, "/e.md") == "cat wolf cat bird cat\n"
    many = backend.edit("/e.md", "cat", "lion")
    assert many.error == ("Error: String 'cat' appears 3 times in file. Use replace_all=True to replace all "
                          "instances, or provide a more specific string with surrounding context.")
    assert backend.edit("/e.md", "zebra", "x").error == "Error: String not found in file: 'zebra'"
    assert backend.edit("/e.md", "", "x").error == EMPTY_OLD_STRING_ERROR
    assert backend.edit("/missing.md", "a", "b").error == "Error: File '/missing.md' not found"
    every = backend.edit("/e.md", "cat", "lion", replace_all=True)
    assert (every.error, every.occurrences) == (None, 3)
    assert _content(backend, "/e.md") == "lion wolf lion bird lion\n"


def test_edit_says_when_a_trailing_newline_is_the_problem(backend: BackendProtocol) -> None:
    _seed(backend, {"/t.md": "no newline at end"})
    r = backend.edit("/t.md", "at end\n", "x")
    assert r.error is not None and r.error.startswith("Error: old_string ends with a newline")


# -- ls ---------------------------------------------------------------------------------


def test_ls_lists_one_level_with_directories_marked(backend: BackendProtocol) -> None:
    _seed(backend, TREE)
    r = backend.ls("/")
    assert r.error is None and r.entries is not None
    assert [(e["path"], e.get("is_dir")) for e in r.entries] == [
        ("/.ci/", True), ("/README.md", False), ("/a.txt", False), ("/b.txt", False),
        ("/docs/", True), ("/src/", True)]
    sizes = {e["path"]: e.get("size") for e in r.entries}
    assert sizes["/a.txt"] == len(b"alpha\n")
    sub = backend.ls("/docs")
    assert sub.entries is not None
    assert [(e["path"], e.get("is_dir")) for e in sub.entries] == [("/docs/api/", True), ("/docs/guide.md", False)]
    assert backend.ls("/docs/").entries == sub.entries


def test_ls_of_nothing_lists_nothing(backend: BackendProtocol) -> None:
    _seed(backend, {"/a.txt": "alpha\n"})
    assert not backend.ls("/nowhere").entries


def test_ls_of_a_missing_folder_or_a_file_is_an_empty_listing(backend: BackendProtocol) -> None:
    _seed(backend, {"/a.txt": "alpha\n"})
    assert backend.ls("/nowhere").entries == [] and backend.ls("/nowhere").error is None
    assert backend.ls("/a.txt").entries == [] and backend.ls("/a.txt").error is None


# -- glob -------------------------------------------------------------------------------


def _glob(b: BackendProtocol, pattern: str, path: str | None = None) -> list[str]:
    r = b.glob(pattern, path)
    assert r.error is None and r.matches is not None, r.error
    assert all(m.get("is_dir") is False for m in r.matches)
    return sorted(m["path"] for m in r.matches)


def test_glob_contract(backend: BackendProtocol) -> None:
    _seed(backend, TREE)
    # A bare pattern matches the basename at any depth, dot-directories included.
    assert _glob(backend, "*.md") == ["/README.md", "/docs/api/ref.md", "/docs/guide.md"]
    assert _glob(backend, "*.yml") == ["/.ci/ci.yml"]
    # ** does not descend into dot-directories.
    assert _glob(backend, "**/*.yml") == []
    # A pattern with / is relative to the search root; a leading / anchors it there.
    assert _glob(backend, "/*.md") == ["/README.md"]
    assert _glob(backend, "docs/*.md") == ["/docs/guide.md"]
    assert _glob(backend, "src/**/*.py") == ["/src/app.py", "/src/util/helpers.py"]
    assert _glob(backend, "{a,b}.txt") == ["/a.txt", "/b.txt"]
    assert _glob(backend, "?.txt") == ["/a.txt", "/b.txt"]
    assert _glob(backend, "[!a].txt") == ["/b.txt"]
    # path narrows the search root; paths stay absolute.
    assert _glob(backend, "*.md", "/docs") == ["/docs/api/ref.md", "/docs/guide.md"]
    assert _glob(backend, "/*.md", "/docs") == ["/docs/guide.md"]
    assert _glob(backend, "*.rs") == []


def test_glob_of_a_file_path_and_of_nothing(backend: BackendProtocol) -> None:
    _seed(backend, TREE)
    # An exact file as the search root: the pattern is matched against its name.
    assert _glob(backend, "*.md", "/README.md") == ["/README.md"]
    assert _glob(backend, "*.py", "/README.md") == []
    assert _glob(backend, "*.md", "/nowhere") == []


def test_glob_answers_from_the_path_index_in_path_order(ours: MemagentBackend) -> None:
    _seed(ours, TREE)
    r = ours.glob("*.md")
    assert r.matches == [{"path": p, "is_dir": False} for p in ["/README.md", "/docs/api/ref.md", "/docs/guide.md"]]
    # Literal folders of an anchored pattern narrow the index range, never the answer.
    assert _glob(ours, "docs/api/*.md") == ["/docs/api/ref.md"]
    assert _glob(ours, "docs/*/ref.md") == ["/docs/api/ref.md"]
    assert _glob(ours, "docs/api/**/*.md", "/") == ["/docs/api/ref.md"]
    assert _glob(ours, "/nowhere/*.md") == []


def test_glob_refuses_traversal_as_an_error_result(backend: BackendProtocol) -> None:
    r = backend.glob("../*.md")
    assert r.matches is None and r.error is not None and "traversal" in r.error.lower()


# -- grep -------------------------------------------------------------------------------


def _grep(b: BackendProtocol, pattern: str, path: str | None = None,
          glob: str | None = None) -> list[tuple[str, int, str]]:
    r = b.grep(pattern, path, glob)
    assert r.error is None and r.matches is not None, r.error
    return sorted((m["path"], m["line"], m["text"]) for m in r.matches)


def test_grep_is_literal(backend: BackendProtocol) -> None:
    _seed(backend, TREE)
    assert _grep(backend, "a.c") == [("/docs/guide.md", 2, "see a.c for details"),
                                     ("/docs/guide.md", 3, "abc is not a.c"),
                                     ("/src/util/helpers.py", 2, "    return 'a.c'")]
    assert _grep(backend, "foo|bar") == [("/src/app.py", 2, "foo|bar")]
    assert _grep(backend, "('") == [("/src/app.py", 1, "print('TODO')")]
    assert _grep(backend, "todo") == []  # case-sensitive


def test_grep_path_and_glob_filters(backend: BackendProtocol) -> None:
    _seed(backend, TREE)
    everywhere = [p for p, _, _ in _grep(backend, "TODO")]
    assert everywhere == ["/.ci/ci.yml", "/README.md", "/docs/api/ref.md", "/src/app.py"]
    assert [p for p, _, _ in _grep(backend, "TODO", "/docs")] == ["/docs/api/ref.md"]
    assert [p for p, _, _ in _grep(backend, "TODO", "/README.md")] == ["/README.md"]
    assert [p for p, _, _ in _grep(backend, "TODO", None, "*.py")] == ["/src/app.py"]
    assert [p for p, _, _ in _grep(backend, "TODO", None, "*.{md,yml}")] == [
        "/.ci/ci.yml", "/README.md", "/docs/api/ref.md"]
    assert [p for p, _, _ in _grep(backend, "TODO", "/docs", "api/*.md")] == ["/docs/api/ref.md"]
    assert _grep(backend, "TODO", "/nowhere") == []


def test_grep_max_count_truncates_only_when_more_exist(backend: BackendProtocol) -> None:
    _seed(backend, {"/m.md": "x\nx\nx\n"})
    exact = backend.grep("x", max_count=3)
    assert exact.matches is not None and len(exact.matches) == 3 and not exact.truncated
    cut = backend.grep("x", max_count=2)
    assert cut.matches is not None and len(cut.matches) == 2 and cut.truncated
    with_glob = backend.grep("x", None, "*.md", max_count=1)
    assert with_glob.matches is not None and len(with_glob.matches) == 1 and with_glob.truncated


def test_grep_refuses_a_traversing_glob(backend: BackendProtocol) -> None:
    _seed(backend, {"/m.md": "x\n"})
    r = backend.grep("x", None, "../*.md")
    assert r.error is not None and "traversal" in r.error.lower()


# -- delete, upload, download -----------------------------------------------------------


def test_delete_is_recursive(backend: BackendProtocol) -> None:
    _seed(backend, TREE)
    assert backend.delete("/README.md").path == "/README.md"
    assert backend.read("/README.md").error == "File '/README.md' not found"
    assert backend.delete("/docs").error is None
    assert _glob(backend, "*.md") == []
    assert _content(backend, "/a.txt") == "alpha\n"
    assert backend.delete("/nope").error == "Error: File '/nope' not found"


def test_upload_and_download(backend: BackendProtocol) -> None:
    up = backend.upload_files([("/up/a.md", b"hello\n"), ("/up/b.md", b"world\n")])
    assert [(u.path, u.error) for u in up] == [("/up/a.md", None), ("/up/b.md", None)]
    down = backend.download_files(["/up/b.md", "/nope.md", "/up/a.md"])
    assert [(d.path, d.content, d.error) for d in down] == [
        ("/up/b.md", b"world\n", None), ("/nope.md", None, "file_not_found"), ("/up/a.md", b"hello\n", None)]


def test_the_async_wrappers(backend: BackendProtocol) -> None:
    async def main() -> None:
        assert (await backend.awrite("/as.md", "async\n")).error is None
        r = await backend.aread("/as.md")
        assert r.file_data is not None and r.file_data["content"] == "async\n"
        g = await backend.agrep("sync", max_count=5)
        assert g.matches is not None and [m["path"] for m in g.matches] == ["/as.md"]
        assert (await backend.aglob("*.md")).matches is not None

    asyncio.run(main())


# -- memagent only ------------------------------------------------------------------------


def test_every_change_is_a_revision(ours: MemagentBackend) -> None:
    store = ours.store
    ours.write("/n.md", "one\n")
    ours.edit("/n.md", "one", "two")
    ours.write("/n.md", "two\n")  # no change: nothing stored
    ours.upload_files([("/n.md", b"three\n")])
    ours.delete("/n.md")
    history = store.history("agent:a", "/n.md")
    assert [(r.version, r.message, r.deleted) for r in history] == [
        (4, "deepagents: delete", True), (3, "deepagents: upload", False), (2, "deepagents: edit", False),
        (1, "deepagents: write", False)]
    for rev in history:
        assert (rev.author, rev.approval) == ("agent", "yolo")
        assert rev.origin is not None and (rev.origin.kind, rev.origin.detail) == ("integration", "deepagents")
    store.revert("agent:a", "/n.md", 3)
    assert _content(ours, "/n.md") == "three\n"


def test_validators_refuse_and_store_nothing(ours: MemagentBackend) -> None:
    bad = ours.write("/skills/bad.md", "no frontmatter\n")
    assert bad.error is not None and "/skills/bad.md" in bad.error
    secret = ours.write("/k.md", "key = AKIAIOSFODNN7EXAMPLF\n")
    assert secret.error is not None and "AKIAIOSFODNN7EXAMPLF" not in secret.error
    up = ours.upload_files([("/skills/bad2.md", b"nope\n")])
    assert up[0].error is not None
    assert ours.store.all_files("agent:a") == []


@pytest.mark.parametrize("path", ["/../etc/passwd", "/a\\..\\b.md", "/x\x00.md", "/\u202eevil.md",
                                  "/user/x.md", "/conversations/x.md", "/" + "a" * 300])
def test_hostile_paths_are_refused(ours: MemagentBackend, path: str) -> None:
    assert ours.write(path, "x\n").error
    assert ours.read(path).error
    assert ours.edit(path, "x", "y").error
    assert ours.delete(path).error
    assert ours.ls(path).error
    assert ours.glob("*", path).error
    assert ours.grep("x", path).error
    assert [u.error for u in ours.upload_files([(path, b"x")])] == ["invalid_path"]
    assert [d.error for d in ours.download_files([path])] == ["invalid_path"]
    assert ours.store.all_files("agent:a") == []


def test_deliberate_refusals(ours: MemagentBackend) -> None:
    _seed(ours, {"/a.md": "a\n"})
    assert ours.delete("/").error == ("Error: refusing to delete the whole memory folder; delete the files or "
                                      "folders inside it")
    assert ours.grep("").error == "Error: the grep pattern is empty; give the text to search for"
    assert [u.error for u in ours.upload_files([("/bin.dat", b"\xff\xfe")])] == ["invalid_path"]
    assert [d.error for d in ours.download_files(["/"])] == ["invalid_path"]


def test_a_stale_edit_is_refused_not_merged(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'm.db'}")
    store.create_agent("a")
    store.write("agent:a", "/n.md", "one\n")

    def meddle(pending: PendingChange) -> bool:
        store.write("agent:a", "/n.md", "someone else\n")
        return True

    r = MemagentBackend(store, "a", approve=meddle).edit("/n.md", "one", "two")
    assert r.error is not None and "changed since you read it" in r.error
    assert store.read("agent:a", "/n.md").content == "someone else\n"


def test_root_confines_the_backend(store: SqlStore) -> None:
    store.write("agent:a", "/AGENTS.md", "Be brief.\n")
    b = MemagentBackend(store, "a", root="/deep", approve="yolo")
    assert b.write("/n.md", "x\n").path == "/n.md"
    assert store.read("agent:a", "/deep/n.md").content == "x\n"
    assert _glob(b, "*.md") == ["/n.md"]
    assert b.read("/AGENTS.md").error == "File '/AGENTS.md' not found"
    assert b.read("/../AGENTS.md").error is not None
    with pytest.raises(InvalidPath, match="reserves for shared memory"):
        MemagentBackend(store, "a", root="/user/x")


def test_regex_grep_and_ranked_search(ours: MemagentBackend) -> None:
    _seed(ours, TREE | {"/incidents/i.md": "INC-12345 database outage\nINC-9 typo\n"})
    r = ours.grep_regex(r"INC-[0-9]{5}")
    assert r.matches == [{"path": "/incidents/i.md", "line": 1, "text": "INC-12345 database outage"}]
    alt = ours.grep_regex("alpha|beta", glob="*.txt")
    assert alt.matches is not None and sorted(m["path"] for m in alt.matches) == ["/a.txt", "/b.txt"]
    assert ours.grep_regex("ALPHA", case_insensitive=True).matches == [{"path": "/a.txt", "line": 1, "text": "alpha"}]
    bad = ours.grep_regex("(")
    assert bad.error is not None and bad.matches is None
    hits = ours.search("database outage")
    assert hits and hits[0]["path"] == "/incidents/i.md" and "outage" in hits[0]["snippet"]
    tools = {t.name: t for t in ours.tools()}
    assert set(tools) == {"grep_regex", "search_memory"}
    assert tools["grep_regex"].invoke({"pattern": "INC-[0-9]{5}"}) == "/incidents/i.md:1:INC-12345 database outage"
    assert tools["search_memory"].invoke({"query": "outage"}).startswith("/incidents/i.md")


def test_a_deep_agent_writes_memagent_memory(store: SqlStore, api: FakeMessagesAPI,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """create_deep_agent with ChatAnthropic against the fake API: its file tools land in the store."""
    from deepagents import create_deep_agent
    from langchain_anthropic import ChatAnthropic

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    api.enqueue_tool_use("write_file", {"file_path": "/notes.md", "content": "likes espresso\n"})
    api.enqueue_tool_use("edit_file", {"file_path": "/notes.md", "old_string": "espresso",
                                       "new_string": "flat white"})
    api.enqueue_tool_use("grep_regex", {"pattern": "flat\\s+white"})
    api.enqueue_tool_use("write_file", {"file_path": "/skills/bad.md", "content": "not a skill\n"})
    api.enqueue_text("Saved.")
    backend = MemagentBackend(store, "a", approve="yolo")
    model = ChatAnthropic(model="claude-sonnet-5-5", api_key="k", base_url=api.base_url, max_retries=0)
    agent = create_deep_agent(model=model, backend=backend, tools=backend.tools())
    out = agent.invoke({"messages": [{"role": "user", "content": "remember I like espresso"}]})
    assert out["messages"][-1].content == "Saved."
    results = [m["content"][0] for m in (r["messages"][-1] for r in api.requests[1:])]
    assert results[2]["content"] == "/notes.md:1:likes flat white"
    assert "frontmatter" in str(results[3]["content"])
    assert store.read("agent:a", "/notes.md").content == "likes flat white\n"
    assert [r.message for r in store.history("agent:a", "/notes.md")] == ["deepagents: edit", "deepagents: write"]
    assert not store.exists("agent:a", "/skills/bad.md")


def test_without_an_approver_nothing_is_applied(store: SqlStore) -> None:
    store.write("agent:a", "/n.md", "one\n")
    store.write("agent:a", "/d/x.md", "x\n")
    before = [(f.path, f.version) for f in store.all_files("agent:a")]
    b = MemagentBackend(store, "a")
    errors = [b.write("/new.md", "new\n").error, b.edit("/n.md", "one", "two").error,
              b.delete("/n.md").error, b.delete("/d").error]
    [upload] = b.upload_files([("/up.md", b"up\n")])
    errors.append(upload.error)
    assert [(f.path, f.version) for f in store.all_files("agent:a")] == before
    for error in errors:
        assert error is not None and "no approver was given" in error and 'approve="yolo"' in error
        assert "nothing was stored" in error and "\n" not in error


def test_approve_queue_stores_proposals_not_files(store: SqlStore) -> None:
    from memagent.vfs.records.queue import ProposalStore

    b = MemagentBackend(store, "a", approve="queue")
    r = b.write("/new.md", "new\n")
    assert r.error is not None and "Queued for review as proposal #" in r.error
    assert not store.exists("agent:a", "/new.md")
    [p] = ProposalStore(store.engine).pending("a")
    assert (p.shown, p.op, p.base_version, p.after) == ("/new.md", "write", 0, "new\n")


def test_a_queued_change_applied_in_review_names_the_integration(store: SqlStore) -> None:
    from memagent.agent.reflection import Review
    from memagent.vfs.records.queue import ProposalStore
    from memagent.vfs.scopes import AgentView

    MemagentBackend(store, "a", approve="queue").write("/new.md", "new\n")
    queue = ProposalStore(store.engine)
    [p] = queue.pending("a")
    review = Review(AgentView(store, "a"), queue)
    c = review.check(p)
    assert "queued by integration deepagents" in review.request(c).note
    review.approve(c)
    origin = store.history("agent:a", "/new.md")[-1].origin
    assert origin is not None and (origin.kind, origin.detail.split(",")[0]) == ("integration", "deepagents")
