"""Many sessions on one Postgres at once: ``python -m bench concurrency``.

``--procs`` OS processes (default 50), each a memagent session: its own store
(``open_store``: its own engine and connection pool) and, per agent it uses, the real
tool layer (``ToolBox`` over ``MemoryTools`` with a yolo ``Gate`` and ``SearchTools``),
making tool calls for ``--seconds`` (or ``--ops`` calls each, as the test does):
``read_file``, ``ls``, ``glob``, ``grep``, ``search_memory`` (lexical) and the two
writes, ``edit_file`` and ``write_file``, each preceded by the ``read_file`` whose
version it carries (``expected_version``), as the one write entrance wants. About a
third of the calls go to a few agents every process shares, the rest to the
process's own agent. The run goes directly to the server and, with
``--via-pgbouncer``, again through a PgBouncer in transaction pooling mode.

What it reports, per run: throughput (calls per second over the whole run, every
process together) and p50/p99 latency per call kind; writes acknowledged, refused
as conflicts and errors; and the verification below.

Invariants:
- Every process starts behind one barrier: the parent seeds the database, starts
  the processes, waits until each has opened its store and says so, then sets one
  event; no process calls a tool before it.
- A write refused because the file changed since its read (another process wrote
  first) is a conflict, an expected outcome on a shared agent and counted apart. On
  a process's own agent nobody else writes, so a conflict there is an error, as is
  any other refusal, exception or crash.
- Every acknowledged write is logged by its process with the version the tool
  answered and a token unique to that write, which its content carries. Afterwards
  the revisions table must hold exactly the acknowledged writes (plus the seed):
  each once, at its version, with its token in its content (nothing lost or
  overwritten), no version acknowledged twice (nothing duplicated), no revision
  nobody acknowledged, and every file's versions 1..n without gaps with ``n`` its
  current version. The check reads the server directly, never through the pooler.
- Each run gets a fresh database on the server, dropped afterwards; with
  ``--via-pgbouncer`` the bouncer must route that database name (a ``*`` entry in its
  ``[databases]``, as ``scripts/pgbouncer-throwaway`` writes).
- Latencies are wall times of single tool calls in a process sharing two cores with
  the others: they measure contention, not a call's own cost (``python -m bench``
  has those). Not a test: ``tests/test_concurrency.py`` runs the same harness small
  and asserts only the verification.
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import os
import platform
import queue
import random
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from bench import pg, sections

RESULTS = Path(__file__).with_name("RESULTS.md")
SECTION = "concurrency"

KINDS = ("read_file", "ls", "glob", "grep", "search_memory", "edit_file", "write_file")
# How often each call is chosen (the read before a write is a read_file of its own).
WEIGHTS = (30, 8, 5, 15, 10, 22, 10)
WRITES = frozenset({"edit_file", "write_file"})
SHARED_SHARE = 0.35  # of the calls, on a shared agent
NEW_FILE_SHARE = 0.25  # of write_file calls on the own agent: a new file (expected_version 0)
# What a refusal for a file that moved on since it was read says (tools/memory.py's
# version check, vfs/files/revisions.py's commit); the model is told the same.
CONFLICT_MARKS = ("changed since you read it", "already exists (version", "was created by someone else")
WORDS = ("meeting", "notes", "action", "budget", "roadmap", "customer", "release", "review", "deploy",
         "incident", "summary", "priority", "design", "schema", "latency", "backlog", "sprint", "retro",
         "invoice", "contract", "onboarding", "migration", "postgres", "pooler", "session", "memory")
SEED = "seed"  # the token of the seed's acknowledgements (created with the agent, at version 1)
READY_TIMEOUT = 600.0  # seconds for every process to start and open its store


def own_agent(index: int) -> str:
    return f"proc-{index}"


def shared_agent(index: int) -> str:
    return f"shared-{index}"


def header(path: str) -> str:
    """A file's first line: unique in it, so an edit inserting below it always applies."""
    return f"# {path}\n"


def body(rng: random.Random, token: str, lines: int = 6) -> str:
    out = [f"written by {token}"]
    for _ in range(lines):
        out.append(" ".join(rng.choice(WORDS) for _ in range(8)))
    return "\n".join(out) + "\n"


def seed_paths(files: int) -> list[str]:
    """The files every agent starts with (the same paths in each)."""
    return [f"/notes/n{k}.md" for k in range(files)]


