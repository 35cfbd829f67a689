"""Where a write's and a bulk load's time goes inside the database (for RESULTS.md's profiles).

cProfile sees a write's database work as one opaque call (``fetchone`` of the
``UPDATE ... RETURNING``, which runs the triggers); these measurements split it:

- ``statement_times``: a context manager that sums wall time per SQL statement kind
  (its first words) on an engine, for the bulk-load row's note.
- ``write_floor``: the same 4 KB ``UPDATE`` of one file, in transactions that are
  rolled back, with every trigger and with the full-text triggers dropped inside
  the transaction (SQLite: DDL is transactional, so nothing changes); on Postgres
  ``EXPLAIN (ANALYZE)`` of it, which names the time spent in triggers and the rest
  (the generated ``tsvector`` and the GIN indexes are part of the update itself).

Invariant: nothing here changes the database (every measured statement is rolled back).
"""

from __future__ import annotations

import re
import statistics
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event, text

_KIND = re.compile(r"^\s*((?:INSERT INTO|UPDATE|DELETE FROM|SELECT|CREATE INDEX|DROP INDEX)\s+\S+)", re.I)


@contextmanager
def statement_times(engine: Engine) -> Iterator[dict[str, float]]:
    """Seconds per statement kind ("INSERT INTO files_fts(rowid, ...") while the block runs."""
    spent: dict[str, float] = defaultdict(float)

    def before(conn: Any, _cur: Any, _stmt: str, _params: Any, context: Any, _many: bool) -> None:
        context._memagent_t = time.perf_counter()

    def after(conn: Any, _cur: Any, stmt: str, _params: Any, context: Any, _many: bool) -> None:
        m = _KIND.match(stmt)
        kind = (m.group(1) if m else stmt.split(None, 1)[0]).split("(")[0]
        spent[kind] += time.perf_counter() - getattr(context, "_memagent_t", time.perf_counter())

    event.listen(engine, "before_cursor_execute", before)
    event.listen(engine, "after_cursor_execute", after)
    try:
        yield spent
    finally:
        event.remove(engine, "before_cursor_execute", before)
        event.remove(engine, "after_cursor_execute", after)


def summary(spent: dict[str, float], top: int = 5) -> str:
    best = sorted(spent.items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{k} {v:.2f} s" for k, v in best)


def write_floor(engine: Engine, scope: str, path: str, content: str, rounds: int = 15) -> str:
    """A short report: the bare UPDATE of a 4 KB file with and without its index upkeep."""
    update = text("UPDATE files SET content = :c, size = :n, version = version + 1 "
                  "WHERE scope = :s AND path = :p")
    args = {"c": content, "n": len(content.encode("utf-8")), "s": scope, "p": path}
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            trans = conn.begin()
            plan = conn.execute(text("EXPLAIN (ANALYZE, BUFFERS) " + update.text), args).scalars().all()
            trans.rollback()
        return "EXPLAIN (ANALYZE, BUFFERS) of the write's UPDATE (rolled back):\n" + "\n".join(plan)

    def timed(drop: list[str]) -> float:
        xs = []
        with engine.connect() as conn:
            for i in range(rounds):
                trans = conn.begin()
                for name in drop:
                    conn.execute(text(f'DROP TRIGGER "{name}"'))
                t = time.perf_counter()
                conn.execute(update, {**args, "c": f"{content}{i}\n"})
                xs.append(time.perf_counter() - t)
                trans.rollback()
        return statistics.median(xs) * 1000

    with engine.connect() as conn:
        triggers = list(conn.scalars(text(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'files'")))
    fts = [t for t in triggers if t.startswith(("files_fts", "files_search"))]
    trigram = [t for t in fts if t.startswith("files_fts")]
    lines = ["The write's UPDATE alone (median of rolled-back transactions, ms):",
             f"- with every trigger: {timed([]):.3f}",
             f"- without the trigram index triggers (files_fts): {timed(trigram):.3f}",
             f"- without both full-text indexes' triggers: {timed(fts):.3f}"]
    return "\n".join(lines)
