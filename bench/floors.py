"""Where a write's and a bulk load's time goes inside the database (for RESULTS.md's profiles).

cProfile sees a write's database work as one opaque call (``fetchone`` of the
``UPDATE ... RETURNING``, which runs the triggers); these measurements split it:

- ``statement_times``: a context manager that sums wall time per SQL statement kind
  (its first words) on an engine, for the bulk-load row's note.
- ``write_floor``: the same 4 KB ``UPDATE`` of one file, in transactions that are
  rolled back (DDL is transactional on both, so nothing changes): on SQLite with
  every trigger, without the one recording it in ``fts_pending``, and the merge
  of that row into the FTS5 indexes that follows in the background; on Postgres
  the GIN indexes and then the generated ``tsvector`` column are what is dropped
  (they are part of the update itself, not triggers), plus ``EXPLAIN (ANALYZE)``.
- ``pg_document_seconds``: how long building every file's ``tsvector`` takes, the
  part of a Postgres bulk load's INSERT that is English word splitting.

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
        return _pg_write_floor(engine, update, args, content, rounds)

    from memagent.vfs.backends.sqlite_fts import merge

    with engine.connect() as conn:
        names = set(conn.scalars(text("SELECT name FROM sqlite_master")))
    pending = sorted(n for n in names if n.startswith("files_index_pending_"))

    def timed(drop: list[str], *, merged: bool = False) -> float:
        """The UPDATE's time or, ``merged``, the time of merging it into the FTS5 indexes."""
        xs = []
        with engine.connect() as conn:
            for i in range(rounds):
                trans = conn.begin()
                for name in drop:
                    conn.execute(text(f'DROP TRIGGER "{name}"'))
                if merged:
                    merge(conn)  # what others left pending, untimed
                t = time.perf_counter()
                conn.execute(update, {**args, "c": f"{content}{i}\n"})
                if merged:
                    t = time.perf_counter()
                    merge(conn)
                xs.append(time.perf_counter() - t)
                trans.rollback()
        return statistics.median(xs) * 1000

    lines = ["The write's UPDATE alone (median of rolled-back transactions, ms):",
             f"- with every trigger (directory index, fts_pending record): {timed([]):.3f}",
             f"- without the fts_pending trigger: {timed(pending):.3f}"]
    if "fts_pending" in names:
        lines.append(f"- merging it into both FTS5 indexes afterwards (vfs/pending.py, in the background): "
                     f"{timed([], merged=True):.3f}")
    return "\n".join(lines)


def _pg_write_floor(engine: Engine, update: Any, args: dict[str, Any], content: str, rounds: int) -> str:
    """The bare UPDATE with every index, without the GIN indexes, and without the tsvector too.

    Each variant drops what it leaves out inside a transaction that is rolled back
    (Postgres DDL is transactional), so the database is unchanged.
    """
    with engine.connect() as conn:
        gin = list(conn.scalars(text(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
            "AND tablename = 'files' AND indexdef LIKE '% USING gin %'")))
        plan = conn.execute(text("EXPLAIN (ANALYZE, BUFFERS) " + update.text), args).scalars().all()
        conn.rollback()

    def timed(ddl: list[str]) -> float:
        xs = []
        with engine.connect() as conn:
            for i in range(rounds):
                trans = conn.begin()
                for statement in ddl:
                    conn.execute(text(statement))
                t = time.perf_counter()
                conn.execute(update, {**args, "c": f"{content}{i}\n"})
                xs.append(time.perf_counter() - t)
                trans.rollback()
        return statistics.median(xs) * 1000

    drop_gin = [f'DROP INDEX "{name}"' for name in gin]
    lines = ["The write's UPDATE alone (median of rolled-back transactions, ms):",
             f"- with every index: {timed([]):.3f}",
             f"- without the GIN indexes ({', '.join(gin)}): {timed(drop_gin):.3f}",
             f"- without them and without the generated tsvector: "
             f"{timed(drop_gin + ['ALTER TABLE files DROP COLUMN search_doc']):.3f}",
             "", "EXPLAIN (ANALYZE, BUFFERS) of it (rolled back):", *plan]
    return "\n".join(lines)


def pg_document_seconds(engine: Engine) -> float:
    """Seconds Postgres takes to build the full-text document (tsvector) of every file.

    Part of a bulk load's INSERT (the generated column); measured alone here to
    say how much of it is English word splitting and stemming.
    """
    with engine.connect() as conn:
        t = time.perf_counter()
        conn.execute(text("SELECT sum(length(memagent_search_doc(path, content)::text)) FROM files"))
        spent = time.perf_counter() - t
        conn.rollback()
    return spent
