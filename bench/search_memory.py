"""search_memory at 10,000 files: median and p95 latency of ranked queries, and the index cost per write.

Run: ``python -m bench.search_memory [--size 10000] [--pg URL]``. Loads the
deterministic corpus (``bench/corpus.py``) into a fresh SQLite file (and a fresh
Postgres database when ``--pg``/``MEMAGENT_BENCH_PG_URL`` is given), then times
``AgentView.search`` for a rare word, a common word, a multi-word question and a
hostile query, interleaved, and a single write with the index kept in step.
The goal (issue 13): under 20 ms per query at 10,000 files. Not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from bench.corpus import COMMON, RARE, generate
from memagent.vfs import open_store
from memagent.vfs.scopes import AgentView

QUERIES = {
    "rare word": RARE,
    "common word": COMMON,
    "question (5 words)": f"how do we handle {COMMON} billing deploys",
    "hostile (FTS syntax, 2 KB)": '"NEAR(* ^x OR) content:' + "a " * 1000,
}
GOAL_MS = 20.0


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def measure(url: str, size: int, reps: int) -> list[tuple[str, float, float]]:
    corpus = generate(size)
    with open_store(url) as store:
        store.create_agent("bench")
        store.bulk_write("agent:bench", corpus.files)
        view = AgentView(store, "bench")
        for q in QUERIES.values():
            view.search(q)  # warm caches
        samples: dict[str, list[float]] = {name: [] for name in QUERIES}
        for _ in range(reps):
            for name, q in QUERIES.items():
                samples[name].append(_timed(lambda q=q: view.search(q, k=10)))
        writes = [_timed(lambda i=i: view.write(f"/bench/w{i}.md", f"write {i} {COMMON}\n")) for i in range(reps)]
        samples["write (index kept in step)"] = writes
    return [(name, statistics.median(xs), sorted(xs)[int(0.95 * (len(xs) - 1))]) for name, xs in samples.items()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.search_memory")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--pg", default=os.environ.get("MEMAGENT_BENCH_PG_URL"))
    args = parser.parse_args(argv)
    backends: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        backends.append(("sqlite", f"sqlite:///{Path(tmp) / 'bench.db'}"))
        admin = None
        name = ""
        if args.pg:
            admin = create_engine(args.pg, isolation_level="AUTOCOMMIT")
            name = "bench_" + uuid.uuid4().hex[:8]
            with admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            backends.append(("postgres", make_url(args.pg).set(database=name).render_as_string(hide_password=False)))
        try:
            print(f"search_memory, {args.size:,} files, {args.reps} runs each (median / p95 ms; goal < {GOAL_MS:g} ms)")
            print(f"{'backend':<9} {'query':<28} {'median':>8} {'p95':>8}")
            for backend, url in backends:
                for label, med, p95 in measure(url, args.size, args.reps):
                    print(f"{backend:<9} {label:<28} {med:>8.2f} {p95:>8.2f}")
        finally:
            if admin is not None:
                with admin.connect() as conn:
                    conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                admin.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
