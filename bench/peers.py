"""The peer columns of ``python -m bench --peers``: deepagents' file backends on the same corpus.

Peers (each optional; a missing package makes its column say so):

- ``deepagents StoreBackend`` over LangGraph's ``SqliteStore``
  (``langgraph-checkpoint-sqlite``), a file next to memagent's SQLite database;
- the same over LangGraph's ``PostgresStore`` (``langgraph-checkpoint-postgres``),
  in a scratch database on the benchmark's Postgres server;
- ``deepagents FilesystemBackend`` over the benchmark's folder (``virtual_mode``).

Invariants:
- Same corpus, same run, same operations as memagent's rows (``ls``, ``read_file``,
  ``write_file``, ``edit_file``, ``glob``, ``grep`` for files and lines); each
  peer's answer is checked against memagent's and a difference is written into the
  row's notes. deepagents' ``grep`` is literal-only: regex rows say "n/a (literal
  only)" rather than timing a different question.
- The store peers are loaded the fastest way their API offers (``BaseStore.batch``
  of ``PutOp`` in chunks of 1,000, one transaction each), and that load is the
  "bulk load" cell. FilesystemBackend needs no load (the folder is the baseline's).
- deepagents is an optional *bench* dependency (``pip install -e .[bench]``); memagent
  never imports it, and ``python -m bench`` without ``--peers`` never imports this
  module's peers.
- Writes run last, after every read of the folder, so the baselines and the
  FilesystemBackend peer see the corpus unchanged while they are timed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from bench import pg
from bench.corpus import COMMON, RARE, READ_PATH, REGEX, REGEX_NO_LITERAL, Corpus

NS = ("bench", "filesystem")
LOAD_CHUNK = 1000
PEER_SQLITE = "deepagents+SqliteStore"
PEER_PG = "deepagents+PostgresStore"
PEER_FS = "deepagents FilesystemBackend"
PEERS = (PEER_SQLITE, PEER_PG, PEER_FS)
LITERAL_ONLY = "n/a (literal only)"

Fn = Callable[[], Any]


def missing() -> str | None:
    """Why the peers cannot run here (None: they can)."""
    try:
        import deepagents.backends  # noqa: F401
    except ImportError:
        return "deepagents is not installed (pip install -e '.[bench]')"
    return None


@contextmanager
def _sqlite_store(workdir: Path, size: int) -> Iterator[Any]:
    import sqlite3

    from langgraph.store.sqlite import SqliteStore

    conn = sqlite3.connect(workdir / f"peer-{size}.db", check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    store.setup()
    try:
        yield store
    finally:
        conn.close()


@contextmanager
def _pg_store(pg_url: str, size: int) -> Iterator[Any]:
    from langgraph.store.postgres import PostgresStore

    with pg.database(pg_url, f"peer_bench_{size}_") as ours:
        # LangGraph's store takes a plain libpq URL.
        url = make_url(ours).set(drivername="postgresql").render_as_string(hide_password=False)
        with PostgresStore.from_conn_string(url) as store:
            store.setup()
            yield store


def _load(store: Any, corpus: Corpus) -> float:
    from deepagents.backends.utils import create_file_data
    from langgraph.store.base import PutOp

    t = time.perf_counter()
    ops = []
    for path, content in corpus.files.items():
        data = create_file_data(content)
        data["encoding"] = "utf-8"
        ops.append(PutOp(NS, path, dict(data)))
        if len(ops) == LOAD_CHUNK:
            store.batch(ops)
            ops = []
    if ops:
        store.batch(ops)
    return time.perf_counter() - t


# -- answers in memagent's terms ------------------------------------------------------


def ls_names(result: Any, path: str) -> list[tuple[str, bool]]:
    prefix = path.rstrip("/") + "/"
    out = []
    for e in result.entries or []:
        p = e["path"]
        name = p[len(prefix):] if p.startswith(prefix) else p
        out.append((name.rstrip("/"), bool(e.get("is_dir"))))
    return sorted(out)


def grep_files(result: Any) -> list[str]:
    return sorted({m["path"] for m in result.matches or []})


def grep_lines(result: Any) -> int:
    return len(result.matches or [])


def glob_paths(result: Any) -> list[str]:
    return sorted(m["path"] for m in result.matches or [])


# -- one peer ---------------------------------------------------------------------------


def peer_calls(backend: Any, base_text: str) -> dict[str, Fn]:
    """The timed operations, keyed by memagent's row names."""
    counter = iter(range(10**9))
    edits = iter(range(10**9))

    def write() -> Any:
        return backend.write("/knowledge/bench-write.md", f"{base_text}round {next(counter)}\n")

    def edit() -> Any:
        i = next(edits)
        if i == 0:  # created at the first (warm-up) call, after the reads were checked
            backend.write("/knowledge/peer-edit.md", f"{base_text}marker-0\n")
        return backend.edit("/knowledge/peer-edit.md", f"marker-{i}\n", f"marker-{i + 1}\n")

    return {
        "ls /": lambda: backend.ls("/"),
        "ls /people (100 entries)": lambda: backend.ls("/people"),
        "read_file 4 KB": lambda: backend.read("/knowledge/reference-4k.md"),
        'glob("**/*.md")': lambda: backend.glob("**/*.md", "/"),
        'glob("skills/*.md")': lambda: backend.glob("skills/*.md", "/"),
        "grep rare literal, files_with_matches": lambda: backend.grep(RARE, "/"),
        "grep rare literal, content": lambda: backend.grep(RARE, "/"),
        "grep common word, files_with_matches": lambda: backend.grep(COMMON, "/"),
        "grep common word, content": lambda: backend.grep(COMMON, "/"),
        "write_file 4 KB (validated, revision)": write,
        "edit_file 4 KB (validated, revision)": edit,
    }


