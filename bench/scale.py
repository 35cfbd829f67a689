"""Per-agent calls when one database holds many agents: ``python -m bench --agents N``.

Fills one database with ``N`` agents of ``--files-per-agent`` files each (default 100:
``/AGENTS.md``, a 4 KB ``/knowledge/reference-4k.md``, a few ``/skills/*.md`` with
frontmatter, the rest ``/knowledge/<topic>/*.md`` of 1-8 KB) and a second database
holding only the measured agent (``bench``, the same files byte for byte), then
times the same per-agent calls on both, interleaved round by round: ``ls``,
``read_file``, ``glob``, ``grep``, ``search`` (lexical; hybrid with ``--hybrid``),
``history``, ``write_file``, ``edit_file`` and the agent turn's own overhead
(``bench.run.agent_turns``: build the agent, one turn with one grep against the
scripted model, its time subtracted). The table gives medians, p90 and the ratio
big ÷ single per call (goal, issue 30: every ratio <= 1.5x at 1,000 agents).

It also captures the SQL each call runs on the big database (SQLAlchemy's
``before_cursor_execute``) and its plan (``EXPLAIN`` on Postgres, ``EXPLAIN QUERY
PLAN`` on SQLite), and lists, per call, the indexes used and any statement that
reads rows of every agent: a sequential scan of a shared table or a global index
(trigram, full-text) whose posting lists hold every agent's files.
``tests/test_scale_plans.py`` holds the per-agent calls to scope-led plans with the
same capture (``plans``).

Invariants:
- The content is deterministic in (``--seed``, agent number): the measured agent's
  files are identical in both databases, so the two sides do the same work; other
  agents share its vocabulary (a common word in ~30 % of everyone's files, the rare
  literal in 3 files of every hundredth agent), so shared indexes hold competing rows.
- Loading goes through the store's own bulk API (``SqlStore.bulk_write(create=True)``,
  one validated transaction per agent), so triggers, directory counts, full-text
  documents and revisions are exactly what the store makes.
- Nothing is timed in tests; the databases are scratch (created and dropped here,
  unless ``--keep`` names where to keep them, to be reused by a later run).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, event, text
from sqlalchemy.engine import make_url

from bench import pg, sections
from bench.corpus import COMMON, RARE, READ_PATH, REGEX, TOPICS, _body, _plant, _vocabulary
from memagent.vfs import SqlStore, open_store
from memagent.vfs.embeddings.base import Vectors, normalised
from memagent.vfs.paths import scope_name

MEASURED = "bench"  # the agent name bench.run.agent_turns builds its agent for
SCOPE = scope_name("agent", MEASURED)
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
SKILLS = 8
POOL = 1500  # distinct bodies every agent's files are drawn from

Fn = Callable[[], Any]

# Indexes whose entries are many agents' rows: a plan reading them without the scope in
# its condition (``_scope_keyed``) reads other agents' entries before the scope drops them.
GLOBAL_INDEXES = {
    "ix_files_content_trgm": "trigram index over every agent's text",
    "ix_files_search_doc": "full-text index over every agent's text",
    "files_fts": "FTS5 trigram index over a bucket of agents' text",
    "files_search": "FTS5 word index over a bucket of agents' text",
}


# -- the content -----------------------------------------------------------------


@dataclass
class Pool:
    """Bodies and names every agent draws from (built once: generating text is slow)."""

    vocab: list[str]
    bodies: list[str]
    common: set[int]  # indexes of bodies holding COMMON


def pool(seed: int, size: int = POOL) -> Pool:
    rng = random.Random(seed)
    vocab = _vocabulary(rng, 3000)
    bodies: list[str] = []
    common: set[int] = set()
    for i in range(size):
        blocks = _body(rng, vocab, rng.randint(1000, 8000), " ".join(rng.choices(vocab, k=3)).title())
        if rng.random() < 0.3:
            for _ in range(rng.randint(1, 4)):
                _plant(rng, blocks, COMMON)
            common.add(i)
        if rng.random() < 0.01:
            _plant(rng, blocks, f"INC-{rng.randint(10000, 99999)}")
        bodies.append("\n\n".join(blocks[1:]) + "\n")
    return Pool(vocab, bodies, common)


def agent_name(i: int) -> str:
    return f"a{i:05d}"


def agent_files(p: Pool, number: int, per_agent: int, seed: int) -> dict[str, str]:
    """Agent ``number``'s files (deterministic in seed and number)."""
    rng = random.Random(seed * 1_000_003 + number)
    out: dict[str, str] = {
        "/AGENTS.md": (f"# Instructions for agent {number}\n\n- Answer in short bullet points.\n"
                       "- Keep notes under /knowledge/, one file per topic.\n"
                       "- Check /skills/ before starting a task.\n"),
    }
    pick = len(p.bodies)
    reference = "# Reference\n\n" + p.bodies[rng.randrange(pick)]
    while len(reference) < 4096:
        reference += p.bodies[rng.randrange(pick)]
    out[READ_PATH] = reference[:4095] + "\n"
    for j, word in enumerate(rng.sample(p.vocab, SKILLS)):
        name = f"{word}-{j}"
        desc = " ".join(rng.choices(p.vocab, k=12))
        out[f"/skills/{name}.md"] = (f"---\nname: {name}\ndescription: Use when {desc}.\n---\n"
                                     f"# {name}\n\n{p.bodies[rng.randrange(pick)]}")
    plain: list[str] = []
    while len(out) < per_agent:
        path = f"/knowledge/{rng.choice(TOPICS)}/{rng.choice(p.vocab)}-{rng.choice(p.vocab)}.md"
        if path in out:
            continue
        title = path.rsplit("/", 1)[1][:-3].replace("-", " ").title()
        out[path] = f"# {title}\n\n{p.bodies[rng.randrange(pick)]}"
        plain.append(path)
    if number == 0 or number % 100 == 0 or number < 0:
        for path in rng.sample(plain, min(3, len(plain))):
            out[path] += f"\nSee also {RARE} for the details.\n"
    return out


