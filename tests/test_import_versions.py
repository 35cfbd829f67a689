"""Import writes at the versions its preview showed, and creates a new agent with its files atomically.

Store level (SQLite and Postgres): ``bulk_write(expected_versions=...)`` refuses a
batch when any file named there changed, appeared or was deleted since it was
read, naming it and storing nothing; ``bulk_write(create=True)`` creates the agent
in the same transaction as its files.

End to end, through the installed ``memagent``: another process (the test's own, on
its own connection) changes a file while ``memagent import`` waits for its "yes" (the
test waits until the question is on the import's stdout, so the order is fixed); and an import is SIGKILLed before
each database step of its write (the test-only ``MEMAGENT_TEST_IMPORT_STOP_AT``
hook stops the process there and says so on stderr), after which there is either
no agent or the agent with all of its files.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from memagent.agent.cli import templates
from memagent.agent.cli.main import main
from memagent.agent.cli.transfer import STOP_AT
from memagent.vfs import SqlStore, open_store
from memagent.vfs.errors import AlreadyExists, IsADirectory, NotFound, ValidationFailed, VfsError
from memagent.vfs.files import bulk
from memagent.vfs.files.bulk import ChangedSince, Drift
from tests.cli_helpers import MEMAGENT, err, run

# Only a guard against a hung child: every wait below ends on an event (text seen,
# stream closed, process exited) long before this on any machine.
HANG = 300.0

ANN = "# Ann\n\n- likes tea\n"


def scope_files(store: SqlStore, scope: str) -> dict[str, str]:
    return {i.path: store.read(scope, i.path).content for i in store.all_files(scope)}


def history_lengths(store: SqlStore, scope: str) -> dict[str, int]:
    return {i.path: len(store.history(scope, i.path)) for i in store.all_files(scope)}


# -- store level ---------------------------------------------------------------------


def test_versioned_batch_at_the_versions_read_is_stored(store: SqlStore) -> None:
    store.write("agent:a", "/knowledge/ann.md", ANN)
    store.write("agent:a", "/knowledge/same.md", "# Same\n")
    changes = store.bulk_write("agent:a", {"/knowledge/ann.md": "# Ann\n\n- coffee\n", "/knowledge/bob.md": "# Bob\n"},
                               expected_versions={"/knowledge/ann.md": 1, "/knowledge/bob.md": 0,
                                                  "/knowledge/same.md": 1},
                               message="import from x (folder)")
    assert [(c.path, c.version) for c in changes] == [("/knowledge/ann.md", 2), ("/knowledge/bob.md", 1)]
    assert store.read("agent:a", "/knowledge/ann.md").content == "# Ann\n\n- coffee\n"
    assert store.history("agent:a", "/knowledge/same.md")[0].version == 1  # checked, not written


@pytest.mark.parametrize("what", ["changed", "created", "deleted", "checked-only file changed"])
def test_versioned_batch_refuses_a_file_that_moved_and_stores_nothing(store: SqlStore, what: str) -> None:
    store.write("agent:a", "/knowledge/ann.md", ANN)
    store.write("agent:a", "/knowledge/same.md", "# Same\n")
    seen = {"/knowledge/ann.md": 1, "/knowledge/bob.md": 0, "/knowledge/same.md": 1}
    if what == "changed":
        store.edit("agent:a", "/knowledge/ann.md", "tea", "green tea")
        expected = Drift("/knowledge/ann.md", 1, 2)
    elif what == "created":
        store.write("agent:a", "/knowledge/bob.md", "# Bob by hand\n")
        expected = Drift("/knowledge/bob.md", 0, 1)
    elif what == "deleted":
        store.delete("agent:a", "/knowledge/ann.md")
        expected = Drift("/knowledge/ann.md", 1, None)
    else:
        store.edit("agent:a", "/knowledge/same.md", "Same", "Same, edited")
        expected = Drift("/knowledge/same.md", 1, 2)
    files_before = scope_files(store, "agent:a")
    lengths_before = history_lengths(store, "agent:a")
    with pytest.raises(ChangedSince) as caught:
        store.bulk_write("agent:a", {"/knowledge/ann.md": "# Ann\n\n- coffee\n", "/knowledge/bob.md": "# Bob\n"},
                         expected_versions=seen)
    assert caught.value.drifts == [expected]
    assert str(caught.value).startswith(f"{expected.path} changed since it was read (")
    assert scope_files(store, "agent:a") == files_before
    assert history_lengths(store, "agent:a") == lengths_before


def test_changed_since_names_every_moved_file(store: SqlStore) -> None:
    store.write("agent:a", "/knowledge/ann.md", ANN)
    store.write("agent:a", "/knowledge/bob.md", "# Bob\n")
    store.edit("agent:a", "/knowledge/ann.md", "tea", "green tea")
    with pytest.raises(ChangedSince) as caught:
        store.bulk_write("agent:a", {"/knowledge/ann.md": "x\n", "/knowledge/cy.md": "y\n"},
                         expected_versions={"/knowledge/ann.md": 1, "/knowledge/bob.md": 0, "/knowledge/cy.md": 0})
    assert caught.value.drifts == [Drift("/knowledge/ann.md", 1, 2), Drift("/knowledge/bob.md", 0, 1)]
    assert "(you saw version 1, it is now version 2) (and 1 more file(s))" in str(caught.value)
    assert not store.exists("agent:a", "/knowledge/cy.md")


def test_versioned_batch_needs_a_version_for_every_file_it_writes(store: SqlStore) -> None:
    with pytest.raises(VfsError, match="no expected version given for /knowledge/bob.md"):
        store.bulk_write("agent:a", {"/knowledge/ann.md": ANN, "/knowledge/bob.md": "# Bob\n"},
                         expected_versions={"knowledge/ann.md": 0})  # normalised like the batch
    assert store.all_files("agent:a") == []


def test_create_makes_the_agent_and_its_files_in_one_transaction(store: SqlStore) -> None:
    files = {f"/knowledge/f{i:02}.md": f"# File {i}\n\nline {i}\n" for i in range(bulk_min())}
    store.bulk_write("agent:fresh", files, expected_versions=dict.fromkeys(files, 0), create=True,
                     message="import from src (folder)")
    assert "fresh" in store.list_agents()
    assert scope_files(store, "agent:fresh") == files
    assert [e.name for e in store.ls("agent:fresh", "/knowledge")] == sorted(p.rsplit("/", 1)[1] for p in files)
    assert store.grep("agent:fresh", "line 7").files == ["/knowledge/f07.md"]


def test_create_refuses_an_existing_agent_and_stores_nothing(store: SqlStore) -> None:
    with pytest.raises(AlreadyExists, match="agent 'a' already exists"):
        store.bulk_write("agent:a", {"/knowledge/ann.md": ANN}, create=True)
    assert store.all_files("agent:a") == []
    with pytest.raises(VfsError, match="not an agent's scope"):
        store.bulk_write("user:tester", {"/knowledge/ann.md": ANN}, create=True)


@pytest.mark.parametrize("bad", ["invalid file", "file below a file"])
def test_create_that_fails_leaves_no_agent(store: SqlStore, bad: str) -> None:
    files = {f"/knowledge/f{i:02}.md": f"# File {i}\n" for i in range(bulk_min())}
    error: type[Exception]
    if bad == "invalid file":  # refused before the transaction
        files["/tools.json"] = "{not json"
        error = ValidationFailed
    else:  # refused inside it, after the agent row was inserted
        files["/knowledge/f00.md/inner.md"] = "x\n"
        error = IsADirectory
    with pytest.raises(error):
        store.bulk_write("agent:fresh", files, expected_versions=dict.fromkeys(files, 0), create=True)
    assert "fresh" not in store.list_agents()
    assert store.all_files("agent:fresh") == []


def bulk_min() -> int:
    """Enough files for the batched index upkeep (triggers paused), the path imports take."""
    from memagent.vfs.files.revisions import BATCH_UPKEEP_MIN

    return BATCH_UPKEEP_MIN + 5


# -- the memagent command -------------------------------------------------------------


class Child:
    """A running ``memagent`` whose stdout and stderr are read as they arrive."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([MEMAGENT, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env={**os.environ, **env})
        self._text = {"out": b"", "err": b""}
        self._closed = {"out": False, "err": False}
        self._cond = threading.Condition()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [threading.Thread(target=self._pump, args=(name, stream), daemon=True)
                         for name, stream in (("out", self.proc.stdout), ("err", self.proc.stderr))]
        for reader in self._readers:
            reader.start()

    def _pump(self, name: str, stream: object) -> None:
        fd = stream.fileno()  # type: ignore[attr-defined]
        while chunk := os.read(fd, 65536):
            with self._cond:
                self._text[name] += chunk
                self._cond.notify_all()
        with self._cond:
            self._closed[name] = True
            self._cond.notify_all()

    def wait_for(self, name: str, text: str) -> bool:
        """True once ``text`` is on the stream, False if the stream closed without it."""
        want = text.encode()
        with self._cond:
            done = self._cond.wait_for(lambda: want in self._text[name] or self._closed[name], timeout=HANG)
            assert done, f"memagent neither printed {text!r} nor ended"
            return want in self._text[name]

    def text(self, name: str) -> str:
        with self._cond:
            return self._text[name].decode()

    def answer(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode())
        self.proc.stdin.close()

    def finish(self) -> tuple[int, str, str]:
        code = self.proc.wait(timeout=HANG)
        for reader in self._readers:
            reader.join(timeout=HANG)
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        return code, self._text["out"].decode(), self._text["err"].decode()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.finish()


