"""search_memory at 10,000 files: median and p95 latency of ranked queries, and the index cost per write.

Run: ``python -m bench.search_memory [--size 10000] [--pg URL] [--baseline REV] [--out FILE]``.
Loads the deterministic corpus (``bench/corpus.py``) into a fresh SQLite file (and a
fresh Postgres database when ``--pg``/``MEMAGENT_BENCH_PG_URL`` is given), then times
``AgentView.search`` for a rare word, a common word, a multi-word question and a
hostile query, interleaved, and a single write with the index kept in step.

Invariants:
- The goal (issue 13): every query class under ``GOAL_MS`` (median) at 10,000 files;
  the table says met or not per row. Writes have no goal here (``bench/run.py`` has).
- ``--baseline REV`` ranks with ``vfs/search/lexical.py`` as it was at git revision REV,
  interleaved query by query with the current one on the same store, so both see the
  same machine load; the table then gives both medians and whether the current top
  10 is the baseline's (a faster ranker must not quietly rank differently).
- Postgres is measured as a fresh import leaves it (no ANALYZE): what a person who
  just imported their files gets, and the state in which a plan that needs
  statistics goes wrong.
- ``--out FILE`` replaces the search section of FILE (see ``bench/sections.py``)
  and nothing else. Not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import pg, sections
from bench.corpus import COMMON, RARE, generate
from memagent.vfs import open_store
from memagent.vfs.paths import scope_name
from memagent.vfs.scopes import AgentView

QUERIES = {
    "rare word": RARE,
    "common word": COMMON,
    "question (5 words)": f"how do we handle {COMMON} billing deploys",
    "hostile (FTS syntax, 2 KB)": '"NEAR(* ^x OR) content:' + "a " * 1000,
}
WRITE = "write (index kept in step)"
GOAL_MS = 20.0


@dataclass
class Row:
    backend: str
    label: str
    samples: list[float] = field(default_factory=list)
    baseline: list[float] = field(default_factory=list)
    same_top: bool | None = None

    @staticmethod
    def median(xs: list[float]) -> float:
        return statistics.median(xs)

    @staticmethod
    def p95(xs: list[float]) -> float:
        return sorted(xs)[int(0.95 * (len(xs) - 1))]


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def baseline_ranker(rev: str) -> Any:
    """``FullTextRanker`` of ``vfs/search/lexical.py`` at git revision ``rev`` (it imports nothing of memagent;
    before vfs/ had sub-packages it was ``vfs/ranking.py``)."""
    root = Path(__file__).resolve().parent.parent
    for path in ("vfs/search/lexical.py", "vfs/ranking.py"):
        shown = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=root, capture_output=True, text=True)
        if shown.returncode == 0:
            break
    shown.check_returncode()
    module = types.ModuleType(f"ranking_at_{rev}")
    sys.modules[module.__name__] = module  # dataclasses look their module up while the class is built
    exec(compile(shown.stdout, f"{rev}:{path}", "exec"), module.__dict__)
    return module.FullTextRanker()


def measure(backend: str, url: str, size: int, reps: int, baseline: Any | None) -> list[Row]:
    corpus = generate(size)
    rows = {name: Row(backend, name) for name in QUERIES}
    with open_store(url) as store:
        store.create_agent("bench")
        store.bulk_write(scope_name("agent", "bench"), corpus.files)
        view = AgentView(store, "bench")
        current = store._ranker  # the store's own ranker; swapped with the baseline's below
        rankers = [("current", current)] + ([("baseline", baseline)] if baseline is not None else [])
        for _, ranker in rankers:
            store._ranker = ranker
            for q in QUERIES.values():
                view.search(q)  # warm caches
        for name, q in QUERIES.items():
            if baseline is not None:
                tops = []
                for _, ranker in rankers:
                    store._ranker = ranker
                    tops.append([h.path for h in view.search(q, k=10)])
                rows[name].same_top = tops[0] == tops[1]
        for _ in range(reps):
            for name, q in QUERIES.items():
                for which, ranker in rankers:
                    store._ranker = ranker
                    ms = _timed(lambda q=q: view.search(q, k=10))
                    (rows[name].samples if which == "current" else rows[name].baseline).append(ms)
        store._ranker = current
        write = Row(backend, WRITE)
        write.samples = [_timed(lambda i=i: view.write(f"/bench/w{i}.md", f"write {i} {COMMON}\n"))
                         for i in range(reps)]
    return [*rows.values(), write]


def table(rows: list[Row], args: argparse.Namespace, load: tuple[str, str]) -> str:
    base = f" --baseline {args.baseline}" if args.baseline else ""
    pg_flag = " --pg URL" if args.pg else ""
    lines = [
        f"Generated by `python -m bench.search_memory --size {args.size} --reps {args.reps}{pg_flag}{base}`: "
        f"{args.size:,} files, {args.reps} interleaved runs per query and ranker after one warm-up, "
        f"Postgres as a fresh import leaves it (no ANALYZE); load average {load[0]} at the start, "
        f"{load[1]} at the end; {os.cpu_count()} logical cores. Milliseconds. Goal (issue 13): "
        f"every query under {GOAL_MS:g} ms (median).",
        "",
    ]
    if args.baseline:
        lines += ["| backend | query | median | p95 | baseline median | baseline p95 | top 10 = baseline's "
                  "| goal < 20 ms |", "|---|---|---|---|---|---|---|---|"]
    else:
        lines += ["| backend | query | median | p95 | goal < 20 ms |", "|---|---|---|---|---|"]
    for r in rows:
        med, p95 = r.median(r.samples), r.p95(r.samples)
        met = "n/a" if r.label == WRITE else ("met" if med < GOAL_MS else "**not met**")
        cells = [r.backend, r.label, f"{med:.2f}", f"{p95:.2f}"]
        if args.baseline:
            same = "" if r.same_top is None else ("yes" if r.same_top else "no")
            cells += [f"{r.median(r.baseline):.2f}" if r.baseline else "",
                      f"{r.p95(r.baseline):.2f}" if r.baseline else "", same]
        lines.append("| " + " | ".join(cells + [met]) + " |")
    return "\n".join(lines) + "\n"


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.search_memory")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--pg", default=os.environ.get("MEMAGENT_BENCH_PG_URL"))
    parser.add_argument("--baseline", metavar="REV", help="also rank with vfs/search/lexical.py at this git revision")
    parser.add_argument("--out", default="-", help="file whose search_memory section to replace ('-': print only)")
    args = parser.parse_args(argv)
    baseline = baseline_ranker(args.baseline) if args.baseline else None
    backends: list[tuple[str, str]] = []
    start_load = _load()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        backends.append(("sqlite", f"sqlite:///{Path(tmp) / 'bench.db'}"))
        if args.pg:
            backends.append(("postgres", stack.enter_context(pg.database(args.pg, "bench_"))))
        for backend, url in backends:
            rows += measure(backend, url, args.size, args.reps, baseline)
    section = table(rows, args, (start_load, _load()))
    print(section)
    if args.out != "-":
        sections.write(args.out, "search_memory", f"## search_memory (10,000 files)\n\n{section}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