def seed_files(agent: str, files: int, seed: int) -> dict[str, str]:
    rng = random.Random(f"{seed}:{agent}")
    return {path: header(path) + body(rng, f"seed:{agent}") for path in seed_paths(files)}


@dataclass(frozen=True)
class Plan:
    """What every process is told."""

    url: str  # the workers' database URL (direct or through the bouncer)
    procs: int
    seconds: float | None  # run for this long, or
    ops: int | None  # make this many calls each
    shared: int
    files: int
    seed: int


@dataclass
class Outcome:
    """One process's record, written as JSON for the parent."""

    index: int
    started: float = 0.0  # time.monotonic(): system-wide on Linux, comparable across processes
    ended: float = 0.0
    latencies: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    conflicts: dict[str, int] = field(default_factory=lambda: {k: 0 for k in WRITES})
    acks: list[tuple[str, str, int, str]] = field(default_factory=list)  # agent, path, version, token
    errors: list[str] = field(default_factory=list)


# -- one process -------------------------------------------------------------------


class _Session:
    """The tool layer over one agent, as a chat session builds it (file tools, search)."""

    def __init__(self, store: Any, agent: str, paths: list[str]) -> None:
        from memagent.agent.gate import Gate
        from memagent.agent.tools.memory import MemoryTools
        from memagent.agent.tools.search import SearchTools
        from memagent.agent.tools.toolbox import ToolBox
        from memagent.vfs.scopes import AgentView

        view = AgentView(store, agent)
        self.agent = agent
        self.paths = paths
        self.box = ToolBox([MemoryTools(view, Gate(yolo=True)), SearchTools(view)])