@contextmanager
def opened(url: str) -> Iterator[SqlStore]:
    store = open_store(url)
    try:
        yield store
    finally:
        store.close()


def write_source(folder: Path, files: dict[str, str]) -> Path:
    for path, content in files.items():
        target = folder / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    return folder


MEANWHILE: dict[str, tuple[Callable[[SqlStore], object], str]] = {
    # what another process (this one, on its own connection) does while the question is open
    # -> (what it does, the error's tail)
    "edit": (lambda store: store.edit("agent:ra", "/knowledge/ann.md", "tea", "green tea"),
             "/knowledge/ann.md changed since the preview (you saw version 1, it is now version 2)"),
    "create": (lambda store: store.write("agent:ra", "/knowledge/bob.md", "# Bob, by hand\n"),
               "/knowledge/bob.md changed since the preview (you saw no file there, it is now version 1)"),
    "delete": (lambda store: store.delete("agent:ra", "/knowledge/ann.md"),
               "/knowledge/ann.md changed since the preview (you saw version 1, it is now deleted)"),
    "edit a file shown as same": (lambda store: store.edit("agent:ra", "/knowledge/same.md", "Same", "Same, edited"),
                                  "/knowledge/same.md changed since the preview (you saw version 1, "
                                  "it is now version 2)"),
}


