"""The results contract: JSONL lines, the table people read, and ``compare``.

A results file holds, per scenario run, one object per check::

    {"type": "check", "scenario", "run", "check", "label", "where", "line", "passed": bool, "detail",
     ["answer", "memory_diff"] (failures only), "mode"}

then one summary object::

    {"type": "summary", "scenario", "run", "passed", "total", "tokens", "cost_usd", "seconds",
     "requests", "error", "mode"}

``mode`` is ``memory`` or ``no-memory`` (the control: ``memagent eval --no-memory``); a
line without it (an earlier version's) ran with memory.

Invariants:
- Every line is one JSON object with ``scenario``, and ``passed`` (a bool on checks,
  a count on summaries) so a reader can tell them apart by ``type``.
- ``load`` reads a file written by any earlier version that kept these keys; a line
  that is not such an object is a ``ResultsError`` naming file and line.
- Nothing here prints: rendering returns lines; the CLI escapes and echoes them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from memagent.agent.evals.harness import ScenarioResult


class ResultsError(Exception):
    """A results file that cannot be read: ``FILE:LINE: what is wrong``."""


def lines(result: ScenarioResult) -> Iterator[dict[str, Any]]:
    """The JSONL objects of one scenario run: its checks, then its summary."""
    for c in result.checks:
        obj: dict[str, Any] = {"type": "check", "scenario": c.scenario, "run": result.run, "check": c.check,
                               "label": c.label, "where": c.where, "line": c.line, "passed": c.passed,
                               "detail": c.detail}
        if c.score is not None:
            obj["score"] = round(c.score, 4)
        if not c.passed:
            obj["answer"] = c.answer
            obj["memory_diff"] = c.memory_diff
        obj["mode"] = result.mode
        yield obj
    yield {"type": "summary", "scenario": result.scenario, "run": result.run, "passed": result.passed,
           "total": result.total, "tokens": result.tokens, "cost_usd": result.cost_usd,
           "seconds": round(result.seconds, 3), "requests": result.requests, "error": result.error,
           "mode": result.mode}


def write(out: IO[str], result: ScenarioResult) -> None:
    for obj in lines(result):
        out.write(json.dumps(obj, ensure_ascii=False) + "\n")
    out.flush()


def _cost(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def table(results: Iterable[ScenarioResult]) -> list[str]:
    """The table: scenario, checks passed / total, tokens, cost, time; a total line; under a
    control run (memory withheld) a last line saying so."""
    rows = list(results)
    width = max([len("scenario"), *(len(r.scenario) + (len(f" #{r.run}") if r.run > 1 else 0) for r in rows)])
    out = [f"{'scenario':<{width}}  {'checks':>7}  {'tokens':>9}  {'cost':>9}  {'time':>7}"]
    for r in rows:
        name = r.scenario + (f" #{r.run}" if r.run > 1 else "")
        mark = "" if r.passed == r.total and r.error is None else "  FAIL"
        out.append(f"{name:<{width}}  {f'{r.passed}/{r.total}':>7}  {r.tokens:>9,}  {_cost(r.cost_usd):>9}  "
                   f"{r.seconds:>6.1f}s{mark}")
    passed, total = sum(r.passed for r in rows), sum(r.total for r in rows)
    costs = [r.cost_usd for r in rows]
    cost = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
    out.append(f"{'total':<{width}}  {f'{passed}/{total}':>7}  {sum(r.tokens for r in rows):>9,}  "
               f"{_cost(cost):>9}  {sum(r.seconds for r in rows):>6.1f}s")
    if any(not r.memory for r in rows):
        out.append("mode: no-memory (the control: no memory tools, no memory in the prompt)")
    return out


def metrics(results: Iterable[ScenarioResult]) -> list[str]:
    """A benchmark's score per metric over its questions: passed of all, and the mean value
    where the metric has one (``recall@5: 3/4 passed, mean 0.88``). Order as first seen."""
    passed: dict[str, list[bool]] = {}
    values: dict[str, list[float]] = {}
    for r in results:
        for c in r.checks:
            passed.setdefault(c.check, []).append(c.passed)
            if c.score is not None:
                values.setdefault(c.check, []).append(c.score)
    out: list[str] = []
    for name, seen in passed.items():
        mean = f", mean {sum(values[name]) / len(values[name]):.2f}" if values.get(name) else ""
        out.append(f"{name}: {sum(seen)}/{len(seen)} passed{mean}")
    return out


def failures(results: Iterable[ScenarioResult]) -> list[str]:
    """One line per failed check (and per scenario error)."""
    out: list[str] = []
    for r in results:
        if r.error is not None:
            out.append(f"{r.scenario}: {r.error}")
        out += [f"{c.scenario} ({c.where}): {c.label}: {c.detail}" for c in r.checks if not c.passed]
    return out


@dataclass
class Summary:
    scenario: str
    passed: int
    total: int
    tokens: int
    seconds: float
    runs: int
    failed_checks: frozenset[str]
    mode: str = "memory"  # "no-memory": a control run (--no-memory)


def load(path: Path) -> dict[str, Summary]:
    """A results file's scenarios (runs added up), by name."""
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ResultsError(f"{path}: cannot read it: {err}") from None
    found: dict[str, Summary] = {}
    failed: dict[str, set[str]] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as err:
            raise ResultsError(f"{path}:{n}: not a JSON line ({err.msg}); "
                               "give a file `memagent eval --out` wrote") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("scenario"), str) or "passed" not in obj:
            raise ResultsError(f"{path}:{n}: not a results line (no scenario and passed); "
                               "give a file `memagent eval --out` wrote")
        name = obj["scenario"]
        if obj.get("type") == "summary":
            s = found.get(name)
            found[name] = Summary(name, (s.passed if s else 0) + int(obj["passed"]),
                                  (s.total if s else 0) + int(obj.get("total", 0)),
                                  (s.tokens if s else 0) + int(obj.get("tokens", 0)),
                                  (s.seconds if s else 0.0) + float(obj.get("seconds", 0.0)),
                                  (s.runs if s else 0) + 1, frozenset(),
                                  "no-memory" if obj.get("mode") == "no-memory" else "memory")
        elif obj.get("passed") is False:
            failed.setdefault(name, set()).add(str(obj.get("label") or obj.get("check")))
    if not found:
        raise ResultsError(f"{path}: no scenario summaries in it; give a file `memagent eval --out` wrote")
    for name, s in found.items():
        s.failed_checks = frozenset(failed.get(name, set()))
    return found