def worker(index: int, plan: Plan, ready: Any, go: Any, out: str) -> None:
    """One session: open the store, say so, wait for ``go``, call tools, write the record."""
    outcome = Outcome(index)
    store = None
    try:
        from memagent.vfs import open_store

        store = open_store(plan.url)
        own = _Session(store, own_agent(index), seed_paths(plan.files))
        shared = [_Session(store, shared_agent(k), seed_paths(plan.files)) for k in range(plan.shared)]
        rng = random.Random(f"{plan.seed}:{index}")
        ready.put(index)
        if not go.wait(READY_TIMEOUT):
            raise RuntimeError("the start signal never came")
        outcome.started = time.monotonic()
        deadline = outcome.started + plan.seconds if plan.seconds is not None else None
        n = 0
        while (deadline is None and n < (plan.ops or 0)) or (deadline is not None and time.monotonic() < deadline):
            n += 1
            kind = rng.choices(KINDS, WEIGHTS)[0]
            on_shared = bool(shared) and rng.random() < SHARED_SHARE
            session = rng.choice(shared) if on_shared else own
            # Bracketed, so that no token is a part of another ([p1-1] is not in [p1-12]).
            _one_call(outcome, session, kind, on_shared, rng, f"[p{index}-{n}]")
        outcome.ended = time.monotonic()
    except BaseException as exc:  # noqa: BLE001 (any failure is the run's finding, reported, not raised)
        outcome.errors.append(f"process {index} crashed: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        outcome.ended = outcome.ended or time.monotonic()
    finally:
        if store is not None:
            try:
                store.close()
            except Exception as exc:  # noqa: BLE001
                outcome.errors.append(f"process {index}: close failed: {type(exc).__name__}: {exc}")
        Path(out).write_text(json.dumps(outcome.__dict__), "utf-8")


def _call(outcome: Outcome, session: _Session, kind: str, args: dict[str, Any]) -> Any:
    t = time.perf_counter()
    result = session.box.run(kind, args)
    outcome.latencies[kind].append(time.perf_counter() - t)
    return result


def _one_call(outcome: Outcome, session: _Session, kind: str, on_shared: bool, rng: random.Random,
              token: str) -> None:
    where = session.agent
    if kind == "read_file":
        args: dict[str, Any] = {"file_path": rng.choice(session.paths)}
    elif kind == "ls":
        args = {"path": rng.choice(["/", "/notes/"])}
    elif kind == "glob":
        args = {"pattern": rng.choice(["**/*.md", "/notes/n1*.md"])}
    elif kind == "grep":
        args = rng.choice([{"pattern": rng.choice(WORDS), "fixed_strings": True},
                           {"pattern": r"written by \[p\d+-\d+\]", "output_mode": "count"},
                           {"pattern": rng.choice(WORDS), "output_mode": "content", "path": "/notes/"}])
    elif kind == "search_memory":
        args = {"query": f"{rng.choice(WORDS)} {rng.choice(WORDS)}", "mode": "lexical", "k": 5}
    else:
        _write(outcome, session, kind, on_shared, rng, token)
        return
    result = _call(outcome, session, kind, args)
    if result.is_error:
        outcome.errors.append(f"{kind} {args} on {where}: {result.content}")


def _write(outcome: Outcome, session: _Session, kind: str, on_shared: bool, rng: random.Random,
           token: str) -> None:
    """Read, then write over the version read (a new file: expected_version 0)."""
    if kind == "write_file" and not on_shared and rng.random() < NEW_FILE_SHARE:
        path, version = f"/notes/new-{token}.md", 0
    else:
        path = rng.choice(session.paths)
        read = _call(outcome, session, "read_file", {"file_path": path})
        if read.is_error:
            outcome.errors.append(f"read_file {path} on {session.agent}: {read.content}")
            return
        version = int(read.data["version"])
    if kind == "edit_file":
        args: dict[str, Any] = {"file_path": path, "old_string": header(path),
                                "new_string": header(path) + f"- entry {token}: {rng.choice(WORDS)}\n"}
    else:
        args = {"file_path": path, "content": header(path) + body(rng, token, lines=rng.randint(2, 8))}
    args["expected_version"] = version
    result = _call(outcome, session, kind, args)
    if not result.is_error:
        if result.data is None or result.data.get("path") != path:
            outcome.errors.append(f"{kind} {path} on {session.agent} answered no version: {result.content}")
            return
        outcome.acks.append((session.agent, path, int(result.data["version"]), token))
        if version == 0:
            session.paths.append(path)
    elif on_shared and any(mark in result.content for mark in CONFLICT_MARKS):
        outcome.conflicts[kind] += 1
    else:
        outcome.errors.append(f"{kind} {path} at version {version} on {session.agent}: {result.content}")


# -- the parent ----------------------------------------------------------------------


@dataclass
class Run:
    """Every process's outcome together, and the verification's findings."""

    label: str
    procs: int
    wall: float
    outcomes: list[Outcome]
    problems: list[str]  # the verification's findings (lost, duplicated, unacknowledged, gaps)
    revisions: int

    @property
    def errors(self) -> list[str]:
        return [e for o in self.outcomes for e in o.errors]

    @property
    def calls(self) -> int:
        return sum(len(v) for o in self.outcomes for v in o.latencies.values())

    def latencies(self, kind: str) -> list[float]:
        return sorted(x for o in self.outcomes for x in o.latencies[kind])

    def conflicts(self, kind: str) -> int:
        return sum(o.conflicts.get(kind, 0) for o in self.outcomes)

    @property
    def acks(self) -> int:
        return sum(len(o.acks) for o in self.outcomes)


@contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    """A new empty database on ``admin_url``'s server (its URL), dropped afterwards."""
    with pg.database(admin_url, "memagent_conc_") as url:
        yield url


def same_database(url: str, database_url: str) -> str:
    """``url`` (a bouncer's) pointed at ``database_url``'s database."""
    name = make_url(database_url).database
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def seed(url: str, procs: int, shared: int, files: int, seed_: int) -> list[tuple[str, str, int, str]]:
    """Create every agent with its files; the seed's revisions, as acknowledgements."""
    from memagent.vfs import open_store

    acks = []
    with open_store(url) as store:
        for agent in [own_agent(i) for i in range(procs)] + [shared_agent(k) for k in range(shared)]:
            content = seed_files(agent, files, seed_)
            store.create_agent(agent, content)
            acks += [(agent, path, 1, SEED) for path in content]
    return acks


def verify(url: str, agents: list[str], acks: list[tuple[str, str, int, str]]) -> tuple[list[str], int]:
    """What is wrong between the acknowledged writes and the revisions table (nothing: [])
    and how many revisions the agents' files hold."""
    from memagent.vfs.paths import scope_name

    scopes = {scope_name("agent", a): a for a in agents}
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT f.scope, f.path, f.version AS head, r.version, r.content FROM revisions r "
                "JOIN files f ON f.id = r.file_id WHERE f.scope = ANY(:scopes)"), {"scopes": list(scopes)}).all()
    finally:
        engine.dispose()
    problems: list[str] = []
    stored: dict[tuple[str, str, int], str | None] = {}
    heads: dict[tuple[str, str], int] = {}
    for row in rows:
        key = (scopes[row.scope], str(row.path), int(row.version))
        if key in stored:  # the unique key (file, version) forbids it; checked anyway
            problems.append(f"duplicated: {key[0]}:{key[1]} version {key[2]} stored twice")
        stored[key] = row.content
        heads[key[:2]] = int(row.head)
    told: dict[tuple[str, str, int], str] = {}
    for agent, path, version, token in acks:
        key = (agent, path, version)
        if key in told:
            problems.append(f"duplicated: {agent}:{path} version {version} acknowledged to {told[key]} and {token}")
            continue
        told[key] = token
        if key not in stored:
            problems.append(f"lost: {agent}:{path} version {version} ({token}) acknowledged but not stored")
        elif token == SEED:
            continue
        elif token not in (stored[key] or ""):
            problems.append(f"lost: {agent}:{path} version {version} holds another write than {token}'s")
    for key in stored.keys() - told.keys():
        problems.append(f"unacknowledged: {key[0]}:{key[1]} version {key[2]} stored but nobody was told")
    versions: dict[tuple[str, str], list[int]] = {}
    for agent, path, version in stored:
        versions.setdefault((agent, path), []).append(version)
    for file, vs in versions.items():
        if sorted(vs) != list(range(1, len(vs) + 1)):
            problems.append(f"gap: {file[0]}:{file[1]} has versions {sorted(vs)}")
        if heads[file] != len(vs):
            problems.append(f"head: {file[0]}:{file[1]} is at version {heads[file]} with {len(vs)} revisions")
    return problems, len(rows)