def measured_files(p: Pool, per_agent: int, seed: int) -> dict[str, str]:
    return agent_files(p, -1, per_agent, seed)


# -- databases -------------------------------------------------------------------


@contextmanager
def database(backend: str, label: str, pg_url: str | None, workdir: Path, keep: bool) -> Iterator[str]:
    """A database URL; dropped afterwards unless ``keep`` (then named by ``label``, reused)."""
    if backend == "sqlite":
        path = workdir / f"scale-{label}.db"
        try:
            yield f"sqlite:///{path}"
        finally:
            if not keep:
                for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                    p.unlink(missing_ok=True)
        return
    assert pg_url is not None
    with pg.database(pg_url, f"memagent_scale_{label}" if keep else f"memagent_scale_{label}_", keep=keep) as url:
        yield url


def fill(store: SqlStore, p: Pool, agents: int, per_agent: int, seed: int,
         say: Callable[[str], None] = lambda s: None, minutes: float = 0.0) -> float:
    """Load ``agents`` agents; seconds spent (0 if all were already there).

    The measured agent takes the middle place in the numbering (its rows sit among
    the others') but is loaded first, so that a load stopped after ``minutes`` (0: no
    limit) still holds it.
    """
    have = set(store.list_agents())
    started = time.perf_counter()
    loaded = 0
    middle = agents // 2
    for i in [middle, *(j for j in range(agents) if j != middle)]:
        if minutes and time.perf_counter() - started > minutes * 60:
            say(f"... stopped loading after {minutes:g} minutes")
            break
        name = MEASURED if i == middle else agent_name(i)
        if name in have:
            continue
        batch = measured_files(p, per_agent, seed) if name == MEASURED else agent_files(p, i, per_agent, seed)
        store.bulk_write(scope_name("agent", name), batch, author="import", approval="cli",
                         message="scale bench", create=True)
        loaded += 1
        if loaded % 500 == 0:
            spent = time.perf_counter() - started
            say(f"... {loaded:,} agents loaded in {spent:.0f} s ({loaded * per_agent / spent:,.0f} files/s)")
    if loaded:
        analyze(store.engine)
    return time.perf_counter() - started if loaded else 0.0


