"""The store API on real SQLite and Postgres: every operation, history and concurrency."""

from __future__ import annotations

import threading

import pytest

from memagent.vfs import SqlStore, open_store
from memagent.vfs.errors import (
    AgentNotFound,
    AlreadyExists,
    EditMismatch,
    InvalidPath,
    InvalidPattern,
    IsADirectory,
    NotFound,
    RevisionNotFound,
    StaleVersion,
)

S = "agent:a"


def test_write_then_read_exact(store: SqlStore) -> None:
    text = "line one\nline two\n\ttabbed ünïcode ✓\n"
    change = store.write(S, "/knowledge/a.md", text, author="agent", approval="human")
    assert (change.version, change.before, change.after) == (1, None, text)
    fc = store.read(S, "/knowledge/a.md")
    assert fc.content == text and fc.version == 1 and fc.total_lines == 3


def test_read_offset_limit(store: SqlStore) -> None:
    store.write(S, "/n.md", "".join(f"l{i}\n" for i in range(1, 11)))
    fc = store.read(S, "/n.md", offset=3, limit=4)
    assert fc.content == "l4\nl5\nl6\nl7\n"
    assert (fc.offset, fc.lines, fc.total_lines, fc.more) == (3, 4, 10, True)
    assert not store.read(S, "/n.md", offset=8).more
    with pytest.raises(Exception, match="past the end"):
        store.read(S, "/n.md", offset=10)


def test_paths_are_normalised_on_every_call(store: SqlStore) -> None:
    store.write(S, "notes//x/./y.md", "hi")
    assert store.read(S, "/notes/x/y.md").content == "hi"
    assert store.exists(S, "/notes/x/../x/y.md")


def test_missing_file_and_directory_errors(store: SqlStore) -> None:
    with pytest.raises(NotFound, match="no file at /nope.md"):
        store.read(S, "/nope.md")
    store.write(S, "/dir/f.md", "x")
    with pytest.raises(IsADirectory):
        store.read(S, "/dir")
    with pytest.raises(IsADirectory):
        store.write(S, "/dir", "x")
    with pytest.raises(InvalidPath, match="is a file"):
        store.write(S, "/dir/f.md/g.md", "x")


def test_overwrite_appends_revision(store: SqlStore) -> None:
    store.write(S, "/k.md", "one")
    c = store.write(S, "/k.md", "two", expected_version=1, author="agent", approval="yolo",
                    message="because")
    assert (c.version, c.before, c.after) == (2, "one", "two")
    hist = store.history(S, "/k.md")
    assert [r.version for r in hist] == [2, 1]
    assert (hist[0].author, hist[0].approval, hist[0].message) == ("agent", "yolo", "because")


def test_edit_exact_and_counts(store: SqlStore) -> None:
    store.write(S, "/e.md", "a b a\n")
    with pytest.raises(EditMismatch, match="0 matches"):
        store.edit(S, "/e.md", "zzz", "y")
    with pytest.raises(EditMismatch, match="appears 2 times"):
        store.edit(S, "/e.md", "a", "c")
    assert store.read(S, "/e.md").version == 1  # refused edits store nothing
    assert store.edit(S, "/e.md", "b", "B").after == "a B a\n"
    assert store.edit(S, "/e.md", "a", "c", replace_all=True).after == "c B c\n"
    assert store.read(S, "/e.md").version == 3


def test_delete_is_revertible(store: SqlStore) -> None:
    store.write(S, "/d.md", "keep me\n")
    gone = store.delete(S, "/d.md")
    assert gone.version == 2 and gone.after is None
    assert not store.exists(S, "/d.md")
    with pytest.raises(NotFound, match="was deleted"):
        store.read(S, "/d.md")
    back = store.revert(S, "/d.md", 1)
    assert back.version == 3 and store.read(S, "/d.md").content == "keep me\n"
    assert [r.deleted for r in store.history(S, "/d.md")] == [False, True, False]


def test_recreate_after_delete_continues_versions(store: SqlStore) -> None:
    store.write(S, "/r.md", "1")
    store.delete(S, "/r.md")
    assert store.write(S, "/r.md", "3", expected_version=0).version == 3


def test_revert_restores_exact_bytes(store: SqlStore) -> None:
    original = "crlf\r\nno newline at end \u00a0 \U0001f600"
    store.write(S, "/b.md", original)
    store.write(S, "/b.md", "changed\n")
    store.revert(S, "/b.md", 1)
    assert store.read(S, "/b.md").content == original
    with pytest.raises(RevisionNotFound, match="no version 9"):
        store.revert(S, "/b.md", 9)
    assert store.read(S, "/b.md").version == 3


def test_revert_to_tombstone_refused(store: SqlStore) -> None:
    store.write(S, "/t.md", "x")
    store.delete(S, "/t.md")
    with pytest.raises(RevisionNotFound, match="is a deletion"):
        store.revert(S, "/t.md", 2)


