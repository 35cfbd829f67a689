"""Nothing memagent sends depends on a server session outliving its transaction.

A transaction-pooling PgBouncer gives each transaction whichever server session is
free, so session state breaks there: prepared statements, session advisory locks,
``SET`` without ``LOCAL``, ``LISTEN``, temporary tables. These tests read every SQL
string literal in the product code for those, and check that psycopg's automatic
prepared statements are on only on a connection proven to reach the server itself.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from memagent.vfs import db
from memagent.vfs.backends import postgres

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("vfs", "agent", "integrations")
# Session state a pooler in transaction mode breaks, as SQL text (statements are
# matched in capitals, as the code writes SQL, so prose such as "set replace_all" passes).
SESSION_STATE = {
    "a session advisory lock (use pg_advisory_xact_lock)": re.compile(r"pg_(try_)?advisory_lock(_shared)?\s*\(", re.I),
    "SET without LOCAL (use SET LOCAL)": re.compile(r"^\s*SET\s+(?!LOCAL\b|TRANSACTION\b|CONSTRAINTS\b)\w"),
    "LISTEN/UNLISTEN": re.compile(r"^\s*(UN)?LISTEN\b"),
    "a named prepared statement": re.compile(r"^\s*(PREPARE|DEALLOCATE)\s"),
    "a temporary table": re.compile(r"CREATE\s+(GLOBAL\s+|LOCAL\s+)?TEMP(ORARY)?\s+TABLE", re.I),
}

# Session state sent only on a line proven to reach the server itself, as automatic
# prepared statements are (below): the lock timeout a direct session sets once
# (vfs/backends/postgres.py engine_setup; through a pooler it is SET LOCAL per
# transaction). tests/test_tenant_locks.py checks that none reaches PgBouncer.
DIRECT_LINE_ONLY = {("vfs/backends/postgres.py", "SET lock_timeout = X")}


def _sql_strings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[tuple[int, str]] = []
    parts = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
            out.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "X"
                           for v in node.values)
            out.append((node.lineno, text))
    return out


def session_state_uses(roots: list[Path]) -> list[str]:
    found = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if "migrations" in path.parts:
                continue  # run once by the owner, inside one transaction
            for line, text in _sql_strings(path):
                if (str(path.relative_to(root.parent)), text) in DIRECT_LINE_ONLY:
                    continue
                for what, pattern in SESSION_STATE.items():
                    if pattern.search(text):
                        found.append(f"{path.relative_to(root.parent)}:{line}: {what}")
    return found


def test_product_sql_holds_no_session_state() -> None:
    assert session_state_uses([ROOT / p for p in PRODUCT]) == []


def test_the_scan_finds_session_state(tmp_path: Path) -> None:
    # The scan can fail: each kind of session state, as code would spell it, is found.
    bad = tmp_path / "bad.py"
    bad.write_text(
        'A = "SELECT pg_advisory_lock(:key)"\n'
        'B = "SET statement_timeout = 5"\n'
        "C = f\"SET lock_timeout = '{5}s'\"\n"
        'D = "LISTEN memagent"\n'
        'E = "PREPARE q AS SELECT 1"\n'
        'F = "CREATE TEMP TABLE t (i int)"\n'
        'G = "SET LOCAL statement_timeout = 5"\n'
        'H = "SELECT pg_advisory_xact_lock(1)"\n', encoding="utf-8")
    found = session_state_uses([tmp_path])
    assert [f.split(": ", 1)[1] for f in found] == [
        "a session advisory lock (use pg_advisory_xact_lock)", "SET without LOCAL (use SET LOCAL)",
        "SET without LOCAL (use SET LOCAL)", "LISTEN/UNLISTEN", "a named prepared statement",
        "a temporary table"]


def _threshold(url: str) -> object:
    engine = db.connect(url)
    try:
        with engine.connect() as conn:
            return conn.connection.dbapi_connection.prepare_threshold  # type: ignore[union-attr]
    finally:
        engine.dispose()


def test_statements_are_prepared_only_on_a_direct_line(fresh_pg_url: str) -> None:
    # Straight to the server over TCP: psycopg's automatic preparing is on (it saves
    # planning on every repeated query).
    assert _threshold(fresh_pg_url) == postgres.PREPARE_THRESHOLD
    bouncer = os.environ.get("MEMAGENT_TEST_PGBOUNCER_URL")
    if not bouncer:
        if os.environ.get("CI"):
            pytest.fail("MEMAGENT_TEST_PGBOUNCER_URL is not set; CI runs PgBouncer (scripts/test)")
        pytest.skip("no PgBouncer (set MEMAGENT_TEST_PGBOUNCER_URL or run scripts/test)")
    # The same database through PgBouncer: the server reports another port, so nothing
    # is prepared (a prepared statement would be missing on the next transaction's session).
    via = make_url(bouncer).set(database=make_url(fresh_pg_url).database)
    assert _threshold(via.render_as_string(hide_password=False)) is None
