"""The benchmark runner: ``python -m bench`` prints a Markdown table and writes RESULTS.md.

Invariants:
- Every store figure sits beside baselines measured *in the same run, interleaved*
  with it (one store call, then one ``grep -r``, one ``rg``, one pathlib glob, round
  after round), so a busy machine slows both sides alike and the ratios stay fair.
- The corpus is deterministic (``bench.corpus.generate``, fixed seed); the same
  files are written to a temporary folder for the baselines and bulk-loaded into
  a fresh database per backend, which is deleted afterwards.
- Results are checked, not just timed: each grep and glob answer is compared with
  what ``grep -r`` / pathlib found, and a disagreement is printed in the table.
- Nothing is started: Postgres is used only when ``--pg-url`` or
  ``MEMAGENT_BENCH_PG_URL`` names a server (the runner creates and drops its own
  database there); otherwise the Postgres column says why it is missing. ``rg``
  is optional and shows as n/a when it is not installed.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import platform
import pstats
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from bench import floors, pg, sections
from bench.corpus import COMMON, RARE, READ_PATH, REGEX, REGEX_NO_LITERAL, Corpus, generate
from memagent.vfs import SqlStore, open_store
from memagent.vfs.paths import scope_name

SCOPE = scope_name("agent", "bench")
UNCAPPED = 10**9  # grep -r prints every match; so does the store here
C_LOCALE = {**os.environ, "LC_ALL": "C"}

Fn = Callable[[], Any]


@dataclass
class Row:
    """One operation: its store samples per backend and its baselines' samples."""

    name: str
    store: dict[str, list[float]] = field(default_factory=dict)  # backend -> seconds
    base: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # backend -> kind -> s
    ratio_to: str | None = None  # which baseline the ratio is against
    note: str = ""
    problems: list[str] = field(default_factory=list)


@dataclass
class Target:
    label: str
    row: str
    size: int
    check: Callable[[Row, str], tuple[bool, str] | None]  # (met, figure) or None = n/a


# -- measuring -------------------------------------------------------------------