def analyze(engine: Engine) -> None:
    """Planner statistics, as autovacuum (Postgres) or ``memagent``'s own use would leave them."""
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE"))
    else:
        with engine.begin() as conn:
            conn.execute(text("ANALYZE"))


def table_sizes(engine: Engine) -> str:
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            total = conn.execute(text("SELECT pg_database_size(current_database())")).scalar() or 0
            rows = conn.execute(text(
                "SELECT c.relname, pg_total_relation_size(c.oid) AS s FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() "
                "AND c.relkind = 'r' ORDER BY s DESC LIMIT 4")).all()
        parts = ", ".join(f"{r.relname} {r.s / 1e9:.2f} GB" for r in rows)
        return f"database {total / 1e9:.2f} GB ({parts}, each with its indexes and TOAST)"
    url = make_url(str(engine.url))
    size = os.path.getsize(url.database or "") if url.database else 0
    return f"database file {size / 1e9:.2f} GB"


# -- a fast deterministic embedder (for --hybrid: the scoring cost, not the quality) -------


class HashEmbedder:
    """Words hashed into 256 dimensions: the shape of a real embedder's output, at no model cost.

    The scale bench times what grows with the number of agents (reading and scoring
    vectors), not recall quality; a real model's embedding time is per file and does
    not depend on how many agents share the database.
    """

    model = "bench-hash/256"
    ready = True
    _word = re.compile(r"\w+")

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), 256), np.float32)
        for i, t in enumerate(texts):
            for w in self._word.findall(t.lower()):
                out[i, hash(w) % 256] += 1.0  # PYTHONHASHSEED fixes it within one run
        return normalised(out)


# -- measuring -------------------------------------------------------------------


@dataclass
class Row:
    name: str
    big: list[float] = field(default_factory=list)
    single: list[float] = field(default_factory=list)
    note: str = ""

    def ratio(self) -> float:
        return statistics.median(self.big) / statistics.median(self.single)


def _p90(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(0.9 * (len(s) - 1))))]


def interleave(big: Fn, single: Fn, reps: int) -> tuple[list[float], list[float]]:
    big()
    single()
    a: list[float] = []
    b: list[float] = []
    for i in range(reps):
        order = ((big, a), (single, b)) if i % 2 == 0 else ((single, b), (big, a))
        for fn, out in order:
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
    return a, b


