"""``python -m bench eval``: what ``memagent eval`` itself costs per scenario, model time excluded.

Every built-in scenario runs ``--reps`` times with the scripted instant model that
uses memory (``bench.eval_oracle.OracleModel``), exactly as ``memagent eval`` runs
it (``evals.harness.run_scenario``: a new temporary SQLite database, the agent and
its seed, the sessions through the chat's own code, the checks). The model's own
time (the oracle deciding) is measured around each call and taken out, so what is
left is the harness: database set-up, seeding, the agent loop, the tools, memory
writes and the checks. The baseline, measured in the same run and in the same way,
is opening one new empty database (``open_store`` on a new SQLite file: the schema
migrations), the floor of any scenario; the table gives each scenario's overhead as
a multiple of it. With ``--out`` (default ``bench/RESULTS.md``) it replaces the
"eval_overhead" section.

Invariants: every scenario must pass every check (a benchmark of a broken run is
not written); scenarios and the baseline are interleaved round by round so both
see the same machine load.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench import sections
from bench.eval_oracle import OracleModel
from memagent.agent.cli import templates
from memagent.agent.evals.harness import run_scenario
from memagent.agent.evals.scenario import Scenario, builtin
from memagent.agent.model import ModelRequest, ModelResponse
from memagent.agent.model.base import TextCallback
from memagent.vfs import open_store

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


class Timed(OracleModel):
    """The oracle, with the time spent deciding summed in ``spent``."""

    def __init__(self) -> None:
        super().__init__()
        self.spent = 0.0

    def respond(self, request: ModelRequest, *, on_text: TextCallback | None = None,
                on_retry: TextCallback | None = None) -> ModelResponse:
        started = time.perf_counter()
        try:
            return super().respond(request, on_text=on_text, on_retry=on_retry)
        finally:
            self.spent += time.perf_counter() - started


def fresh_database() -> float:
    """Seconds to open one new empty SQLite database (its migrations), closed and removed."""
    folder = tempfile.mkdtemp(prefix="memagent-bench-")
    try:
        started = time.perf_counter()
        store = open_store(f"sqlite:///{Path(folder) / 'x.db'}")
        elapsed = time.perf_counter() - started
        store.close()
        return elapsed
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def one(scenario: Scenario) -> tuple[float, float, int]:
    """(wall seconds, model seconds, model requests) of one run; it must pass."""
    model = Timed()
    started = time.perf_counter()
    result = run_scenario(scenario, model, templates=templates.files)
    wall = time.perf_counter() - started
    if result.error is not None or result.passed != result.total:
        failed = [c.label for c in result.checks if not c.passed]
        raise SystemExit(f"bench eval: {scenario.name} did not pass ({result.error or failed}); nothing written")
    return wall, model.spent, result.requests


def table(reps: int, pattern: str | None = None) -> str:
    scenarios = [s for s in builtin() if pattern is None or pattern in s.name]
    walls: dict[str, list[float]] = {s.name: [] for s in scenarios}
    models: dict[str, list[float]] = {s.name: [] for s in scenarios}
    requests: dict[str, int] = {}
    base: list[float] = []
    fresh_database()  # warm the imports and the migration scripts once
    for _ in range(reps):
        base.append(fresh_database())
        for s in scenarios:
            wall, spent, n = one(s)
            walls[s.name].append(wall)
            models[s.name].append(spent)
            requests[s.name] = n
    floor = statistics.median(base)
    out = [f"`python -m bench eval --reps {reps}` on {platform.python_implementation()} "
           f"{platform.python_version()} ({platform.machine()}), {len(scenarios)} built-in scenarios with the "
           "scripted instant model; medians. Overhead = wall time less the model's own time; the baseline is "
           f"opening one new empty SQLite database (schema migrations), {floor * 1000:.0f} ms in this run.",
           "", "| scenario | model requests | wall ms | model ms | overhead ms | overhead / new database |",
           "|---|---:|---:|---:|---:|---:|"]
    overheads = []
    for s in scenarios:
        wall, spent = statistics.median(walls[s.name]), statistics.median(models[s.name])
        over = wall - spent
        overheads.append(over)
        out.append(f"| {s.name} | {requests[s.name]} | {wall * 1000:.0f} | {spent * 1000:.1f} | {over * 1000:.0f} | "
                   f"{over / floor:.1f}x |")
    med = statistics.median(overheads)
    out += ["", f"Median overhead per scenario: {med * 1000:.0f} ms ({med / floor:.1f}x a new database); "
                f"the whole suite: {sum(overheads):.1f} s. The MCP scenario's share is its server's start-up."]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench eval", description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3, help="runs of each scenario (default 3)")
    ap.add_argument("-k", dest="pattern", default=None, help="only scenarios whose name contains this")
    ap.add_argument("--out", default=str(RESULTS), help="file whose eval_overhead section to replace; - prints only")
    args = ap.parse_args(argv)
    body = table(args.reps, args.pattern)
    print(body)
    if args.out != "-":
        sections.write(args.out, "eval_overhead", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
