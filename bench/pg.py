"""Throwaway Postgres databases for the benchmarks and the tests: one helper, not a copy each.

``database(server_url, prefix)`` creates a database with a random name on the server
``server_url`` points at, yields its URL (same user, host and options) and drops it
afterwards, ``WITH (FORCE)`` so a connection a benchmark or test left open cannot keep
it. ``template`` copies an existing database (``CREATE DATABASE ... TEMPLATE``);
``keep`` names it exactly ``prefix`` and leaves it for the next run (reused if it is
there). The server itself is ``scripts/pg-throwaway``'s, or any the caller names.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url


@contextmanager
def database(server_url: str, prefix: str, *, template: str | None = None, keep: bool = False) -> Iterator[str]:
    """A new database on ``server_url``'s server: its URL, dropped afterwards unless ``keep``."""
    name = prefix if keep else prefix + uuid.uuid4().hex[:10]
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            there = keep and conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first()
            if not there:
                copy = f' TEMPLATE "{template}"' if template else ""
                conn.execute(text(f'CREATE DATABASE "{name}"{copy}'))
        try:
            yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
        finally:
            if not keep:
                with admin.connect() as conn:
                    conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()