def run(label: str, db_url: str, worker_url: str, *, procs: int, seconds: float | None = None,
        ops: int | None = None, shared: int = 3, files: int = 10, seed_: int = 1234) -> Run:
    """Seed ``db_url``, run ``procs`` sessions against ``worker_url`` (the same database,
    directly or through a pooler), verify against ``db_url``."""
    acks = seed(db_url, procs, shared, files, seed_)
    plan = Plan(worker_url, procs, seconds, ops, shared, files, seed_)
    ctx = multiprocessing.get_context("spawn")  # nothing of the parent's engine or threads in a child
    ready, go = ctx.Queue(), ctx.Event()
    with tempfile.TemporaryDirectory(prefix="memagent-conc-") as tmp:
        outs = [str(Path(tmp) / f"{i}.json") for i in range(procs)]
        workers = [ctx.Process(target=worker, args=(i, plan, ready, go, outs[i]), daemon=True)
                   for i in range(procs)]
        for w in workers:
            w.start()
        try:
            _await_ready(workers, ready)
        finally:
            go.set()  # also on failure, so no process waits for its full timeout
        for w in workers:
            w.join()
        outcomes = []
        for i, w in enumerate(workers):
            try:
                data = json.loads(Path(outs[i]).read_text("utf-8"))
            except (OSError, ValueError):
                outcomes.append(Outcome(i, errors=[f"process {i} exited {w.exitcode} without a record"]))
                continue
            outcome = Outcome(i, started=data["started"], ended=data["ended"], latencies=data["latencies"],
                              conflicts=data["conflicts"], acks=[(a, p, int(v), t) for a, p, v, t in data["acks"]],
                              errors=data["errors"])
            if w.exitcode != 0:
                outcome.errors.append(f"process {i} exited {w.exitcode}")
            outcomes.append(outcome)
    started = [o.started for o in outcomes if o.started]
    ended = [o.ended for o in outcomes if o.ended]
    wall = (max(ended) - min(started)) if started and ended else 0.0
    agents = [own_agent(i) for i in range(procs)] + [shared_agent(k) for k in range(shared)]
    problems, revisions = verify(db_url, agents, acks + [a for o in outcomes for a in o.acks])
    return Run(label, procs, wall, outcomes, problems, revisions)


def _await_ready(workers: list[Any], ready: Any) -> None:
    """Until every process has said it is ready; a process that died first stops the wait."""
    waiting = set(range(len(workers)))
    deadline = time.monotonic() + READY_TIMEOUT
    while waiting:
        try:
            waiting.discard(ready.get(timeout=1.0))
        except queue.Empty:
            dead = [i for i in waiting if not workers[i].is_alive()]
            if dead:
                raise RuntimeError(f"process {dead[0]} exited before the start") from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(waiting)} processes not ready after {READY_TIMEOUT:.0f} s") from None


# -- the report ----------------------------------------------------------------------