def _cell(s: Summary | None) -> str:
    return "-" if s is None else f"{s.passed}/{s.total}"


@dataclass(frozen=True)
class Comparison:
    """``compare``'s answer: the lines to print, how many scenarios differ, how many got worse."""

    lines: list[str]
    differ: int
    worse: int


def compare(a: dict[str, Summary], b: dict[str, Summary], a_name: str, b_name: str) -> Comparison:
    """Side-by-side lines per scenario ("-" where a file lacks it), totals over the scenarios
    both files ran, and how many differ in checks passed and how many got worse."""
    names = sorted(set(a) | set(b))
    # A control run's column says so: the difference between the two is what memory adds.
    a_name += " (no memory)" if any(s.mode == "no-memory" for s in a.values()) else ""
    b_name += " (no memory)" if any(s.mode == "no-memory" for s in b.values()) else ""
    width = max([len("scenario"), *(len(n) for n in names)])
    wa, wb = max(len(a_name), 7), max(len(b_name), 7)
    out = [f"{'scenario':<{width}}  {a_name:>{wa}}  {b_name:>{wb}}  {'tokens a run':>15}  change"]
    differ = worse = 0
    for name in names:
        sa, sb = a.get(name), b.get(name)
        change = ""
        if sa is None or sb is None:
            change = "only in " + (b_name if sa is None else a_name)
        else:
            ra = sa.passed / sa.total if sa.total else 0.0
            rb = sb.passed / sb.total if sb.total else 0.0
            if rb > ra:
                change = "better"
            elif rb < ra:
                change = "worse"
                worse += 1
            newly = sorted(sb.failed_checks - sa.failed_checks)
            fixed = sorted(sa.failed_checks - sb.failed_checks)
            if newly:
                change += f"; now failing: {', '.join(newly[:3])}"
            if fixed:
                change += f"; now passing: {', '.join(fixed[:3])}"
        if change:
            differ += 1
        if sa is not None and sb is not None and sa.runs != sb.runs:
            # Checks add up over runs (the ratio compares); the reader should know the counts differ.
            change += f"; runs {sa.runs} -> {sb.runs}"
        # A run's mean, so files with different --runs compare.
        tokens = f"{_tokens(sa)} -> {_tokens(sb)}"
        out.append(f"{name:<{width}}  {_cell(sa):>{wa}}  {_cell(sb):>{wb}}  {tokens:>15}  {change.lstrip('; ')}")
    # Totals over what both ran: a scenario in one file only would make the sums compare
    # different sets.
    shared = sorted(set(a) & set(b))
    ta = sum(a[n].passed for n in shared), sum(a[n].total for n in shared)
    tb = sum(b[n].passed for n in shared), sum(b[n].total for n in shared)
    alone = len(names) - len(shared)
    note = f"  ({len(shared)} scenario(s) in both files; {alone} in one only, left out)" if alone else ""
    out.append(f"{'total':<{width}}  {f'{ta[0]}/{ta[1]}':>{wa}}  {f'{tb[0]}/{tb[1]}':>{wb}}{note}")
    return Comparison(out, differ, worse)


def _tokens(s: Summary | None) -> str:
    """A run's mean tokens (files with different --runs compare), "-" where the file lacks it."""
    return "-" if s is None else f"{s.tokens // s.runs:,}"
