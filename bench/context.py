"""Short-term and episodic memory figures: prefix stability and grep with many threads.

Run alone (``python -m bench.context``) or as ``python -m bench context``. Prints a
Markdown table; ``--out PATH`` also writes it. Invariants: deterministic inputs
(fixed texts, ``bench.corpus`` with a fixed seed), no network but loopback (the
local Messages API server of ``bench/fake_messages_api.py``), and every database it
makes is its own (a temporary SQLite file, a Postgres database dropped afterwards).

1. Prefix stability: a 50-turn session without memory edits, through the real
   ``Agent`` and the context budget (small enough that turns are folded into the
   summary several times). For each request after the first: is its prefix
   (tools + system prompt) byte-identical to the previous request's? Goal: all.
   The same session through ``AnthropicModel`` against the local Messages API
   gives the share of input tokens read from the (simulated) prompt cache.
2. Grep over memory (1,000 memory files of ``bench.corpus``) with no thread
   stored, then with ``--threads`` (10,000) threads rendered under
   ``/conversations/``: median of ``--reps`` runs each, for a rare literal and a
   common word. Goal: with threads < 2x without.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from bench import pg
from bench.corpus import COMMON, RARE, generate
from memagent.agent.builder import build_agent
from memagent.agent.model.scripted import ScriptedModel
from memagent.vfs import SqlStore, open_store
from memagent.vfs.models import messages, threads
from memagent.vfs.paths import scope_name
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.scopes import AgentView

TURNS = 50
BUDGET = 12_000


def _turn_text(n: int) -> str:
    return f"Turn {n}: here is part {n} of my notes. " + " ".join(
        f"item-{n}-{i} is about topic {i % 7} and the plan for week {i % 5}." for i in range(40))


def prefix_stability(budget: int = BUDGET, turns: int = TURNS) -> dict[str, Any]:
    """The scripted session: prefix equality, requests, summaries."""
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/prefix.db")
        store.create_agent("bench", {"/AGENTS.md": "# Rules\n- Keep answers short.\n"})
        model = ScriptedModel()

        def respond(request: dict[str, Any]) -> Any:
            if "running summary" in json.dumps(request["system"]):
                return model.text_response("- The user sent notes in parts; each part lists items.")
            if len(request["messages"]) % 4 == 1:  # now and then a tool step
                return model.tool_use_response([("ls", {"path": "/"})])
            return model.text_response("Noted.")

        for _ in range(turns * 4):
            model.enqueue_callable(respond)
        agent = build_agent(AgentView(store, "bench"), model, yolo=True, threads=ThreadStore(store.db))
        agent.context.budget = budget
        for n in range(1, turns + 1):
            agent.turn(_turn_text(n))
        store.close()
    asked = [r for r in model.requests if "running summary" not in json.dumps(r["system"])]
    prefixes = [json.dumps([r["tools"], r["system"]], sort_keys=True) for r in asked]
    same = sum(1 for a, b in zip(prefixes, prefixes[1:], strict=False) if a == b)
    return {"requests": len(asked), "same_prefix": same, "compared": len(prefixes) - 1,
            "summaries": len(model.requests) - len(asked), "folded": agent.context.folding.folded}


def cache_share(budget: int = BUDGET, turns: int = TURNS) -> dict[str, Any]:
    """The same session through the Anthropic client and the local Messages API."""
    from bench.fake_messages_api import FakeMessagesAPI
    from memagent.agent.model.anthropic_client import AnthropicModel

    saved = {k: os.environ.get(k) for k in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")}
    with FakeMessagesAPI() as api, tempfile.TemporaryDirectory() as tmp:
        os.environ["ANTHROPIC_API_KEY"] = "bench-key"
        os.environ["ANTHROPIC_BASE_URL"] = api.base_url
        try:
            def respond(body: dict[str, Any]) -> Any:
                return ("- notes in parts" if "running summary" in json.dumps(body.get("system"))
                        else "Noted.")

            for _ in range(turns * 3):
                api.enqueue_callable(respond)
            store = open_store(f"sqlite:///{tmp}/cache.db")
            store.create_agent("bench", {"/AGENTS.md": "# Rules\n- Keep answers short.\n"})
            model = AnthropicModel("claude-bench", stream=False)
            agent = build_agent(AgentView(store, "bench"), model, yolo=True, threads=ThreadStore(store.db))
            agent.context.budget = budget
            read = total = 0
            for n in range(1, turns + 1):
                usage = agent.turn(_turn_text(n)).usage
                read += usage.cache_read_input_tokens
                total += usage.total_input_tokens
            store.close()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    over = [r for r in api.requests if api.input_tokens(r) > budget]
    return {"cache_read_share": read / total if total else 0.0, "over_budget": len(over),
            "requests": len(api.requests), "counted": len(api.count_requests)}


# -- grep with many threads ---------------------------------------------------------------


@contextmanager
def database(backend: str, workdir: Path, pg_url: str | None) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{workdir / 'threads.db'}"
        return
    assert pg_url is not None
    with pg.database(pg_url, "memagent_bench_ctx_") as url:
        yield url


def _median_ms(fn: Callable[[], object], reps: int) -> float:
    fn()  # warm
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def store_threads(store: SqlStore, agent: str, count: int) -> float:
    """``count`` threads of 6 messages each (bulk insert), then rendered; returns seconds."""
    started = time.perf_counter()
    now = datetime.now(UTC)
    ids = [str(uuid.UUID(int=i + 1)) for i in range(count)]
    words = ["harbour", "lantern", "meadow", "copper", "violet", "thunder", "orchard", "pebble"]
    with store.engine.begin() as conn:
        for lo in range(0, count, 1000):
            chunk = ids[lo : lo + 1000]
            conn.execute(insert(threads), [
                {"id": tid, "agent": agent, "title": f"Planning {words[n % 8]} {lo + n}", "model": "m",
                 "created_at": now, "updated_at": now, "stale": True,
                 "conversation_path": f"/2026-11-23-planning-{words[n % 8]}-{lo + n}-{tid[:8]}.md"}
                for n, tid in enumerate(chunk)])
            rows = []
            for n, tid in enumerate(chunk):
                for seq in range(1, 7):
                    role = "user" if seq % 2 else "assistant"
                    body = f"{role} message {seq} about the {words[(n + seq) % 8]} plan, number {lo + n}."
                    rows.append({"thread_id": tid, "seq": seq, "role": role,
                                 "content": [{"type": "text", "text": body}], "created_at": now})
            conn.execute(insert(messages), rows)
    ThreadStore(store.db).sync_stale(agent)
    return time.perf_counter() - started


def grep_with_threads(backend: str, url: str, thread_count: int, reps: int) -> dict[str, Any]:
    store = open_store(url)
    corpus = generate(1000)
    store.create_agent("bench")
    store.bulk_write(scope_name("agent", "bench"), corpus.files)
    view = AgentView(store, "bench")
    cases = {"rare literal": RARE, "common word": COMMON}
    if store.engine.dialect.name == "postgresql":
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("ANALYZE files")
    before = {name: _median_ms(lambda p=pattern: view.grep(p, path="/"), reps) for name, pattern in cases.items()}
    load = store_threads(store, "bench", thread_count)
    if store.engine.dialect.name == "postgresql":
        # What autovacuum does soon after a bulk load; without it the planner works
        # from the statistics of the table before the 10,000 rows.
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("ANALYZE files")
    files = len(view.glob("*.md", "/conversations/"))
    after = {name: _median_ms(lambda p=pattern: view.grep(p, path="/"), reps) for name, pattern in cases.items()}
    conv = _median_ms(lambda: view.grep("Planning lantern 4242", path="/conversations/", fixed_strings=True), reps)
    store.close()
    return {"backend": backend, "before": before, "after": after, "files": files, "load_s": load,
            "conversations_grep_ms": conv}


def render(prefix: dict[str, Any], cache: dict[str, Any] | None, greps: list[dict[str, Any]],
           thread_count: int) -> str:
    lines = ["# Context budget and episodic memory", "",
             f"## Prefix stability ({TURNS} turns, no memory edits, budget {BUDGET:,} tokens)", "",
             "| figure | value | goal |", "|---|---|---|",
             f"| requests whose prefix (tools + system) equals the previous one | "
             f"{prefix['same_prefix']}/{prefix['compared']} | all |",
             f"| summaries written during the session | {prefix['summaries']} | (folding happened) |",
             f"| messages folded at the end | {prefix['folded']} | |"]
    if cache is not None:
        lines.append(f"| input tokens read from the prompt cache (local Messages API) | "
                     f"{cache['cache_read_share']:.0%} | |")
        lines.append(f"| requests over the budget (of {cache['requests']}) | {cache['over_budget']} | 0 |")
    lines += ["", f"## grep over memory (1,000 files) with {thread_count:,} threads stored vs none", "",
              "| backend | pattern | none (ms) | with threads (ms) | ratio | goal |", "|---|---|---|---|---|---|"]
    for g in greps:
        for name, ms in g["before"].items():
            after = g["after"][name]
            ratio = after / ms if ms else 0.0
            verdict = "met" if ratio < 2 else "MISSED"
            lines.append(f"| {g['backend']} | {name} | {ms:.1f} | {after:.1f} | {ratio:.2f}x | < 2x ({verdict}) |")
    for g in greps:
        lines.append("")
        lines.append(f"{g['backend']}: {g['files']:,} conversation files, stored and rendered in {g['load_s']:.1f} s; "
                     f"a fixed-string grep over /conversations/ takes {g['conversations_grep_ms']:.1f} ms.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.context", description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=10_000)
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--pg-url", default=os.environ.get("MEMAGENT_BENCH_PG_URL"))
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--out", default="-", help="also write the table here ('-': print only)")
    args = ap.parse_args(argv)
    prefix = prefix_stability()
    cache = cache_share()
    greps = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            if backend == "postgres" and not args.pg_url:
                print("postgres skipped: set MEMAGENT_BENCH_PG_URL or --pg-url", file=sys.stderr)
                continue
            with database(backend, Path(tmp), args.pg_url) as url:
                greps.append(grep_with_threads(backend, url, args.threads, args.reps))
    report = render(prefix, cache, greps, args.threads)
    print(report, end="")
    if args.out != "-":
        Path(args.out).write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