def _timed(fn: Fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def interleaved(fns: dict[str, Fn | None], reps: int) -> dict[str, list[float]]:
    """Run each function once to warm up, then ``reps`` rounds of one call each."""
    live = {k: f for k, f in fns.items() if f is not None}
    for f in live.values():
        f()
    out: dict[str, list[float]] = {k: [] for k in live}
    for _ in range(reps):
        for k, f in live.items():
            out[k].append(_timed(f))
    return out


def _med(xs: list[float]) -> float:
    return statistics.median(xs)


def _ms(xs: list[float] | None) -> str:
    if not xs:
        return "n/a"
    m = _med(xs) * 1000
    if len(xs) == 1:
        return f"{m:,.1f}"
    lo, hi = min(xs) * 1000, max(xs) * 1000
    return f"{m:,.2f} ({lo:,.2f}–{hi:,.2f})"


# -- baselines -------------------------------------------------------------------


def _run(args: list[str]) -> str:
    done = subprocess.run(args, env=C_LOCALE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          check=False)
    if done.returncode not in (0, 1):  # 1 = no match
        raise RuntimeError(f"{args[0]} failed with status {done.returncode}")
    return done.stdout.decode("utf-8", "replace")


def grep_cmd(root: Path, pattern: str, *, content: bool, fixed: bool = False,
             extended: bool = False) -> list[str]:
    flags = "-rn" if content else "-rl"
    args = ["grep", flags] + (["-F"] if fixed else []) + (["-E"] if extended else [])
    return args + ["-e", pattern, str(root)]


def rg_cmd(root: Path, pattern: str, *, content: bool, fixed: bool = False) -> list[str] | None:
    if shutil.which("rg") is None:
        return None
    args = ["rg", "--no-config", "--no-ignore", "--hidden", "-n" if content else "-l"]
    return args + (["-F"] if fixed else []) + ["-e", pattern, str(root)]


def _rel_files(out: str, root: Path) -> list[str]:
    cut = len(str(root))
    return sorted(line[cut:] for line in out.splitlines() if line)


def pathlib_glob(root: Path, pattern: str) -> list[str]:
    return sorted("/" + p.relative_to(root).as_posix() for p in root.glob(pattern) if p.is_file())


# -- databases -------------------------------------------------------------------


@contextmanager
def database(backend: str, workdir: Path, pg_url: str | None, size: int) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{workdir / f'bench-{size}.db'}"
        return
    assert pg_url is not None
    with pg.database(pg_url, f"memagent_bench_{size}_") as url:
        yield url


class TimedValidator:
    """Wraps the store's validator to report how much of a write is validation."""

    def __init__(self, inner: Callable[[str, str], Any]) -> None:
        self.inner = inner
        self.spent = 0.0

    def __call__(self, path: str, content: str) -> Any:
        t = time.perf_counter()
        try:
            return self.inner(path, content)
        finally:
            self.spent += time.perf_counter() - t


# -- one backend at one size -----------------------------------------------------


def bench_backend(rows: dict[str, Row], backend: str, store: SqlStore, corpus: Corpus, root: Path,
                  reps: int, agent_overhead: bool, turn_threads: int = 0) -> dict[str, Fn]:
    """Fill ``rows`` for ``backend``; return the store calls (for profiling misses while
    the caller keeps ``store`` open: a closed store would profile reconnecting)."""
    validator = TimedValidator(store.validator)
    store.validator = validator
    store.create_agent("bench")

    def row(name: str, ratio_to: str | None = None, note: str = "") -> Row:
        r = rows.setdefault(name, Row(name, ratio_to=ratio_to, note=note))
        return r

    t = time.perf_counter()
    with floors.statement_times(store.engine) as by_statement:
        store.bulk_write(SCOPE, corpus.files, author="import", approval="cli", message="bench")
    spent = time.perf_counter() - t
    mb = corpus.total_bytes / 1e6
    r = row("bulk load (validated, one transaction)")
    r.store[backend] = [spent]
    r.note = "; ".join(filter(None, [
        r.note or f"{len(corpus.files):,} files, {mb:.1f} MB (one run)",
        f"{backend}: validation {validator.spent:.1f} s, statements {floors.summary(dict(by_statement))}"]))
    if backend == "postgres":
        # How much of the INSERT is building the tsvector documents (English stemming).
        r.note += (f"; postgres: building the files' full-text documents alone takes "
                   f"{floors.pg_document_seconds(store.engine):.1f} s")
        # What autovacuum would have done by the time anyone searches: planner statistics.
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE files"))

    calls: dict[str, Fn] = {}

    def simple(name: str, fn: Fn, n: int = reps) -> None:
        calls[name] = fn
        row(name).store[backend] = interleaved({"store": fn}, n)["store"]

    def round_trip() -> None:
        raw = store.engine.raw_connection()
        try:
            cur = raw.cursor()
            cur.execute("SELECT 1")
            cur.fetchone()
            cur.close()
        finally:
            raw.close()

    # The floor under every call: one statement on a pooled connection, no work.
    simple("database round trip (SELECT 1)", round_trip)
    simple("ls /", lambda: store.ls(SCOPE, "/"))
    simple("ls /people (100 entries)", lambda: store.ls(SCOPE, "/people"))
    simple("read_file 4 KB", lambda: store.read(SCOPE, READ_PATH))

    # Globs against pathlib on the folder.
    for pattern in ("**/*.md", "skills/*.md"):
        name = f'glob("{pattern}")'
        def globber(p: str = pattern) -> list[str]:
            return store.glob(SCOPE, p)

        calls[name] = globber
        got = interleaved({"store": globber, "pathlib": partial(pathlib_glob, root, pattern)},
                          reps)
        r = row(name, ratio_to="pathlib")
        r.store[backend] = got["store"]
        r.base[backend] = {"pathlib": got["pathlib"]}
        if store.glob(SCOPE, pattern) != pathlib_glob(root, pattern):
            r.problems.append(f"{backend}: glob differs from pathlib")

    # Greps against grep -r and rg, uncapped so every engine prints the same lines.
    greps = [
        ("rare literal", RARE, {"fixed": True}),
        ("common word", COMMON, {}),
        (f"regex `{REGEX}`", REGEX, {"extended": True}),
        (f"regex, no literal `{REGEX_NO_LITERAL}`", REGEX_NO_LITERAL, {"extended": True}),
    ]
    for label, pattern, kind in greps:
        for mode in ("files_with_matches", "content"):
            content = mode == "content"
            name = f"grep {label}, {mode}"
            fixed = bool(kind.get("fixed"))

            def fn(p: str = pattern, m: str = mode, f: bool = fixed) -> Any:
                return store.grep(SCOPE, p, output_mode=m, fixed_strings=f, limit=UNCAPPED)

            gargs = grep_cmd(root, pattern, content=content, **kind)
            rargs = rg_cmd(root, pattern, content=content, fixed=fixed)
            calls[name] = fn
            got = interleaved({
                "store": fn,
                "grep -r": partial(_run, gargs),
                "rg": partial(_run, rargs) if rargs else None,
            }, reps)
            r = row(name, ratio_to="grep -r")
            r.store[backend] = got.pop("store")
            r.base[backend] = got
            res = fn()
            out = _run(gargs)
            if content:
                if len(res.lines) != len(out.splitlines()):
                    r.problems.append(f"{backend}: {len(res.lines)} lines, grep -r "
                                      f"{len(out.splitlines())}")
            elif res.files != _rel_files(out, root):
                r.problems.append(f"{backend}: files differ from grep -r")

    # Writes, after the searches (they add files the folder does not have): a 4 KB
    # knowledge file, overwritten / edited each round, a new revision each time.
    base_text = corpus.files[READ_PATH]
    counter = iter(range(10**9))

    def write() -> None:
        store.write(SCOPE, "/knowledge/bench-write.md", f"{base_text}round {next(counter)}\n",
                    author="agent", approval="yolo")

    edits = iter(range(10**9))
    store.write(SCOPE, "/knowledge/bench-edit.md", f"{base_text}marker-0\n")

    def edit() -> None:
        i = next(edits)
        store.edit(SCOPE, "/knowledge/bench-edit.md", f"marker-{i}\n", f"marker-{i + 1}\n",
                   author="agent", approval="yolo")

    write_reps = max(reps * 3, 20)
    for name, op in (("write_file 4 KB (validated, revision)", write),
                     ("edit_file 4 KB (validated, revision)", edit)):
        validator.spent = 0.0
        samples = interleaved({"store": op}, write_reps)["store"]
        calls[name] = op
        r = row(name)
        r.store[backend] = samples
        r.note = f"validation ≈ {validator.spent / (write_reps + 1) * 1000:.2f} ms of each"

    if agent_overhead or turn_threads:
        name = "agent turn overhead (1 tool call)"
        note = ""
        if turn_threads:
            from bench.context import store_threads

            load = store_threads(store, "bench", turn_threads)
            name = f"agent turn overhead (1 tool call), {turn_threads:,} threads stored"
            note = f"; {turn_threads:,} threads of 6 messages stored and rendered first ({load:.1f} s)"
        samples, model_share, one_turn = agent_turns(store, reps=max(reps * 2, 20))
        calls[name] = one_turn
        r = row(name)
        r.store[backend] = samples
        r.note = (f"prompt + grep tool + thread persistence; the scripted model's own "
                  f"{model_share * 1000:.2f} ms per turn is subtracted{note}")
    return calls


def agent_turns(store: SqlStore, reps: int) -> tuple[list[float], float, Fn]:
    """One user turn: model asks for one grep, gets the result, answers. Model time excluded."""
    from memagent.agent.builder import build_agent
    from memagent.agent.model.scripted import ScriptedModel
    from memagent.vfs.records.threads import ThreadStore
    from memagent.vfs.scopes import AgentView

    view = AgentView(store, "bench", user="bench")
    model = ScriptedModel()
    agent = build_agent(view, model, yolo=True, threads=ThreadStore(store.db))
    in_model = [0.0]
    respond = model.respond

    def timed_respond(*args: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return respond(*args, **kw)
        finally:
            in_model[0] += time.perf_counter() - t

    model.respond = timed_respond  # type: ignore[method-assign,unused-ignore]

    def turn() -> None:
        model.enqueue_tool_use("grep", {"pattern": RARE})
        model.enqueue_text("Found it.")
        agent.turn("Where did we note the plutonium quokka?")

    out: list[float] = []
    model_spent: list[float] = []
    for i in range(reps + 1):
        if i % 10 == 0:
            agent.new_thread()  # keep the history short, as a fresh conversation
        in_model[0] = 0.0
        spent = _timed(turn)
        if i:  # the first turn warms caches
            out.append(spent - in_model[0])
            model_spent.append(in_model[0])
    return out, _med(model_spent), turn


# -- reporting -------------------------------------------------------------------


def _ratio(r: Row, backend: str) -> float | None:
    if r.ratio_to is None or backend not in r.store:
        return None
    base = r.base.get(backend, {}).get(r.ratio_to)
    if not base:
        return None
    return _med(r.store[backend]) / _med(base)


def _all_base(r: Row, kind: str) -> list[float] | None:
    xs = [x for b in r.base.values() for x in b.get(kind, [])]
    return xs or None


# Which memagent backend each peer is compared with (its ratio column).
PEER_VERSUS = {"deepagents+SqliteStore": "sqlite", "deepagents+PostgresStore": "postgres",
               "deepagents FilesystemBackend": "sqlite"}


def _peer_ratio(r: Row, peer: str) -> str:
    mine = r.store.get(PEER_VERSUS[peer])
    theirs = r.store.get(peer)
    if not mine or not theirs:
        return ""
    return f"{_med(theirs) / _med(mine):,.1f}×"


def table(rows: dict[str, Row], backends: list[str], peers: list[str] | None = None) -> str:
    peers = [p for p in peers or [] if any(p in r.store for r in rows.values())]
    head = ["operation"] + [f"{b} ms" for b in backends] + ["grep -r ms", "rg ms", "pathlib ms"]
    head += [f"{b} ÷ baseline" for b in backends]
    head += [f"{p} ms" for p in peers] + [f"{p} ÷ memagent {PEER_VERSUS[p]}" for p in peers]
    head += ["notes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows.values():
        cells = [r.name] + [_ms(r.store.get(b)) for b in backends]
        cells += [_ms(_all_base(r, k)) if r.ratio_to else "" for k in ("grep -r", "rg", "pathlib")]
        for b in backends:
            x = _ratio(r, b)
            cells.append(f"{x:.2f}× {r.ratio_to}" if x is not None else "")
        cells += [_ms(r.store.get(p)) if p in r.store else "" for p in peers]
        cells += [_peer_ratio(r, p) for p in peers]
        cells.append("; ".join([r.note, *r.problems]).strip("; "))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def targets(sizes: list[int]) -> list[Target]:
    # Issue 16's targets are set at 10,000 files (a larger --files run is for scale).
    big = 10_000 if 10_000 in sizes else max(sizes)

    def ratio_at_most(limit: float) -> Callable[[Row, str], tuple[bool, str] | None]:
        def check(r: Row, b: str) -> tuple[bool, str] | None:
            x = _ratio(r, b)
            return None if x is None else (x <= limit, f"{x:.2f}×")
        return check

    def p50_under(ms: dict[str, float]) -> Callable[[Row, str], tuple[bool, str] | None]:
        def check(r: Row, b: str) -> tuple[bool, str] | None:
            if b not in r.store:
                return None
            m = _med(r.store[b]) * 1000
            return m <= ms[b], f"{m:,.2f} ms"
        return check

    out = [Target("grep rare literal (files) ≤ grep -r", "grep rare literal, files_with_matches",
                  big, ratio_at_most(1.0)),
           Target("grep common word (files_with_matches) ≤ grep -r",
                  "grep common word, files_with_matches", big, ratio_at_most(1.0))]
    for label in ("common word", f"regex `{REGEX}`", f"regex, no literal `{REGEX_NO_LITERAL}`"):
        for mode in ("files_with_matches", "content"):
            if (label, mode) == ("common word", "files_with_matches"):
                continue  # held to 1x above
            out.append(Target(f"grep {label} ({mode}) ≤ 3× grep -r", f"grep {label}, {mode}",
                              big, ratio_at_most(3.0)))
    for pattern in ("**/*.md", "skills/*.md"):
        out.append(Target(f'glob("{pattern}") ≤ 1.5× pathlib', f'glob("{pattern}")', big,
                          ratio_at_most(1.5)))
    out.append(Target("ls / p50 ≤ 1 ms SQLite / 2 ms Postgres", "ls /", big,
                      p50_under({"sqlite": 1.0, "postgres": 2.0})))
    out.append(Target("read_file 4 KB p50 ≤ 0.2 ms SQLite / 0.5 ms Postgres", "read_file 4 KB", big,
                      p50_under({"sqlite": 0.2, "postgres": 0.5})))
    limits = {"sqlite": 1.5, "postgres": 3.0}
    for op in ("write_file", "edit_file"):
        out.append(Target(f"{op} p50 ≤ 1.5 ms SQLite / 3 ms Postgres",
                          f"{op} 4 KB (validated, revision)", big, p50_under(limits)))
    out.append(Target("bulk load ≤ 3 s SQLite / 5 s Postgres", "bulk load (validated, one transaction)", big,
                      p50_under({"sqlite": 3000.0, "postgres": 5000.0})))
    out.append(Target("agent overhead per turn < 10 ms (1,000 files)",
                      "agent turn overhead (1 tool call)", 1000,
                      p50_under({"sqlite": 10.0, "postgres": 10.0})))
    return out


def verdicts(results: dict[int, dict[str, Row]], sizes: list[int], backends: list[str]
             ) -> tuple[str, list[tuple[int, str, str]]]:
    lines = ["| target | size | " + " | ".join(backends) + " |",
             "|---|---|" + "---|" * len(backends)]
    missed: list[tuple[int, str, str]] = []
    for t in targets(sizes):
        rows = results.get(t.size)
        if rows is None or t.row not in rows:
            lines.append(f"| {t.label} | {t.size:,} | " + " | ".join("not run" for _ in backends)
                         + " |")
            continue
        cells = []
        for b in backends:
            got = t.check(rows[t.row], b)
            if got is None:
                cells.append("n/a")
                continue
            ok, figure = got
            cells.append(f"{'met' if ok else '**missed**'} ({figure})")
            if not ok:
                missed.append((t.size, b, t.row))
        lines.append(f"| {t.label} | {t.size:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines), missed


def profile(fn: Fn, runs: int = 3, top: int = 8) -> str:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(runs):
        fn()
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf).sort_stats("tottime")
    stats.print_stats(top)
    keep = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
    start = next((i for i, ln in enumerate(keep) if ln.lstrip().startswith("ncalls")), 0)
    return "\n".join(keep[start:])


def machine(pg_url: str | None) -> list[str]:
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    facts = [
        f"CPU: {cpu}; {os.cpu_count()} logical cores; load average at start "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        f"OS: {platform.platform()}; Python {platform.python_version()}",
        f"SQLite {sqlite3.sqlite_version}",
        "grep: " + _version(["grep", "--version"]),
        "rg: " + (_version(["rg", "--version"]) if shutil.which("rg") else "not installed (n/a)"),
    ]
    if pg_url:
        engine = create_engine(pg_url)
        with engine.connect() as conn:
            facts.append(str(conn.execute(text("SELECT version()")).scalar()).split(",")[0]
                         + " over loopback TCP")
        engine.dispose()
    return facts


def _version(args: list[str]) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, check=False).stdout.split(
            "\n")[0]
    except OSError:
        return "not found"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000", help="corpus sizes (default 1000,10000)")
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--pg-url", default=os.environ.get("MEMAGENT_BENCH_PG_URL"),
                    help="a Postgres server to create a scratch database on "
                         "(default: $MEMAGENT_BENCH_PG_URL; none = skip Postgres)")
    ap.add_argument("--reps", type=int, default=9, help="timed rounds per operation")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--files", type=int, default=0,
                    help="also run this size (e.g. 100000, ~470 MB) on --files-backends only")
    ap.add_argument("--files-backends", default="sqlite",
                    help="backends for the --files size (default sqlite)")
    ap.add_argument("--threads", type=int, default=1000,
                    help="threads stored before the agent-turn row at 10,000 files (default 1000)")
    ap.add_argument("--peers", action="store_true",
                    help="add deepagents' StoreBackend (LangGraph SQLite and Postgres stores) and "
                         "FilesystemBackend columns (needs the bench extra); sizes up to 10,000")
    ap.add_argument("--out", default=str(Path(__file__).with_name("RESULTS.md")),
                    help="where to write the Markdown results ('-' = do not write)")
    ap.add_argument("--agents", type=int, default=0,
                    help="run the scale bench instead (bench/scale.py, started by bench/__main__.py): "
                         "N agents x --files-per-agent files against a database holding one agent; "
                         "see `python -m bench.scale -h`")
    args = ap.parse_args(argv)
    if args.agents:
        ap.error("--agents is the scale bench: run it as `python -m bench --agents N`")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.files and args.files not in sizes:
        sizes.append(args.files)
    backends = [b for b in args.backends.split(",") if b]
    skipped: list[str] = []
    if "postgres" in backends and not args.pg_url:
        backends.remove("postgres")
        skipped.append("Postgres skipped: no --pg-url / MEMAGENT_BENCH_PG_URL given.")
    peer_names: list[str] = []
    if args.peers:
        from bench import peers as peer_mod

        why = peer_mod.missing()
        if why:
            skipped.append(f"Peers skipped: {why}.")
        else:
            peer_names = [p for p in peer_mod.PEERS if p != peer_mod.PEER_PG or args.pg_url]
    started = time.perf_counter()
    facts = machine(args.pg_url if "postgres" in backends else None)
    results: dict[int, dict[str, Row]] = {}
    calls: dict[tuple[int, str], dict[str, Fn]] = {}
    misses_profiled: list[str] = []
    with tempfile.TemporaryDirectory(prefix="memagent-bench-") as tmp:
        work = Path(tmp)
        for size in sizes:
            corpus = generate(size, seed=args.seed)
            root = work / f"folder-{size}"
            corpus.write_folder(root)
            rows: dict[str, Row] = {}
            size_backends = backends
            if args.files and size == args.files and size not in [int(x) for x in args.sizes.split(",") if x]:
                size_backends = [b for b in args.files_backends.split(",") if b in backends]
            for backend in size_backends:
                print(f"... {size:,} files on {backend}", file=sys.stderr, flush=True)
                with database(backend, work, args.pg_url, size) as url, open_store(url) as store:
                    calls[(size, backend)] = bench_backend(
                        rows, backend, store, corpus, root, args.reps, agent_overhead=size == 1000,
                        turn_threads=args.threads if size == 10_000 else 0)
                    target_size = 10_000 if 10_000 in sizes else max(sizes)
                    if size in (target_size, 1000):
                        results[size] = rows
                        _, missed = verdicts(results, sizes, backends)
                        # Profile, while its database still exists, what missed a target
                        # and any row more than 3x slower than its baseline.
                        slow = [(size, backend, r.name) for r in rows.values()
                                if (_ratio(r, backend) or 0) > 3.0]
                        for msize, mbackend, mrow in missed + slow:
                            key = f"{mrow} — {mbackend}, {msize:,} files"
                            fn = calls[(size, backend)].get(mrow)
                            if (msize, mbackend) == (size, backend) and fn is not None and not any(
                                    k.startswith(key) for k in misses_profiled):
                                found = f"{key}\n\n```\n{profile(fn)}\n```"
                                if mrow.startswith(("write_file", "edit_file")):
                                    found += "\n\n```\n" + _floor(url, corpus) + "\n```"
                                misses_profiled.append(found)
            if peer_names and size <= 10_000:
                bench_peers(rows, peer_names, corpus, root, work, size, args)
            results[size] = rows
            shutil.rmtree(root)
    elapsed = time.perf_counter() - started
    verdict_table, _ = verdicts(results, sizes, backends)
    doc = render(results, backends, facts, skipped, verdict_table, misses_profiled, elapsed,
                 args, peer_names)
    print(doc)
    if args.out != "-":
        out = Path(args.out)
        # The start-up section is bench/startup.py's: keep it.
        old = out.read_text("utf-8") if out.exists() else ""
        out.write_text(sections.keep(old, doc), encoding="utf-8")
        print(f"\n(written to {args.out})", file=sys.stderr)
    return 0