# Every kind of change on SQLite and Postgres; through PgBouncer one: the pooler adds nothing
# per kind, whose detection is the store's (test_versioned_batch_refuses_a_file_that_moved_and_stores_nothing
# runs all four through it), and the "edit" case takes the same processes and statements
# through it as the others.
@pytest.mark.parametrize(("backend_url", "meanwhile"),
                         [(backend, kind) for backend in ("sqlite", "postgres") for kind in MEANWHILE]
                         + [("pgbouncer", "edit")], indirect=["backend_url"])
def test_import_refuses_a_file_changed_by_another_process_while_it_asked(
        backend_url: str, tmp_path: Path, meanwhile: str) -> None:
    env = {"MEMAGENT_DB": backend_url, "NO_COLOR": "1"}
    with opened(backend_url) as store:
        store.create_agent("ra", {"/knowledge/ann.md": ANN, "/knowledge/same.md": "# Same\n"})
    src = write_source(tmp_path / "src", {"/knowledge/ann.md": "# Ann\n\n- likes coffee\n",
                                          "/knowledge/bob.md": "# Bob\n", "/knowledge/same.md": "# Same\n"})
    child = Child("import", str(src), "--as", "ra", "--format", "folder", env=env)
    assert child.wait_for("out", "Import 2 file(s) into agent 'ra'?")
    with opened(backend_url) as store:
        files_at_preview = scope_files(store, "agent:ra")
    change, tail = MEANWHILE[meanwhile]
    with opened(backend_url) as store:
        change(store)
    with opened(backend_url) as store:
        after_other = scope_files(store, "agent:ra")
        lengths = history_lengths(store, "agent:ra")
    assert after_other != files_at_preview
    child.answer("y\n")
    code, stdout, stderr = child.finish()
    assert code == 1
    assert stderr == f"memagent: {tail}; nothing was stored; run the import again\n"
    assert "imported" not in stdout
    with opened(backend_url) as store:
        assert scope_files(store, "agent:ra") == after_other
        assert history_lengths(store, "agent:ra") == lengths
        assert all(r.author != "import" for i in store.all_files("agent:ra")
                   for r in store.history("agent:ra", i.path))
    # Run again, it previews what is there now and stores it.
    again = run("import", str(src), "--as", "ra", "--format", "folder", "--yes", env=env)
    assert again.returncode == 0, err(again)
    with opened(backend_url) as store:
        assert scope_files(store, "agent:ra") == {"/knowledge/ann.md": "# Ann\n\n- likes coffee\n",
                                                  "/knowledge/bob.md": "# Bob\n", "/knowledge/same.md": "# Same\n"}