def calls(store: SqlStore, hybrid: bool) -> dict[str, Fn]:
    """The per-agent calls, by name, on ``store`` (the same on both databases)."""
    topic = "/knowledge/" + sorted({p.split("/")[2] for p in store.glob(SCOPE, "knowledge/*/*.md")})[0]
    lines = store.read(SCOPE, READ_PATH).content
    n = iter(range(10**9))
    store.write(SCOPE, "/knowledge/bench-edit.md", f"{lines}marker-0\n", author="agent", approval="yolo")
    m = iter(range(10**9))

    def write() -> None:
        store.write(SCOPE, "/knowledge/bench-write.md", f"{lines}round {next(n)}\n", author="agent", approval="yolo")

    def edit() -> None:
        i = next(m)
        store.edit(SCOPE, "/knowledge/bench-edit.md", f"marker-{i}\n", f"marker-{i + 1}\n",
                   author="agent", approval="yolo")

    out: dict[str, Fn] = {
        "ls /": lambda: store.ls(SCOPE, "/"),
        f"ls {topic}": lambda: store.ls(SCOPE, topic),
        "read_file 4 KB": lambda: store.read(SCOPE, READ_PATH),
        'glob("skills/*.md")': lambda: store.glob(SCOPE, "skills/*.md"),
        "grep rare literal, files": lambda: store.grep(SCOPE, RARE, fixed_strings=True),
        "grep common word, files": lambda: store.grep(SCOPE, COMMON),
        "grep common word, content": lambda: store.grep(SCOPE, COMMON, output_mode="content"),
        f"grep regex `{REGEX}`, files": lambda: store.grep(SCOPE, REGEX),
        "search lexical, common word + word": lambda: store.search([SCOPE], f"{COMMON} reference"),
        "search lexical, question": lambda: store.search([SCOPE], "how do we handle the zephyr deploys?"),
        "history of a file": lambda: store.history(SCOPE, READ_PATH),
        "write_file 4 KB (validated, revision)": write,
        "edit_file 4 KB (validated, revision)": edit,
    }
    if hybrid:
        out["search hybrid, question"] = lambda: store.search(
            [SCOPE], "how do we handle the zephyr deploys?", mode="hybrid")
    return out


