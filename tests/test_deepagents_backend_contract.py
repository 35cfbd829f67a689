"""deepagents' published backend tests, restated for ``MemagentBackend``.

deepagents' repository tests its backends in ``libs/deepagents/tests/unit_tests/backends``
(``test_store_backend.py``, ``test_store_backend_async.py``, and for binary uploads
``test_context_hub_backend.py``). Each test here states one of those checks in our
own words against ``MemagentBackend`` on SQLite and Postgres; the checks about
LangGraph stores themselves (namespaces, legacy list content, batch counts, the
middleware's eviction) have no counterpart in a memagent backend and are left out.
Where deepagents' backends disagree, the test names the one we follow.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from deepagents.backends.protocol import EditResult, ReadResult, WriteResult

from memagent.integrations.deepagents import MemagentBackend
from memagent.vfs import open_store


@pytest.fixture(params=["sqlite", "postgres"])
def be(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemagentBackend]:
    url = f"sqlite:///{tmp_path / 'm.db'}" if request.param == "sqlite" else request.getfixturevalue("fresh_pg_url")
    store = open_store(url)
    store.create_agent("a")
    yield MemagentBackend(store, "a", approve="yolo")
    store.close()


def _write_all(be: MemagentBackend, files: dict[str, str]) -> None:
    for path, content in files.items():
        assert be.write(path, content).error is None, path


def _paths(entries: list | None) -> list[str]:
    assert entries is not None
    return [e["path"] for e in entries]


# -- test_store_backend.py ---------------------------------------------------------------


def test_write_read_edit_ls_grep_glob(be: MemagentBackend) -> None:
    w = be.write("/docs/readme.md", "hello store")
    assert isinstance(w, WriteResult) and w.error is None and w.path == "/docs/readme.md"
    r = be.read("/docs/readme.md")
    assert isinstance(r, ReadResult) and r.file_data is not None and "hello store" in r.file_data["content"]
    e = be.edit("/docs/readme.md", "hello", "hi", replace_all=False)
    assert isinstance(e, EditResult) and e.error is None and e.occurrences == 1
    assert "/docs/readme.md" in _paths(be.ls("/docs/").entries)
    assert "/docs/readme.md" in _paths(be.grep("hi", path="/").matches)
    bare, deep = _paths(be.glob("*.md", path="/").matches), _paths(be.glob("**/*.md", path="/").matches)
    assert "/docs/readme.md" in bare and set(bare) == set(deep)


def test_read_reports_the_window_it_returned(be: MemagentBackend) -> None:
    be.write("/notes.txt", "one\ntwo\nthree\nfour\nfive")
    r = be.read("/notes.txt", offset=1, limit=2)
    assert r.error is None
    assert (r.total_lines, r.start_line, r.end_line, r.next_offset) == (5, 2, 3, 3)


@pytest.mark.parametrize(("offset", "limit"), [(0, 0), (0, -3), (-1, 0)])
def test_a_limit_below_one_reads_nothing_without_error(be: MemagentBackend, offset: int, limit: int) -> None:
    be.write("/notes.txt", "one\ntwo\nthree")
    r = be.read("/notes.txt", offset=offset, limit=limit)
    assert r.error is None and r.file_data is not None
    assert r.file_data["content"] == "" and r.start_line is None


def test_a_negative_offset_reads_from_the_first_line(be: MemagentBackend) -> None:
    be.write("/notes.txt", "one\ntwo\nthree")
    r = be.read("/notes.txt", offset=-1, limit=2)
    assert r.error is None and (r.start_line, r.end_line) == (1, 2)


@pytest.mark.parametrize("name", ["/clip.mkv", "/clip.webm", "/pic.png"])
def test_a_binary_file_name_is_read_whole_not_sliced(be: MemagentBackend, name: str) -> None:
    be.write(name, "single line of bytes")
    # As text, offset 5 of a one-line file would be an "offset exceeds file length" error.
    r = be.read(name, offset=5, limit=10)
    assert r.error is None and r.file_data is not None
    assert r.file_data["content"] == "single line of bytes"


def test_a_text_file_past_its_end_is_still_an_error(be: MemagentBackend) -> None:
    be.write("/clip.txt", "single line")
    assert be.read("/clip.txt", offset=5, limit=10).error


def test_write_replaces_an_existing_file(be: MemagentBackend) -> None:
    assert be.write("/charmander.txt", "Hello world").error is None
    assert be.write("/charmander.txt", "New content").error is None
    r = be.read("/charmander.txt")
    assert r.file_data is not None and "New content" in r.file_data["content"]


def test_ls_lists_one_level_and_a_missing_folder_as_empty(be: MemagentBackend) -> None:
    _write_all(be, {"/src/main.py": "main code", "/src/utils/helper.py": "helper code",
                    "/src/utils/common.py": "common code", "/docs/readme.md": "readme",
                    "/docs/api/reference.md": "api reference", "/config.json": "config"})
    top = _paths(be.ls("/").entries)
    assert {"/config.json", "/src/", "/docs/"} <= set(top)
    assert not {"/src/main.py", "/src/utils/helper.py", "/docs/readme.md"} & set(top)
    src = _paths(be.ls("/src/").entries)
    assert "/src/main.py" in src and "/src/utils/" in src and "/src/utils/helper.py" not in src
    assert sorted(_paths(be.ls("/src/utils/").entries)) == ["/src/utils/common.py", "/src/utils/helper.py"]
    missing = be.ls("/nonexistent/")
    assert missing.entries == [] and missing.error is None


def test_ls_with_and_without_a_trailing_slash_agree(be: MemagentBackend) -> None:
    _write_all(be, {"/file.txt": "content", "/dir/nested.txt": "nested"})
    assert be.ls("/").entries
    assert _paths(be.ls("/dir/").entries) == _paths(be.ls("/dir").entries) == ["/dir/nested.txt"]


@pytest.mark.parametrize(("pattern", "where"), [
    ("def __init__(", "/code.py"), ("str | int", "/types.py"), ("[a-z]", "/regex.py"), ("(.*)", "/regex.py"),
    ("api.key", "/config.json"), ("x * y", "/math.py"), ("a^2", "/math.py"),
])
def test_grep_takes_regex_characters_literally(be: MemagentBackend, pattern: str, where: str) -> None:
    _write_all(be, {"/code.py": "def __init__(self, arg):\n    pass",
                    "/types.py": "def func(x: str | int) -> None:\n    return x",
                    "/regex.py": "pattern = r'[a-z]+'\nchars = '(.*)'",
                    "/config.json": '{"api.key": "value", "url": "https://example.com"}',
                    "/math.py": "result = x * y + z\nformula = a^2 + b^2"})
    assert where in _paths(be.grep(pattern, path="/").matches)


def test_delete_a_file(be: MemagentBackend) -> None:
    be.write("/docs/readme.md", "hello store")
    r = be.delete("/docs/readme.md")
    assert r.error is None and r.path == "/docs/readme.md"
    assert be.read("/docs/readme.md").error is not None


def test_delete_a_folder_removes_everything_below_it_only(be: MemagentBackend) -> None:
    _write_all(be, {"/work/a.txt": "a", "/work/sub/b.txt": "b", "/keep.txt": "k"})
    r = be.delete("/work")
    assert r.error is None and r.path == "/work"
    assert be.read("/work/a.txt").error and be.read("/work/sub/b.txt").error
    assert be.read("/keep.txt").error is None


def test_delete_of_nothing_is_not_found(be: MemagentBackend) -> None:
    r = be.delete("/nope.md")
    assert r.path is None and r.error is not None and "not found" in r.error


def test_a_star_is_a_file_name_not_a_wildcard(be: MemagentBackend) -> None:
    _write_all(be, {"/a.md": "a", "/b.md": "b", "*": "literal star"})
    r = be.delete("*")
    assert r.error is None and r.path == "*"
    assert be.read("/a.md").error is None and be.read("/b.md").error is None
    assert be.read("*").error is not None


def test_deleting_a_missing_star_deletes_nothing(be: MemagentBackend) -> None:
    _write_all(be, {"/a.md": "a", "/b.md": "b"})
    r = be.delete("*")
    assert r.path is None and r.error is not None and "not found" in r.error
    assert be.read("/a.md").error is None and be.read("/b.md").error is None


# -- test_store_backend_async.py ------------------------------------------------------------


def test_async_delete_of_a_folder_and_of_a_star(be: MemagentBackend) -> None:
    async def run() -> None:
        for path, content in {"/work/a.txt": "a", "/work/sub/b.txt": "b", "/keep.txt": "k", "*": "star"}.items():
            assert (await be.awrite(path, content)).error is None
        assert (await be.adelete("/work")).error is None
        assert (await be.aread("/work/a.txt")).error and (await be.aread("/work/sub/b.txt")).error
        assert (await be.aread("/keep.txt")).error is None
        star = await be.adelete("*")
        assert star.error is None and star.path == "*"
        again = await be.adelete("*")
        assert again.error is not None and "not found" in again.error
        assert (await be.aread("/keep.txt")).error is None

    asyncio.run(run())


def test_async_errors_edit_replace_all_and_windows(be: MemagentBackend) -> None:
    async def run() -> None:
        missing = await be.aedit("/missing.txt", "a", "b")
        assert missing.error and "not found" in missing.error
        assert (await be.aread("/nonexistent.txt")).error is not None
        assert (await be.awrite("/test.txt", "foo bar foo baz")).error is None
        twice = await be.aedit("/test.txt", "foo", "qux", replace_all=False)
        assert twice.error is not None and "appears 2 times" in twice.error
        every = await be.aedit("/test.txt", "foo", "qux", replace_all=True)
        assert every.error is None and every.occurrences == 2
        once = await be.aedit("/test.txt", "bar", "xyz")
        assert once.error is None and once.occurrences == 1
        r = await be.aread("/test.txt")
        assert r.file_data is not None and "qux xyz qux baz" in r.file_data["content"]
        assert (await be.awrite("/multi.txt", "\n".join(f"Line {i}" for i in range(1, 11)))).error is None
        w = await be.aread("/multi.txt", offset=2, limit=3)
        assert w.file_data is not None
        text = w.file_data["content"]
        assert all(f"Line {i}" in text for i in (3, 4, 5)) and "Line 1\n" not in text and "Line 6" not in text

    asyncio.run(run())


def test_async_grep_glob_and_a_broken_regex_pattern(be: MemagentBackend) -> None:
    async def run() -> None:
        for path, content in {"/test.py": "import os", "/test.txt": "import nothing", "/main.py": "import sys",
                              "/src/utils/helper.py": "utils", "/docs/api.md": "api docs"}.items():
            assert (await be.awrite(path, content)).error is None
        py = _paths((await be.agrep("import", path="/", glob="*.py")).matches)
        assert sorted(py) == ["/main.py", "/test.py"]
        assert {"/main.py", "/src/utils/helper.py", "/test.py"} <= set(_paths((await be.aglob("**/*.py", "/")).matches))
        assert "/docs/api.md" in _paths((await be.aglob("**/*.md", "/")).matches)
        broken = await be.agrep("[invalid", path="/")
        assert broken.error is None and broken.matches == []

    asyncio.run(run())


def test_async_upload_then_download(be: MemagentBackend) -> None:
    async def run() -> None:
        up = await be.aupload_files([("/file1.bin", b"Binary content 1"), ("/file2.bin", b"Binary content 2")])
        assert [u.error for u in up] == [None, None]
        down = await be.adownload_files(["/file1.bin", "/file2.bin"])
        assert [(d.error, d.content) for d in down] == [(None, b"Binary content 1"), (None, b"Binary content 2")]

    asyncio.run(run())


# -- binary uploads: refused as test_context_hub_backend.py expects ----------------------------


def test_a_binary_upload_is_refused_as_invalid_path_and_stores_nothing(be: MemagentBackend) -> None:
    [r] = be.upload_files([("/x.bin", b"\x80\x81\xff")])
    assert r.error == "invalid_path"
    assert be.store.all_files("agent:a") == []


def test_uploads_succeed_or_fail_one_by_one(be: MemagentBackend) -> None:
    ok, bad = be.upload_files([("/ok.md", b"hello"), ("/bad.bin", b"\x80")])
    assert ok.error is None and bad.error == "invalid_path"
    assert [d.content for d in be.download_files(["/ok.md"])] == [b"hello"]
    assert [f.path for f in be.store.all_files("agent:a")] == ["/ok.md"]