def _same_call(row: str) -> str:
    """deepagents' grep returns lines, so a files row and a content row are one call."""
    return row.rsplit(", ", 1)[0] if row.startswith("grep") else row


REGEX_ROWS = [f"grep regex `{REGEX}`, {m}" for m in ("files_with_matches", "content")] + [
    f"grep regex, no literal `{REGEX_NO_LITERAL}`, {m}" for m in ("files_with_matches", "content")]


def _differ(what: str, got: list[Any], want: list[Any]) -> str:
    lost, extra = len(set(want) - set(got)), len(set(got) - set(want))
    dup = len(got) - len(set(got))
    return (f"{what} differ ({lost} missing, {extra} extra{f', {dup} twice' if dup else ''}; "
            "checked once after timing)")


def check(name: str, got: Any, want: Any) -> str | None:
    """A note when the peer's answer differs from memagent's (None: the same)."""
    if name.startswith("ls "):
        names = ls_names(got, "/people" if "people" in name else "/")
        return None if names == want else _differ("entries", names, want)
    if name.startswith("read_file"):
        content = (got.file_data or {}).get("content") if got.error is None else None
        return None if content == want else "content differs"
    if name.startswith("glob"):
        return None if glob_paths(got) == want else _differ("paths", glob_paths(got), want)
    if name.startswith("grep") and name.endswith("files_with_matches"):
        return None if grep_files(got) == want else _differ("files", grep_files(got), want)
    if name.startswith("grep") and name.endswith("content"):
        return None if grep_lines(got) == want else f"{grep_lines(got)} lines, memagent {want}"
    if getattr(got, "error", None):
        return f"error: {got.error}"
    return None


# A peer call slower than this is timed once (its first, checked call) instead of
# ``reps`` rounds: deepagents' StoreBackend reads the whole namespace for ls, glob and
# grep (10,000 files: seconds per call), and a full run must end in minutes.
SLOW_CALL = 1.0


def run_peer(peer: str, backend: Any, corpus: Corpus, reps: int, expected: dict[str, Any],
             timed: Callable[[Fn, int], list[float]]) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Time each operation and check its answer (the first call's).

    A call is timed ``reps`` rounds after that first call, or, if the first took
    longer than ``SLOW_CALL``, by that one call alone (the row's note says so). Rows
    that are the same peer call (its grep has no files/content modes) share it.
    """
    calls = peer_calls(backend, corpus.files[READ_PATH])
    samples: dict[str, list[float]] = {}
    notes: dict[str, str] = {}
    done: dict[str, tuple[list[float], Any]] = {}
    for name, fn in calls.items():
        same = _same_call(name)
        if same in done:
            samples[name], first = done[same]
        else:
            t = time.perf_counter()
            first = fn()
            once = time.perf_counter() - t
            if once > SLOW_CALL:
                samples[name] = [once]
                notes[name] = f"{peer}: one timed call ({once:.1f} s)"
            else:
                rounds = reps if not name.startswith(("write", "edit")) else max(reps * 3, 20)
                samples[name] = timed(fn, rounds)
            done[same] = (samples[name], first)
        if name in expected:
            problem = check(name, first, expected[name])
            if problem:
                notes[name] = "; ".join(filter(None, [notes.get(name), f"{peer}: {problem}"]))
    for name in REGEX_ROWS:
        notes[name] = f"{peer}: {LITERAL_ONLY}"
    return samples, notes


@contextmanager
def backends(workdir: Path, root: Path, corpus: Corpus, size: int, pg_url: str | None,
             wanted: list[str]) -> Iterator[dict[str, tuple[Any, float | None, str]]]:
    """Each wanted peer as (backend, load seconds or None, note), or an absent peer's reason."""
    from contextlib import ExitStack

    from deepagents.backends import FilesystemBackend, StoreBackend

    out: dict[str, tuple[Any, float | None, str]] = {}
    with ExitStack() as stack:
        for peer in wanted:
            if peer == PEER_SQLITE:
                try:
                    store = stack.enter_context(_sqlite_store(workdir, size))
                except ImportError:
                    out[peer] = (None, None, "langgraph-checkpoint-sqlite is not installed")
                    continue
            elif peer == PEER_PG:
                if not pg_url:
                    out[peer] = (None, None, "no --pg-url")
                    continue
                try:
                    store = stack.enter_context(_pg_store(pg_url, size))
                except ImportError:
                    out[peer] = (None, None, "langgraph-checkpoint-postgres is not installed")
                    continue
            else:
                out[peer] = (FilesystemBackend(root_dir=root, virtual_mode=True), None, "the folder itself")
                continue
            spent = _load(store, corpus)
            out[peer] = (StoreBackend(store=store, namespace=lambda _rt: NS), spent,
                         f"BaseStore.batch of {LOAD_CHUNK:,} puts per transaction")
        yield out