def measure(big: SqlStore, single: SqlStore, reps: int, hybrid: bool, turns: bool) -> list[Row]:
    rows: list[Row] = []
    cb, cs = calls(big, hybrid), calls(single, hybrid)
    for name in cb:
        n = reps * 2 if name.startswith(("write", "edit")) else reps
        try:
            a, b = interleave(cb[name], cs[name], n)
        except Exception as exc:  # noqa: BLE001 (a call that fails at scale is a finding: report it)
            rows.append(Row(name, note=f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"))
            continue
        rows.append(Row(name, a, b))
    if turns:
        from bench.run import agent_turns

        row = Row("agent turn overhead (1 grep tool call)",
                  note="build_agent once, then turns; the scripted model's time subtracted")
        for _ in range(max(2, reps // 5)):
            for store, out in ((big, row.big), (single, row.single)):
                samples, _model, _fn = agent_turns(store, reps=5)
                out.extend(samples)
        rows.append(row)
    return rows


# -- plans -----------------------------------------------------------------------


@dataclass
class Plan:
    call: str
    sql: str
    plan: str
    indexes: list[str]
    scans: list[str]  # tables read whole, or global indexes read

    @property
    def problem(self) -> str:
        return "; ".join(self.scans)


_PG_INDEX = re.compile(r"(?:Index Scan|Index Only Scan|Bitmap Index Scan)(?: Backward)? (?:using|on) (\w+)")
_PG_SEQ = re.compile(r"Seq Scan on (\w+)")
_SQ_INDEX = re.compile(r"USING (?:COVERING )?INDEX (\w+)|USING (INTEGER PRIMARY KEY)"
                       r"|(?:SCAN|SEARCH) (\w+) VIRTUAL TABLE")
_SQ_BUCKET = re.compile(r"(?<=^files_fts)_\d+$|(?<=^files_search)_\d+$")  # bucket n's tables
_SQ_SCAN = re.compile(r"^\s*(?:--)?SCAN (\w+)(?: AS \w+)?\s*$")
# Tables whose rows belong to agents: a whole scan of one reads everyone's rows.
AGENT_TABLES = {"files", "revisions", "dirs", "embeddings", "embedding_pending", "fts_pending",
                "threads", "messages", "proposals", "thread_events", "thread_summaries"}
# Small bookkeeping tables a per-agent call may read whole (one row each, or empty).
_SMALL = {"fts_pending", "embedding_pending", "embedding_state", "memagent_bulk", "alembic_version"}


def _statement_kind(sql: str) -> str:
    return sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""


@contextmanager
def capture(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """Every SELECT/INSERT/UPDATE/DELETE/WITH the engine runs meanwhile, with its parameters."""
    seen: list[tuple[str, Any]] = []

    def before(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        # SET LOCAL too: a call's planner settings (grep's enable_seqscan) shape its plans.
        if _statement_kind(statement) in ("SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "SET") \
                and not executemany:
            seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", before)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", before)


def explain(conn: Connection, sql: str, params: Any) -> str:
    raw = conn.connection.driver_connection
    assert raw is not None
    cur = raw.cursor()
    try:
        if conn.dialect.name == "postgresql":
            cur.execute("EXPLAIN " + sql, params or None)
            return "\n".join(r[0] for r in cur.fetchall())
        cur.execute("EXPLAIN QUERY PLAN " + sql, params or ())
        return "\n".join(str(r[-1]) for r in cur.fetchall())
    finally:
        cur.close()


def read_plan(call: str, sql: str, plan: str, dialect: str) -> Plan:
    indexes: list[str] = []
    scans: list[str] = []
    if dialect == "postgresql":
        indexes = _PG_INDEX.findall(plan)
        scans = [f"Seq Scan on {t}" for t in _PG_SEQ.findall(plan) if t in AGENT_TABLES and t not in _SMALL]
    else:
        for line in plan.splitlines():
            for m in _SQ_INDEX.finditer(line):
                name = m.group(1) or ("rowid of " + line.split()[1] if m.group(2) else m.group(3))
                indexes.append(_SQ_BUCKET.sub("", name))
            m2 = _SQ_SCAN.match(line)
            if m2 and m2.group(1) in AGENT_TABLES and m2.group(1) not in _SMALL:
                scans.append(f"SCAN {m2.group(1)}")
    for ix in sorted(set(indexes)):
        if ix in GLOBAL_INDEXES and not _scope_keyed(plan, ix):
            scans.append(f"{ix} ({GLOBAL_INDEXES[ix]})")
    return Plan(call, sql, plan, sorted(set(indexes)), scans)


def _scope_keyed(plan: str, index: str) -> bool:
    """Whether every use of ``index`` in a plan reads only the scope's entries.

    Postgres: the scope is in the index condition (migration 0011 keys the GIN indexes
    by scope first: only the scope's entries are walked). SQLite: the FTS5 table is
    read in a rowid range (``INDEX 0:M1><``: MATCH with rowid >= and <=), the scope's
    own block of its bucket (migration 0012, ``vfs/backends/sqlite_fts.py``)."""
    lines = plan.splitlines()
    if any("VIRTUAL TABLE" in ln for ln in lines):
        uses = [ln for ln in lines if re.search(rf"\b{index}(?:_\d+)?(?: AS \w+)? VIRTUAL TABLE", ln)]
        return bool(uses) and all(re.search(r"INDEX \d+:M\d*[^ ]*>[^ ]*<|INDEX \d+:M\d*[^ ]*<[^ ]*>", ln)
                                  for ln in uses)
    uses = [i for i, ln in enumerate(lines) if re.search(rf"\b(?:on|using) {index}\b", ln)]
    for i in uses:
        cond = next((ln for ln in lines[i + 1 : i + 3] if "Index Cond:" in ln), "")
        if "(scope)" not in cond:
            return False
    return bool(uses)


# read_file and the read opening every write run this on the DBAPI connection itself
# (vfs/backends/*.py), where SQLAlchemy's events do not see it.
HEAD_SQL = "SELECT content, version, deleted FROM files WHERE scope = {p} AND path = {p}"


def plans(store: SqlStore, named_calls: dict[str, Fn]) -> list[Plan]:
    """Each call run once, every statement it ran explained (parameters as it ran them)."""
    out: list[Plan] = []
    dialect = store.engine.dialect.name
    mark = "%s" if dialect == "postgresql" else "?"
    for call, fn in named_calls.items():
        # What a failing call ran before it failed is still explained.
        with capture(store.engine) as seen, suppress(Exception):
            fn()
        if call.startswith(("read_file", "write_file", "edit_file")):
            seen.insert(0, (HEAD_SQL.format(p=mark), (SCOPE, READ_PATH)))
        store._pending.flush()  # noqa: SLF001 (the merge's own statements are not the call's)
        with store.engine.connect() as conn:
            done: set[str] = set()
            for sql, params in seen:
                if _statement_kind(sql) == "SET":
                    conn.exec_driver_sql(sql)  # LOCAL: gone at the rollback below
                    continue
                if sql in done:
                    continue
                done.add(sql)
                out.append(read_plan(call, sql, explain(conn, sql, params), dialect))
            conn.rollback()
    return out


def plan_table(found: list[Plan]) -> str:
    by_call: dict[str, list[Plan]] = {}
    for p in found:
        by_call.setdefault(p.call, []).append(p)
    lines = ["| call | statements | indexes used | reads other agents' rows |", "|---|---|---|---|"]
    for call, ps in by_call.items():
        ix = sorted({i for p in ps for i in p.indexes})
        bad = sorted({s for p in ps for s in p.scans})
        lines.append(f"| {call} | {len(ps)} | {', '.join(ix) or '—'} | {'; '.join(bad) or 'no'} |")
    return "\n".join(lines)


# -- reporting -------------------------------------------------------------------


def rows_table(rows: list[Row], goal: float) -> str:
    lines = ["| call | big p50 ms | big p90 ms | single p50 ms | single p90 ms | big ÷ single | ≤ goal |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if not r.big or not r.single:
            lines.append(f"| {r.name} | {r.note} | | | | | **missed** |")
            continue
        x = r.ratio()
        lines.append(f"| {r.name} | {statistics.median(r.big) * 1000:,.2f} | {_p90(r.big) * 1000:,.2f} | "
                     f"{statistics.median(r.single) * 1000:,.2f} | {_p90(r.single) * 1000:,.2f} | "
                     f"{x:.2f}× | {'met' if x <= goal else '**missed**'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench --agents N", description=__doc__.split("\n")[0])
    ap.add_argument("--agents", type=int, default=1000)
    ap.add_argument("--files-per-agent", type=int, default=100)
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--pg", "--pg-url", dest="pg", default=os.environ.get("MEMAGENT_BENCH_PG_URL"),
                    help="a Postgres server to create scratch databases on (default $MEMAGENT_BENCH_PG_URL)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--hybrid", action="store_true",
                    help="also time hybrid search (embeds every file with a hashing embedder first)")
    ap.add_argument("--load-minutes", type=float, default=0.0,
                    help="stop loading after this long and measure what is there (0 = load every agent)")
    ap.add_argument("--no-turns", action="store_true", help="skip the agent-turn row")
    ap.add_argument("--keep", default="",
                    help="a folder (SQLite) / name prefix (Postgres) to keep the databases in and reuse")
    ap.add_argument("--out", default=str(RESULTS), help="where to write the section ('-' = print only)")
    args = ap.parse_args(argv)
    if args.agents < 1 or args.files_per_agent < 20:
        print("python -m bench: --agents must be at least 1 and --files-per-agent at least 20", file=sys.stderr)
        return 2
    backends = [b for b in args.backends.split(",") if b]
    unknown = [b for b in backends if b not in ("sqlite", "postgres")]
    if unknown:
        print(f"python -m bench: unknown backend {unknown[0]!r}; use sqlite and/or postgres", file=sys.stderr)
        return 2
    notes: list[str] = []
    if "postgres" in backends and not args.pg:
        backends.remove("postgres")
        notes.append("Postgres skipped: no --pg / MEMAGENT_BENCH_PG_URL given.")

    def say(s: str) -> None:
        print(s, file=sys.stderr, flush=True)

    load_start = os.getloadavg()
    started = time.perf_counter()
    p = pool(args.seed)
    keep = bool(args.keep)
    workdir_cm = nullcontext(args.keep) if keep else tempfile.TemporaryDirectory(prefix="memagent-scale-")
    label = f"{args.agents}x{args.files_per_agent}"
    embedder = HashEmbedder() if args.hybrid else None
    for n in notes:
        say(n)
    with workdir_cm as wd:
        workdir = Path(wd)
        workdir.mkdir(parents=True, exist_ok=True)
        for backend in backends:
            say(f"... {backend}: {args.agents:,} agents x {args.files_per_agent} files")
            with database(backend, label, args.pg, workdir, keep) as big_url, \
                    database(backend, f"single{args.files_per_agent}", args.pg, workdir, keep) as one_url, \
                    open_store(big_url) as big, open_store(one_url) as single:
                if embedder is not None:
                    big.vectors.use(embedder)
                    single.vectors.use(embedder)
                spent = fill(big, p, args.agents, args.files_per_agent, args.seed, say, args.load_minutes)
                fill(single, p, 1, args.files_per_agent, args.seed)
                embedded = ""
                if embedder is not None:
                    t = time.perf_counter()
                    big.vectors.sync()
                    single.vectors.sync()
                    embedded = (" Every file embedded (hashing embedder; the background merge embeds during "
                                f"the load, the rest took {time.perf_counter() - t:,.0f} s).")
                size = table_sizes(big.engine)
                held = len(big.list_agents())
                if held != args.agents:
                    size = f"**{held:,} agents loaded** (of {args.agents:,}: --load-minutes); " + size
                say(f"... loaded in {spent:.0f} s; {size}; measuring")
                rows = measure(big, single, args.reps, args.hybrid, not args.no_turns)
                found = plans(big, calls(big, args.hybrid))
                loaded = ("reused a kept database" if not spent else
                          f"{spent:,.0f} s through `bulk_write`, one transaction per agent "
                          f"({args.agents * args.files_per_agent / spent:,.0f} files/s)")
                block = [f"Load: {loaded}; {size}.{embedded} Goal (issue 30): big ÷ single ≤ 1.5×.", "",
                         rows_table(rows, 1.5), "",
                         f"Plans of each call's statements on the big database ({backend}; "
                         "`EXPLAIN`/`EXPLAIN QUERY PLAN` of the SQL the call ran, captured with "
                         "SQLAlchemy's `before_cursor_execute`):", "",
                         plan_table(found), ""]
                doc = "\n".join(header(args, backend, started, load_start) + block)
                print(doc, flush=True)
                if args.out != "-":
                    sections.write(args.out, section_name(backend, args.agents), doc)
                    say(f"(written to {args.out})")
    return 0


def section_name(backend: str, agents: int) -> str:
    """The RESULTS.md section a run owns (``sections`` names are letters, ``_`` and ``-``)."""
    return f"scale-{backend}-{'large' if agents >= 5000 else 'small'}"


def header(args: argparse.Namespace, backend: str, started: float, load_start: tuple[float, ...]) -> list[str]:
    cmd = (f"python -m bench --agents {args.agents} --files-per-agent {args.files_per_agent} "
           f"--backends {backend} --reps {args.reps}" + (" --hybrid" if args.hybrid else "")
           + (" --pg URL" if backend == "postgres" else ""))
    return [f"## Scale, {backend}: {args.agents:,} agents × {args.files_per_agent} files "
            f"({args.agents * args.files_per_agent:,} files)", "",
            f"Generated by `{cmd}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
            f"{time.perf_counter() - started:,.0f} s; {os.cpu_count()} logical cores (shared), load average "
            f"{' '.join(f'{x:.2f}' for x in load_start)} at the start, "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end. Milliseconds: p50 and p90 of "
            f"{args.reps} rounds (writes {args.reps * 2}) interleaved big/single after a warm-up. "
            "big = the database of every agent; single = a database holding only the measured agent "
            "(the same files).", ""]


if __name__ == "__main__":
    raise SystemExit(main())
