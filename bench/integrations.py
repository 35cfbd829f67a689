"""deepagents backends side by side: grep and glob at 10,000 files, ours against theirs.

Run: ``python -m bench.integrations [--size 10000] [--reps 7] [--pg URL] [--out bench/RESULTS.md|-]``.
Loads the deterministic corpus (``bench/corpus.py``) into

- ``MemagentBackend`` (memagent.integrations.deepagents) over a fresh SQLite file,
  and over a fresh Postgres database when ``--pg``/``MEMAGENT_BENCH_PG_URL`` is given;
- deepagents' own ``StoreBackend`` over LangGraph's ``SqliteStore``
  (langgraph-checkpoint-sqlite, a file) and over its ``InMemoryStore``;

then times the same protocol calls on each, interleaved, after one warm-up, and
checks that every backend returns the same answer (paths for glob, (path, line, text)
for grep, compared as sorted lists; ``max_count`` rows compare the count and the
``truncated`` flag). A mismatch stops the run. ``grep_regex`` and ``search`` exist
only on ours (deepagents' grep is literal and its store backends have no ranked
search); they are listed for scale. The table goes to the section between the
``integrations`` markers of RESULTS.md (nothing else in the file is touched). Not a test.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from deepagents.backends.protocol import BackendProtocol, GlobResult, GrepResult
from deepagents.backends.store import StoreBackend
from deepagents.backends.utils import create_file_data
from langgraph.store.base import BaseStore, PutOp
from langgraph.store.memory import InMemoryStore

from bench import pg as throwaway_pg
from bench import sections
from bench.corpus import COMMON, RARE, REGEX, generate
from memagent.integrations.deepagents import MemagentBackend
from memagent.vfs import open_store
from memagent.vfs.paths import scope_name

Call = Callable[[BackendProtocol], Any]
# A median and the number of samples behind it; None: the backend has no such call.
Cell = tuple[float, int] | None
# Seconds of samples per row after which a slow backend stops (deepagents' StoreBackend
# over SqliteStore pages through the store with OFFSET: ~30 s a call at 10,000 files).
BUDGET_S = 45.0

# (label, call, comparable answer). Each call uses only the protocol, so it runs on every backend.
OPS: list[tuple[str, Call]] = [
    ('glob("*.md") (every file, basename at any depth)', lambda b: b.glob("*.md")),
    ('glob("skills/*.md")', lambda b: b.glob("skills/*.md")),
    ('glob("**/*.md", path="/knowledge")', lambda b: b.glob("**/*.md", "/knowledge")),
    ("grep rare literal (3 files)", lambda b: b.grep(RARE)),
    ("grep common word (~30 % of files)", lambda b: b.grep(COMMON)),
    ("grep common word, max_count=100", lambda b: b.grep(COMMON, max_count=100)),
    ('grep rare literal, glob="*.md", path="/knowledge"', lambda b: b.grep(RARE, "/knowledge", "*.md")),
]
OURS_ONLY: list[tuple[str, Callable[[MemagentBackend], Any]]] = [
    (f"grep_regex `{REGEX}` (ours only)", lambda b: b.grep_regex(REGEX)),
    (f'search("{COMMON} billing deploys") (ours only)', lambda b: b.search(f"{COMMON} billing deploys")),
]


def answer(result: Any) -> Any:
    """What must agree across backends."""
    if isinstance(result, GlobResult):
        assert result.error is None and result.matches is not None, result.error
        return sorted(m["path"] for m in result.matches)
    if isinstance(result, GrepResult):
        assert result.error is None and result.matches is not None, result.error
        return sorted((m["path"], m["line"], m["text"]) for m in result.matches), result.truncated
    return None


def comparable(label: str, result: Any) -> Any:
    got = answer(result)
    if "max_count" in label and got is not None:
        matches, truncated = got
        return len(matches), truncated  # which 100 lines come first is each backend's order
    return got


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def _load_store(store: BaseStore, files: dict[str, str]) -> None:
    ops = [PutOp(("filesystem",), path, dict(create_file_data(content))) for path, content in files.items()]
    for i in range(0, len(ops), 500):
        store.batch(ops[i:i + 500])


@contextmanager
def backends(size: int, pg: str | None, tmp: Path) -> Iterator[dict[str, BackendProtocol]]:
    from langgraph.store.sqlite import SqliteStore

    corpus = generate(size)
    out: dict[str, BackendProtocol] = {}
    with ExitStack() as stack:
        urls = [("memagent, SQLite", f"sqlite:///{tmp / 'memagent.db'}")]
        if pg:
            urls.append(("memagent, Postgres", stack.enter_context(throwaway_pg.database(pg, "bench_"))))
        for label, url in urls:
            store = stack.enter_context(open_store(url))
            store.create_agent("bench")
            store.bulk_write(scope_name("agent", "bench"), corpus.files)
            out[label] = MemagentBackend(store, "bench")
        sqlite_store = stack.enter_context(SqliteStore.from_conn_string(str(tmp / "langgraph.db")))
        sqlite_store.setup()
        _load_store(sqlite_store, corpus.files)
        out["deepagents StoreBackend, SqliteStore"] = StoreBackend(store=sqlite_store,
                                                                   namespace=lambda _rt: ("filesystem",))
        memory_store = InMemoryStore()
        _load_store(memory_store, corpus.files)
        out["deepagents StoreBackend, InMemoryStore"] = StoreBackend(store=memory_store,
                                                                     namespace=lambda _rt: ("filesystem",))
        yield out


def measure(size: int, reps: int, pg: str | None) -> tuple[list[str], dict[str, dict[str, Cell]]]:
    with tempfile.TemporaryDirectory() as tmp, backends(size, pg, Path(tmp)) as named:
        names = list(named)
        samples: dict[str, dict[str, list[float]]] = {label: {n: [] for n in names} for label, _ in OPS}
        for label, op in OPS:  # warm-up, and the answers must agree
            answers = {n: comparable(label, op(b)) for n, b in named.items()}
            first = answers[names[0]]
            for n, got in answers.items():
                if got != first:
                    raise SystemExit(f"{label}: {n} answered differently from {names[0]}")
        for r in range(reps):
            print(f"round {r + 1}/{reps}", file=sys.stderr, flush=True)
            for label, op in OPS:
                for n, b in named.items():
                    xs = samples[label][n]
                    # A backend taking seconds a call stops once a row has cost it BUDGET_S.
                    if sum(xs) / 1000 < BUDGET_S:
                        xs.append(_timed(lambda op=op, b=b: op(b)))
        medians: dict[str, dict[str, Cell]] = {
            label: {n: (statistics.median(xs), len(xs)) for n, xs in by.items()} for label, by in samples.items()}
        ours = {n: b for n, b in named.items() if isinstance(b, MemagentBackend)}
        for label, fn in OURS_ONLY:
            row: dict[str, Cell] = dict.fromkeys(names)
            for n, b in ours.items():
                fn(b)
                row[n] = (statistics.median(_timed(lambda fn=fn, b=b: fn(b)) for _ in range(reps)), reps)
            medians[label] = row
    return names, medians


def table(names: list[str], medians: dict[str, dict[str, Cell]], *, size: int, reps: int,
          seconds: float, pg: bool, load: str) -> str:
    theirs = [n for n in names if "StoreBackend" in n]
    head = ["operation", *[f"{n} ms" for n in names], *[f"memagent SQLite ÷ {n.split(', ')[1]}" for n in theirs]]
    lines = [
        "## deepagents backends (memagent.integrations.deepagents)",
        "",
        f"Generated by `{'MEMAGENT_BENCH_PG_URL=… ' if pg else ''}python -m bench.integrations --size {size} "
        f"--reps {reps}` in {seconds:.0f} s (load average at the end {load}): "
        f"{size:,} files of `bench/corpus.py`, median ms of {reps} interleaved rounds after one warm-up "
        f"(a backend whose calls take seconds stops sampling a row after {BUDGET_S:g} s: `n=` says how many "
        "samples its median has); "
        f"CPython {platform.python_version()}, {os.cpu_count()} logical cores. Every backend gave the same "
        "answer for every row (sorted paths for glob, sorted (path, line, text) for grep; count and "
        "`truncated` for max_count). Theirs is deepagents' `StoreBackend` over LangGraph's `SqliteStore` "
        "(langgraph-checkpoint-sqlite, a file) and over its `InMemoryStore`; it reads every file of the "
        "namespace into Python for each grep and glob, 100 items per store query at a growing OFFSET, and "
        "SqliteStore answers each such query by scanning and sorting the whole namespace, so a call's cost "
        "grows with the square of the number of files. Ours answers grep from memagent's indexed grep in the "
        "database and glob from one query over the path index, both with deepagents' own glob matcher.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for label, row in medians.items():
        cells = []
        for n in names:
            cell = row[n]
            cells.append("n/a" if cell is None else f"{cell[0]:,.2f}" + (f" (n={cell[1]})" if cell[1] < reps else ""))
        ours = row.get("memagent, SQLite")
        ratios = []
        for n in theirs:
            base = row.get(n)
            ratios.append(f"{ours[0] / base[0]:.4f}×" if ours is not None and base is not None else "")
        lines.append("| " + " | ".join([label, *cells, *ratios]) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.integrations", description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--pg", default=os.environ.get("MEMAGENT_BENCH_PG_URL"))
    parser.add_argument("--out", default=str(Path(__file__).with_name("RESULTS.md")),
                        help="file whose integrations section to replace ('-': print only)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    names, medians = measure(args.size, args.reps, args.pg)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    section = table(names, medians, size=args.size, reps=args.reps, seconds=time.perf_counter() - start,
                    pg=bool(args.pg), load=load)
    print(section)
    if args.out != "-":
        sections.write(args.out, "integrations", section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