def test_import_refuses_an_agent_created_while_it_asked(backend_url: str, tmp_path: Path) -> None:
    env = {"MEMAGENT_DB": backend_url, "NO_COLOR": "1"}
    with opened(backend_url):
        pass  # the schema, so the two processes do not both create it
    src = write_source(tmp_path / "src", {"/knowledge/ann.md": ANN})
    child = Child("import", str(src), "--as", "copy", "--format", "folder", env=env)
    assert child.wait_for("out", "Import 1 file(s) into agent 'copy'?")
    with opened(backend_url) as store:  # another process makes the agent (what `memagent init copy` stores)
        store.create_agent("copy", templates.files(templates.DEFAULT_TEMPLATE))
        made = scope_files(store, "agent:copy")
    child.answer("y\n")
    code, _, stderr = child.finish()
    assert code == 1
    assert stderr == ("memagent: agent 'copy' was created since the preview; nothing was stored; "
                      "run the import again\n")
    with opened(backend_url) as store:
        assert scope_files(store, "agent:copy") == made
        with pytest.raises(NotFound):
            store.read("agent:copy", "/knowledge/ann.md")


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_change_committed_between_the_check_and_the_write_is_refused(db_url: str, tmp_path: Path) -> None:
    # Postgres only: there the import's transaction takes no lock before its UPDATE, so
    # another writer can commit in that window. On SQLite the import's BEGIN IMMEDIATE
    # holds the database's write lock from the check on, so nobody can.
    env = {"MEMAGENT_DB": db_url, "NO_COLOR": "1"}
    with opened(db_url) as store:
        store.create_agent("ra", {"/knowledge/ann.md": ANN, "/knowledge/same.md": "# Same\n"})
    src = write_source(tmp_path / "src", {"/knowledge/ann.md": "# Ann\n\n- likes coffee\n",
                                          "/knowledge/same.md": "# Same\n"})
    step = 0
    while True:  # find the step that overwrites /knowledge/ann.md: the check is behind it
        step += 1
        child = Child("import", str(src), "--as", "ra", "--format", "folder", "--yes",
                      env={**env, STOP_AT: str(step)})
        assert child.wait_for("err", f"stopped at step {step}: "), "the import ended without overwriting the file"
        assert child.wait_for("err", "\n")
        if "UPDATE files" in child.text("err"):
            break
        child.kill()
    other = run("fs", "edit", "-a", "ra", "/knowledge/ann.md", "tea", "green tea", env=env)
    assert other.returncode == 0, err(other)
    child.answer("\n")
    code, _, stderr = child.finish()
    assert code == 1
    assert stderr.splitlines()[-1] == ("memagent: /knowledge/ann.md changed since the preview (you saw version 1, "
                                       "it is now version 2); nothing was stored; run the import again")
    with opened(db_url) as store:
        assert store.read("agent:ra", "/knowledge/ann.md").content == "# Ann\n\n- likes green tea\n"
        assert [r.author for r in store.history("agent:ra", "/knowledge/ann.md")] == ["cli", "cli"]