def test_move(store: SqlStore) -> None:
    store.write(S, "/m/a.md", "moving")
    store.write(S, "/m/b.md", "other")
    with pytest.raises(AlreadyExists):
        store.move(S, "/m/a.md", "/m/b.md")
    c = store.move(S, "/m/a.md", "/n/a.md")
    assert c.path == "/n/a.md" and store.read(S, "/n/a.md").content == "moving"
    assert not store.exists(S, "/m/a.md")
    assert store.history(S, "/m/a.md")[0].message == "moved to /n/a.md"


def test_stale_version_refused(store: SqlStore) -> None:
    store.write(S, "/s.md", "v1")
    store.write(S, "/s.md", "v2")
    with pytest.raises(StaleVersion, match="changed since you read it"):
        store.write(S, "/s.md", "mine", expected_version=1)
    with pytest.raises(StaleVersion, match="already exists"):
        store.write(S, "/s.md", "mine", expected_version=0)
    with pytest.raises(StaleVersion):
        store.edit(S, "/s.md", "v2", "x", expected_version=1)
    with pytest.raises(StaleVersion):
        store.delete(S, "/s.md", expected_version=1)
    assert store.read(S, "/s.md").content == "v2"


def test_two_writers_from_same_version(backend_url: str) -> None:
    """Two processes' worth of stores race from version 1: one wins, one is refused."""
    a, b = open_store(backend_url), open_store(backend_url)
    a.create_agent("a")
    a.write(S, "/race.md", "base\n")
    barrier = threading.Barrier(2)
    results: dict[str, object] = {}

    def writer(name: str, st: SqlStore) -> None:
        barrier.wait()
        try:
            results[name] = st.write(S, "/race.md", f"from {name}\n", expected_version=1)
        except StaleVersion as exc:
            results[name] = exc

    threads = [threading.Thread(target=writer, args=(n, s)) for n, s in (("a", a), ("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wins = [n for n, r in results.items() if not isinstance(r, StaleVersion)]
    losses = [n for n, r in results.items() if isinstance(r, StaleVersion)]
    assert len(wins) == 1 and len(losses) == 1
    assert a.read(S, "/race.md").content == f"from {wins[0]}\n"
    hist = a.history(S, "/race.md")
    assert [r.version for r in hist] == [2, 1]  # the loser appended nothing
    assert a.revision_content(S, "/race.md", 1) == "base\n"  # nothing lost
    a.close()
    b.close()


def test_two_creators_race(backend_url: str) -> None:
    a, b = open_store(backend_url), open_store(backend_url)
    a.create_agent("a")
    barrier = threading.Barrier(2)
    errors: list[Exception] = []

    def creator(st: SqlStore, text: str) -> None:
        barrier.wait()
        try:
            st.write(S, "/new.md", text, expected_version=0)
        except StaleVersion as exc:
            errors.append(exc)

    ts = [threading.Thread(target=creator, args=(s, t)) for s, t in ((a, "A"), (b, "B"))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(errors) == 1
    assert a.read(S, "/new.md").content in ("A", "B")
    assert len(a.history(S, "/new.md")) == 1


def test_ls(store: SqlStore) -> None:
    store.write(S, "/AGENTS.md", "hi")
    store.write(S, "/skills/x/SKILL.md", "---\nname: x\ndescription: does x\n---\nbody\n")
    store.write(S, "/skills/y.md", "---\nname: y\ndescription: does y\n---\nbody\n")
    store.write(S, "/gone.md", "x")
    store.delete(S, "/gone.md")
    root = store.ls(S, "/")
    assert [(e.name, e.is_dir) for e in root] == [("AGENTS.md", False), ("skills", True)]
    assert root[0].size == 2 and root[1].size == 2
    assert [(e.name, e.is_dir) for e in store.ls(S, "/skills/")] == [("x", True), ("y.md", False)]
    with pytest.raises(NotFound):
        store.ls(S, "/nothing")


def test_glob(store: SqlStore) -> None:
    for p in ["/AGENTS.md", "/skills/a.md", "/skills/b.txt", "/skills/deep/c.md",
              "/knowledge/people/ann.md", "/knowledge/x.json"]:
        body = "---\nname: a\ndescription: does a\n---\nbody\n" if p == "/skills/a.md" else "text"
        store.write(S, p, "{}" if p.endswith(".json") else body)
    assert store.glob(S, "**/*.md") == ["/AGENTS.md", "/knowledge/people/ann.md",
                                        "/skills/a.md", "/skills/deep/c.md"]
    assert store.glob(S, "skills/*.md") == ["/skills/a.md"]
    assert store.glob(S, "*.md") == store.glob(S, "**/*.md")  # bare name: any depth
    assert store.glob(S, "skills/*.{md,txt}") == ["/skills/a.md", "/skills/b.txt"]
    assert store.glob(S, "?.md", "/skills") == ["/skills/a.md", "/skills/deep/c.md"]
    assert store.glob(S, "/knowledge/**") == ["/knowledge/people/ann.md", "/knowledge/x.json"]
    assert store.glob(S, "skills/[ab].*") == ["/skills/a.md", "/skills/b.txt"]
    assert store.glob(S, "nomatch/*") == []


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("files_with_matches", "/k/a.md\n/k/b.md"),
        ("content", "/k/a.md:2:Apple pie\n/k/b.md:1:apple"),
        ("count", "/k/a.md:1\n/k/b.md:1"),
    ],
)
def test_grep_modes(store: SqlStore, mode: str, expected: str) -> None:
    from memagent.vfs.grep.engine import render

    store.write(S, "/k/a.md", "banana\nApple pie\n")
    store.write(S, "/k/b.md", "apple")
    store.write(S, "/k/c.md", "cherry\n")
    r = store.grep(S, "apple", output_mode=mode, case_insensitive=True)
    assert render(r) == expected


def test_grep_options(store: SqlStore) -> None:
    store.write(S, "/a.md", "cost is $5 (approx)\nnothing\n")
    store.write(S, "/sub/b.txt", "cost is $5 (approx)\n")
    assert store.grep(S, "$5 (", fixed_strings=True).files == ["/a.md", "/sub/b.txt"]
    assert store.grep(S, r"\$\d", glob="*.md").files == ["/a.md"]
    assert store.grep(S, "cost", path="/sub").files == ["/sub/b.txt"]
    assert store.grep(S, "cost", path="/a.md").files == ["/a.md"]
    assert store.grep(S, "COST").files == []
    with pytest.raises(InvalidPattern, match="not a valid Python regular expression"):
        store.grep(S, "(unclosed")
    with pytest.raises(InvalidPattern, match="output_mode"):
        store.grep(S, "x", output_mode="lines")


def test_grep_is_line_based_and_capped(store: SqlStore) -> None:
    store.write(S, "/many.md", "".join(f"hit {i}\n" for i in range(50)))
    store.write(S, "/span.md", "first\nsecond\n")
    assert store.grep(S, r"first\nsecond").files == []  # never matches across lines
    assert store.grep(S, r"\Asecond").files == ["/span.md"]  # \A anchors each line
    r = store.grep(S, "hit", output_mode="content", limit=10)
    assert len(r.lines) == 10 and r.truncated
    from memagent.vfs.grep.engine import render

    assert "results cut at 10" in render(r)


def test_deleted_files_invisible_to_search(store: SqlStore) -> None:
    store.write(S, "/x.md", "needle")
    store.delete(S, "/x.md")
    assert store.grep(S, "needle").files == []
    assert store.glob(S, "*.md") == []


def test_diff(store: SqlStore) -> None:
    store.write(S, "/f.md", "a\nb\n")
    store.write(S, "/f.md", "a\nc\n")
    out = store.diff(S, "/f.md", 1, 2)
    assert "--- /f.md@1" in out and "-b\n" in out and "+c\n" in out
    assert store.diff(S, "/f.md", 2, 2) == ""
    store.delete(S, "/f.md")
    assert "+++ /dev/null" in store.diff(S, "/f.md", 2, 3)


def test_scopes_are_separate(store: SqlStore) -> None:
    store.create_agent("b")
    store.write("agent:a", "/AGENTS.md", "A")
    store.write("agent:b", "/AGENTS.md", "B")
    store.write("user:tester", "/prefs.md", "U")
    assert store.read("agent:b", "/AGENTS.md").content == "B"
    assert store.glob("agent:a", "**") == ["/AGENTS.md"]
    assert store.grep("agent:a", "U").files == []


def test_agents(store: SqlStore) -> None:
    store.create_agent("zeta", {"/AGENTS.md": "start"})
    assert store.list_agents() == ["a", "zeta"]
    assert store.read("agent:zeta", "/AGENTS.md").content == "start"
    with pytest.raises(AlreadyExists):
        store.create_agent("zeta")
    with pytest.raises(AgentNotFound, match="memagent init ghost"):
        store.require_agent("ghost")
    with pytest.raises(Exception, match="invalid agent name"):
        store.create_agent("Bad Name")


def test_dropped_connections_are_replaced(fresh_pg_url: str) -> None:
    """The server drops every session (a restart, an idle timeout): the next call just works."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    st = open_store(fresh_pg_url)
    st.create_agent("a")
    st.write(S, "/k.md", "kept\n")
    assert st.read(S, "/k.md").content == "kept\n"  # a pooled connection now exists
    name = make_url(fresh_pg_url).database
    admin = create_engine(make_url(fresh_pg_url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        killed = conn.execute(text("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                   "WHERE datname = :db AND pid <> pg_backend_pid()"), {"db": name}).scalar()
    admin.dispose()
    assert killed >= 1
    assert st.write(S, "/k.md", "after\n", expected_version=1).version == 2
    assert [r.version for r in st.history(S, "/k.md")] == [2, 1]
    st.close()
