"""Many sessions writing one Postgres database at once lose and duplicate nothing.

The harness of ``bench/concurrency.py``, small: 8 OS processes started behind one
barrier, each making a fixed number of tool calls through the real tool layer on its
own agent and on two shared ones (reads, ls, glob, grep, search, and edits and writes
at the version read), directly and through PgBouncer in transaction pooling mode.
Every acknowledged write must then be in the revisions table exactly once, with its
own content, and nothing else: versions 1..n per file without gaps. Conflicts on the
shared files (another process wrote first) are expected and not errors; anything
else refused or raised is. The test waits on the processes' exit; nothing is timed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from bench import concurrency
from memagent.vfs import open_store
from memagent.vfs.paths import scope_name


@pytest.mark.parametrize("route", ["postgres", "pgbouncer"])
def test_concurrent_sessions_lose_nothing_and_duplicate_nothing(
        route: str, fresh_pg_url: str, request: pytest.FixtureRequest) -> None:
    worker_url = fresh_pg_url if route == "postgres" else request.getfixturevalue("fresh_pgbouncer_url")
    run = concurrency.run(route, fresh_pg_url, worker_url, procs=8, ops=40, shared=2, files=4)
    assert run.errors == []
    assert run.problems == []
    # Every process ran all its calls, and every kind of call was made.
    assert run.calls >= 8 * 40
    assert all(run.latencies(kind) for kind in concurrency.KINDS)
    assert run.acks > 0
    assert run.revisions == run.acks + (8 + 2) * 4  # the writes told they succeeded, plus the seed


def test_verification_names_lost_duplicated_and_unacknowledged_revisions(fresh_pg_url: str) -> None:
    acks = concurrency.seed(fresh_pg_url, procs=1, shared=1, files=2, seed_=7)
    agents = [concurrency.own_agent(0), concurrency.shared_agent(0)]
    assert concurrency.verify(fresh_pg_url, agents, acks) == ([], 4)

    own = scope_name("agent", "proc-0")
    with open_store(fresh_pg_url) as store:
        store.write(own, "/notes/n0.md", "# /notes/n0.md\nwritten by [p0-1]\n", expected_version=1)
        store.write(own, "/notes/n1.md", "# /notes/n1.md\nwritten by [p0-2]\n", expected_version=1)
    told = [*acks,
            ("proc-0", "/notes/n0.md", 2, "[p0-1]"),  # stored as told
            ("proc-0", "/notes/n0.md", 2, "[p0-9]"),  # the same version told to a second writer
            ("proc-0", "/notes/n1.md", 2, "[p0-3]"),  # told, but another write's content is there
            ("shared-0", "/notes/n0.md", 2, "[p0-4]")]  # told, never stored
    problems, revisions = concurrency.verify(fresh_pg_url, agents, told)
    assert revisions == 6
    assert sorted(p.split(":")[0] for p in problems) == ["duplicated", "lost", "lost"]
    assert any("[p0-9]" in p for p in problems) and any("[p0-3]" in p for p in problems)
    assert any("shared-0" in p and "not stored" in p for p in problems)

    # A stored revision nobody was told about.
    problems, _ = concurrency.verify(fresh_pg_url, agents, acks + [("proc-0", "/notes/n0.md", 2, "[p0-1]")])
    assert problems == ["unacknowledged: proc-0:/notes/n1.md version 2 stored but nobody was told"]


def test_the_command_without_a_server_is_a_usage_mistake(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("MEMAGENT_BENCH_PG_URL", raising=False)
    assert concurrency.main(["--procs", "2", "--out", "-"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--pg URL" in err


def test_the_throwaway_pgbouncer_serves_any_database_pools_transactions_and_stops_on_exit(
        fresh_pg_url: str) -> None:
    """scripts/pgbouncer-throwaway, as scripts/test sources it: a fresh database is reachable
    through it under its own name, it pools transactions, and the shell's exit stops it
    and still runs the EXIT trap that was set before (pg-throwaway's)."""
    if shutil.which("pgbouncer") is None and not Path("/usr/sbin/pgbouncer").exists():
        if os.environ.get("CI"):
            pytest.fail("pgbouncer is not installed; scripts/test installs it in CI")
        pytest.skip("pgbouncer is not installed (scripts/test installs it)")
    repo = Path(__file__).resolve().parents[1]
    probe = ("import sys; from sqlalchemy import create_engine, text; "
             "e = create_engine(sys.argv[1]); c = e.connect(); "
             "print('DB', c.execute(text('SELECT current_database()')).scalar())")
    script = (
        'before() { echo "earlier trap ran"; }; trap before EXIT\n'
        "source scripts/pgbouncer-throwaway\n"
        'echo "DIR $pgb_dir"; grep "^pool_mode" "$pgb_dir/pgbouncer.ini"\n'
        f'"{sys.executable}" -c "{probe}" "$MEMAGENT_TEST_PGBOUNCER_URL"\n')
    env = {k: v for k, v in os.environ.items() if k != "MEMAGENT_TEST_PGBOUNCER_URL"}
    env["MEMAGENT_TEST_PG_URL"] = fresh_pg_url
    done = subprocess.run(["bash", "-c", script], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert f"DB {make_url(fresh_pg_url).database}" in out
    assert "pool_mode = transaction" in out
    assert out[-1] == "earlier trap ran"
    folder = next(line[4:] for line in out if line.startswith("DIR "))
    assert not Path(folder).exists()  # stopped, and its files removed