def test_import_killed_at_every_step_leaves_no_agent_or_all_its_files(backend_url: str, tmp_path: Path) -> None:
    files = {f"/knowledge/f{i:02}.md": f"# File {i}\n\nfact {i}\n" for i in range(bulk_min())}
    src = write_source(tmp_path / "src", files)
    env = {"MEMAGENT_DB": backend_url, "NO_COLOR": "1"}
    with opened(backend_url):
        pass  # the schema exists before the first import, so every step counted is the import's own
    outcomes: list[str] = []
    with opened(backend_url) as store:
        step = 0
        while True:
            step += 1
            agent = f"k{step}"
            child = Child("import", str(src), "--as", agent, "--format", "folder", "--yes",
                          env={**env, STOP_AT: str(step)})
            stopped = child.wait_for("err", f"stopped at step {step}: ")
            if stopped:
                child.kill()
            else:
                code, _, stderr = child.finish()
                assert code == 0, stderr
            agents = store.list_agents()
            stored = scope_files(store, f"agent:{agent}")
            if agent in agents:
                assert stored == files, f"killed at step {step}: agent {agent} has {len(stored)} of {len(files)}"
                outcomes.append("all")
            else:
                assert stored == {}, f"killed at step {step}: files without their agent"
                outcomes.append("none")
            if not stopped:
                break
    # Kills inside the transaction left nothing, kills after its commit everything; the
    # run went through the agent insert, the files and the commit (several steps).
    assert outcomes[-1] == "all"
    first_all = outcomes.index("all")
    assert first_all >= 3 and set(outcomes[:first_all]) == {"none"} and set(outcomes[first_all:]) == {"all"}


def test_plain_import_uses_the_bulk_path(backend_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = {f"/knowledge/f{i:02}.md": f"# File {i}\n\nfact {i}\n" for i in range(bulk_min())}
    src = write_source(tmp_path / "src", files)
    batches: list[int] = []
    real = bulk.create_many

    def counting(conn: object, scope: str, new: list[tuple[str, str]], **kwargs: object) -> None:
        batches.append(len(new))
        real(conn, scope, new, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(bulk, "create_many", counting)
    result = CliRunner().invoke(main, ["--db", backend_url, "import", str(src), "--as", "copy",
                                       "--format", "folder"], input="y\n")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1].startswith(f"imported {len(files)} files ")
    assert batches == [len(files)]  # one executemany batch, not a write per file
    with opened(backend_url) as store:
        assert scope_files(store, "agent:copy") == files
        assert store.grep("agent:copy", "fact 12").files == ["/knowledge/f12.md"]
        assert [h.message for h in store.history("agent:copy", "/knowledge/f00.md")] == ["import from src (folder)"]
        assert store.search(["agent:copy"], "fact")  # the batch was indexed for search too