def _pct(xs: list[float], p: float) -> float:
    return xs[min(len(xs) - 1, max(0, round(p * (len(xs) - 1))))]


def table(r: Run) -> str:
    lines = [f"**{r.label}**: {r.procs} processes, {r.wall:.1f} s, {r.calls:,} calls, "
             f"{r.calls / r.wall if r.wall else 0:,.0f} calls/s",
             "", "| call | calls | calls/s | p50 ms | p99 ms | conflicts |", "|---|---:|---:|---:|---:|---:|"]
    for kind in KINDS:
        xs = r.latencies(kind)
        if not xs:
            lines.append(f"| {kind} | 0 | | | | |")
            continue
        conflicts = str(r.conflicts(kind)) if kind in WRITES else ""
        lines.append(f"| {kind} | {len(xs):,} | {len(xs) / r.wall if r.wall else 0:,.1f} | "
                     f"{_pct(xs, 0.5) * 1000:.1f} | {_pct(xs, 0.99) * 1000:.1f} | {conflicts} |")
    lines += ["", f"Writes acknowledged: {r.acks:,}; refused as conflicts (a shared file written first by "
                  f"another process): {sum(r.conflicts(k) for k in WRITES):,}; errors: {len(r.errors)}. "
                  f"Revisions checked: {r.revisions:,}; lost, duplicated or unacknowledged: "
                  f"{len(r.problems)}."]
    for e in r.errors[:5]:
        lines.append(f"- error: {e.splitlines()[0]}")
    for p in r.problems[:5]:
        lines.append(f"- {p}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench concurrency", description=__doc__.split("\n")[0])
    ap.add_argument("--pg", "--pg-url", dest="pg", default=os.environ.get("MEMAGENT_BENCH_PG_URL"),
                    help="a Postgres server (superuser URL: a database is created and dropped there)")
    ap.add_argument("--via-pgbouncer", default="",
                    help="also run through this PgBouncer (transaction pooling; its [databases] must route any name)")
    ap.add_argument("--procs", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--shared", type=int, default=3, help="agents every process uses (default 3)")
    ap.add_argument("--files", type=int, default=10, help="files per agent at the start (default 10)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", default=str(RESULTS), help="file whose concurrency section to replace; - prints only")
    args = ap.parse_args(argv)
    if not args.pg:
        print("python -m bench concurrency: give --pg URL (or MEMAGENT_BENCH_PG_URL)", file=sys.stderr)
        return 2
    if args.procs < 1 or args.seconds <= 0 or args.shared < 0 or args.files < 1:
        print("python -m bench concurrency: --procs, --seconds and --files must be positive, --shared >= 0",
              file=sys.stderr)
        return 2
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    routes = [("directly", "")] + ([("through PgBouncer (transaction pooling)", args.via_pgbouncer)]
                                   if args.via_pgbouncer else [])
    runs = []
    for label, bouncer in routes:
        with fresh_database(args.pg) as db:
            worker_url = same_database(bouncer, db) if bouncer else db
            r = run(label, db, worker_url, procs=args.procs, seconds=args.seconds, shared=args.shared,
                    files=args.files, seed_=args.seed)
        print(table(r), flush=True)
        runs.append(r)
    cmd = "python -m bench concurrency --pg URL" + (" --via-pgbouncer URL" if args.via_pgbouncer else "") + \
        f" --procs {args.procs} --seconds {args.seconds:g}"
    body_ = [f"## Concurrency: {args.procs} sessions on one Postgres", "",
             f"`{cmd}` (`bench/concurrency.py`), {when}, on {os.cpu_count()} logical cores "
             f"({platform.machine()}, Python {platform.python_version()}); load average before the processes "
             f"started {load} (other work on the machine), at the end (with them) "
             + " ".join(f"{x:.2f}" for x in os.getloadavg()) + ". Each process is a session calling the real "
             f"tool layer on its own agent and on {args.shared} shared agents ({args.files} files each at the "
             f"start; {round(SHARED_SHARE * 100)} % of the calls on a shared agent); every write is a "
             "read_file then the write at the version read. Conflicts are writes refused because another "
             "process wrote the file first (expected on shared files, never stored); the verification compares "
             "every acknowledged write with the revisions table.", ""]
    for r in runs:
        body_.append(table(r))
    body = "\n".join(body_)
    if args.out != "-":
        sections.write(args.out, SECTION, body)
    bad = any(r.errors or r.problems for r in runs)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