def _floor(url: str, corpus: Corpus) -> str:
    """The write's bare UPDATE with and without its index upkeep (bench/floors.py)."""
    store = open_store(url)
    try:
        return floors.write_floor(store.engine, SCOPE, READ_PATH, corpus.files[READ_PATH])
    finally:
        store.close()


def bench_peers(rows: dict[str, Row], peer_names: list[str], corpus: Corpus, root: Path, work: Path,
                size: int, args: argparse.Namespace) -> None:
    """The peer columns at one size: each deepagents backend on the same corpus and folder."""
    from bench import peers as peer_mod

    expected: dict[str, Any] = {
        "ls /": _listing(corpus, "/"),
        "ls /people (100 entries)": _listing(corpus, "/people"),
        "read_file 4 KB": corpus.files[READ_PATH],
        'glob("**/*.md")': pathlib_glob(root, "**/*.md"),
        'glob("skills/*.md")': pathlib_glob(root, "skills/*.md"),
    }
    for label, pattern in (("rare literal", RARE), ("common word", COMMON)):
        expected[f"grep {label}, files_with_matches"] = _rel_files(
            _run(grep_cmd(root, pattern, content=False, fixed=True)), root)
        expected[f"grep {label}, content"] = len(
            _run(grep_cmd(root, pattern, content=True, fixed=True)).splitlines())

    def timed(fn: Fn, n: int) -> list[float]:
        return interleaved({"peer": fn}, n)["peer"]

    # The folder peer last: its writes add files to the folder the others were compared with.
    order = sorted(peer_names, key=lambda p: p == peer_mod.PEER_FS)
    with peer_mod.backends(work, root, corpus, size, args.pg_url, order) as found:
        for peer in order:
            backend, load, note = found[peer]
            if backend is None:
                rows["bulk load (validated, one transaction)"].problems.append(f"{peer}: {note}")
                continue
            print(f"... {size:,} files on {peer}", file=sys.stderr, flush=True)
            if load is not None:
                bulk = rows["bulk load (validated, one transaction)"]
                bulk.store[peer] = [load]
                bulk.problems.append(f"{peer}: {note}, unvalidated")
            samples, notes = peer_mod.run_peer(peer, backend, corpus, args.reps, expected, timed)
            for name, xs in samples.items():
                if name in rows:
                    rows[name].store[peer] = xs
            for name, problem in notes.items():
                if name in rows:
                    rows[name].problems.append(problem)


def _extra_flags(args: argparse.Namespace) -> str:
    out = ""
    if args.files:
        out += f" --files {args.files} --files-backends {args.files_backends}"
    if args.threads != 1000:
        out += f" --threads {args.threads}"
    return out + (" --peers" if args.peers else "")


def _listing(corpus: Corpus, folder: str) -> list[tuple[str, bool]]:
    """(name, is directory) of a folder's entries, from the corpus's paths."""
    prefix = folder.rstrip("/") + "/"
    out: set[tuple[str, bool]] = set()
    for path in corpus.files:
        if path.startswith(prefix):
            rest = path[len(prefix):]
            out.add((rest.split("/", 1)[0], "/" in rest))
    return sorted(out)


def render(results: dict[int, dict[str, Row]], backends: list[str], facts: list[str],
           skipped: list[str], verdict_table: str, profiles: list[str], elapsed: float,
           args: argparse.Namespace, peer_names: list[str] | None = None) -> str:
    out = ["# memagent benchmark results", "",
           f"Generated by `python -m bench --sizes {args.sizes} --backends {args.backends} "
           f"--reps {args.reps}{_extra_flags(args)}` in {elapsed:.0f} s. Times are milliseconds: median "
           f"(min–max) of {args.reps} interleaved rounds after one warm-up (writes and agent "
           "turns: more rounds; bulk load: one run). Ratios divide a backend's median by the "
           "baseline's median measured in the same rounds as that backend; the baseline columns "
           "pool both backends' rounds.", ""]
    out += ["## Machine", ""] + [f"- {f}" for f in facts] + [f"- {s}" for s in skipped] + [""]
    out += ["Baselines: GNU `grep -r` (`-rl` for files, `-rn` for content, `-F` for the literal, "
            "`-E` for regexes, `LC_ALL=C`) and `rg` on the same files in a temporary folder (page "
            "cache warm), and `sorted(pathlib.Path.glob())`. Store greps are uncapped "
            "(`limit=10**9`) so that every engine reports every match.", ""]
    if peer_names:
        out += ["Peers (`--peers`): deepagents' `StoreBackend` over LangGraph's `SqliteStore` and "
                "`PostgresStore`, and its `FilesystemBackend` over the same folder, on the same corpus "
                "in the same run (sizes up to 10,000). Their writes neither validate nor keep "
                "revisions; their grep is literal-only (regex rows: n/a). Their answers are checked "
                "against `grep -r`, pathlib and the corpus; a difference is noted in the row. Peer "
                "ratios divide the peer's median by memagent's on the backend named.", ""]
    for size, rows in results.items():
        out += [f"## {size:,} files", "", table(rows, backends, peer_names), ""]
    out += ["## Targets", "", verdict_table, ""]
    if profiles:
        out += ["## Profiles (cProfile, 3 calls, top functions by own time)", "",
                "Every operation that missed a target, and every row over 3× its baseline. For a "
                "missed write, the write's bare `UPDATE` with and without its index upkeep "
                "(`bench/floors.py`; SQLite: triggers dropped inside rolled-back transactions; "
                "Postgres: `EXPLAIN ANALYZE`) shows how much of it is the database re-indexing the "
                "text. A bulk load's note sums its time per statement.", ""]
        for p in profiles:
            out += [f"### {p}", ""]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
