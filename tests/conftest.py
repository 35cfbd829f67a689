"""Shared fixtures: an isolated data directory, and stores on SQLite and Postgres.

``store`` is parametrized over both databases. Postgres needs a server:
``MEMAGENT_TEST_PG_URL`` (``scripts/test`` starts a throwaway one). Without it the
Postgres cases are skipped locally, but under CI (``CI=true``) they fail, so CI can
never pass without exercising Postgres.

The modules in ``PGBOUNCER_MODULES`` run their ``store``/``backend_url`` tests a third
time, ``[pgbouncer]``: the same fresh Postgres database reached through a PgBouncer in
transaction pooling mode (``MEMAGENT_TEST_PGBOUNCER_URL``; ``scripts/test`` starts a
throwaway one), skipped without it locally and failing without it under CI, as
Postgres does. ``MEMAGENT_TEST_PGBOUNCER=all`` runs every such test through it.

Hypothesis runs the same examples on every run and machine (profile ``memagent``):
no example database (a failure found once in a clone must not fail every later
run there; a case worth keeping becomes an explicit ``@example``), derandomized,
no deadline and no too-slow health check (a busy machine is not a bug). Each test
keeps its own example count. ``HYPOTHESIS_PROFILE=explore`` draws new random
examples instead, to look for bugs, still without a database.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from sqlalchemy.engine import make_url

from bench import pg as throwaway_pg
from bench.fake_messages_api import FakeMessagesAPI
from memagent.vfs import SqlStore, open_store

settings.register_profile(
    "memagent", database=None, derandomize=True, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", parent=settings.get_profile("memagent"), derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "memagent"))

# A suite started in the background of a non-interactive shell (`bash scripts/test &`)
# inherits SIGINT ignored, and so would every memagent it starts, which then cannot
# be stopped with Ctrl-C. The Ctrl-C tests need the default disposition: restore it
# here, in the process whose children they start.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

def pytest_report_header(config: pytest.Config) -> str:
    """The harness releases tests/interop drives, in every run's output."""
    from tests.interop.harnesses import report_line
    return report_line()


PG_URL = os.environ.get("MEMAGENT_TEST_PG_URL")
PGBOUNCER_URL = os.environ.get("MEMAGENT_TEST_PGBOUNCER_URL")
BACKENDS = ["sqlite", "postgres"]
# The store-level modules whose tests also run through PgBouncer: the store's own
# calls, the write path and its versions, ls, glob, grep and its pre-filters, search
# (words and vectors), the import path, conversation files, and memagent mcp serve's
# processes. Together they send every kind of statement the store has; the modules
# left out use a store only to stand up an agent. All of them pass through the
# bouncer (MEMAGENT_TEST_PGBOUNCER=all); this choice costs ~80 % of that time.
PGBOUNCER_MODULES = frozenset({
    "test_store", "test_write_path", "test_write_versions", "test_write_entrance",
    "test_ls_index", "test_hostile_search", "test_fastpaths", "test_regex_prefilter",
    "test_import_versions", "test_search_memory", "test_hybrid_search",
    "test_conversation_files", "test_provenance", "test_mcp_serve",
})


# The slowest modules, slowest first (worker seconds of a 2-worker run on a loaded 2-core
# machine, 2026-11-28). scripts/test hands whole modules to the workers in collection
# order (--dist loadfile --no-loadscope-reorder); starting the long ones first lets both
# workers finish together instead of one running a five-minute module alone at the end.
# Only the order depends on this list: a stale or missing name costs balance, never a test.
SLOW_FIRST = (
    "test_local_model", "test_fastpaths", "test_mcp_serve", "test_import_versions", "test_run", "test_rls", "test_eval",
    "test_mcp", "test_repl", "test_reflection", "test_export_import_cli",
    "test_provenance", "test_cli_fs", "test_hostile_search", "test_terminal_polish", "test_mcp_inspector",
    "test_store", "test_distribution", "test_scale_plans", "test_search_memory", "test_ls_index", "test_tty",
    "test_hybrid_search", "test_regex_prefilter", "test_config_paths_depth", "test_write_versions",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slow modules first (``SLOW_FIRST``), then the rest by their number of tests, most
    first (what pytest-xdist's own reordering does); tests keep their order inside a module."""
    counts: dict[str, int] = {}
    for item in items:
        counts[item.path.stem] = counts.get(item.path.stem, 0) + 1
    rank = {name: n for n, name in enumerate(SLOW_FIRST)}
    keyed = sorted(enumerate(items), key=lambda pair: (
        rank.get(pair[1].path.stem, len(rank)), -counts[pair[1].path.stem], str(pair[1].path), pair[0]))
    items[:] = [item for _, item in keyed]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The 15 costliest modules (set-up, call and tear-down of all their tests): what
    ``SLOW_FIRST`` is ordered by, and where the suite's time budget goes."""
    totals: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if isinstance(report, pytest.TestReport):
                module = report.nodeid.split("::", 1)[0]
                totals[module] = totals.get(module, 0.0) + report.duration
    if not totals:
        return
    terminalreporter.write_sep("=", f"slowest modules (worker seconds; all: {sum(totals.values()):.0f} s)")
    for module, seconds in sorted(totals.items(), key=lambda kv: -kv[1])[:15]:
        terminalreporter.write_line(f"{seconds:8.1f}s {module}")


@pytest.hookimpl(tryfirst=True)  # before the fixture's own params are applied
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Add the ``pgbouncer`` case to ``backend_url`` in the chosen modules."""
    if "backend_url" not in metafunc.fixturenames:
        return
    if any("backend_url" in str(m.args[0]) for m in metafunc.definition.iter_markers("parametrize")):
        return  # the test chose its own databases
    if os.environ.get("MEMAGENT_TEST_PGBOUNCER") == "all" or metafunc.definition.path.stem in PGBOUNCER_MODULES:
        # A mark, not metafunc.parametrize: pytest then leaves the fixture's own params out.
        metafunc.definition.add_marker(
            pytest.mark.parametrize("backend_url", [*BACKENDS, "pgbouncer"], indirect=True))


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own data directory and no stray configuration."""
    home = tmp_path / "home"
    monkeypatch.setenv("MEMAGENT_HOME", str(home))
    for var in ("MEMAGENT_DB", "MEMAGENT_AGENT", "MEMAGENT_MODEL", "MEMAGENT_ORG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MEMAGENT_USER", "tester")
    return home


def _need_pg() -> str:
    if not PG_URL:
        if os.environ.get("CI"):
            pytest.fail("MEMAGENT_TEST_PG_URL is not set; CI must test against Postgres")
        pytest.skip("no Postgres server (set MEMAGENT_TEST_PG_URL or run scripts/test)")
    return PG_URL


@contextlib.contextmanager
def _new_pg_database(prefix: str, template: str | None = None) -> Iterator[str]:
    """A new Postgres database (empty, or a copy of ``template``): its URL; dropped afterwards."""
    with throwaway_pg.database(_need_pg(), prefix, template=template) as url:
        yield url


@pytest.fixture
def fresh_pg_url() -> Iterator[str]:
    """A brand-new, empty Postgres database, dropped afterwards."""
    with _new_pg_database("t_") as url:
        yield url


@pytest.fixture(scope="session")
def migrated_pg_template() -> Iterator[str]:
    """The name of a database migrated to the newest schema, made once per test process.

    ``backend_url`` copies it (``CREATE DATABASE … TEMPLATE``) instead of migrating a
    new database for every Postgres test: the same schema, about half a second less
    each. A fresh database holds no role or grant (``db grant`` makes those per test), so
    the copy is what a migration would have made. ``fresh_pg_url`` stays empty, for the
    tests of migrations themselves.
    """
    with _new_pg_database("tmpl_") as url:
        open_store(url).close()
        yield str(make_url(url).database)


@pytest.fixture
def migrated_pg_url(migrated_pg_template: str) -> Iterator[str]:
    """A brand-new Postgres database already at the newest schema, dropped afterwards."""
    with _new_pg_database("t_", template=migrated_pg_template) as url:
        yield url


def _through_pgbouncer(pg_url: str) -> str:
    if not PGBOUNCER_URL:
        if os.environ.get("CI"):
            pytest.fail("MEMAGENT_TEST_PGBOUNCER_URL is not set; CI must test through PgBouncer")
        pytest.skip("no PgBouncer (set MEMAGENT_TEST_PGBOUNCER_URL or run scripts/test)")
    database = make_url(pg_url).database
    return make_url(PGBOUNCER_URL).set(database=database).render_as_string(hide_password=False)


@pytest.fixture
def fresh_pgbouncer_url(fresh_pg_url: str) -> str:
    """``fresh_pg_url``'s database, reached through the transaction-pooling PgBouncer."""
    return _through_pgbouncer(fresh_pg_url)


@pytest.fixture(scope="session")
def migrated_sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to the newest schema, made once per test process.

    ``backend_url`` copies it: migrating a new file costs 0.4-0.6 s, the copy 0.02 s. The
    store closed it, so the copy is the whole database (no write-ahead log beside it).
    """
    path = tmp_path_factory.mktemp("template") / "memagent.db"
    open_store(f"sqlite:///{path}").close()
    return path


def _url_of(backend: str, request: pytest.FixtureRequest, tmp_path: Path, *, migrated: bool = False) -> str:
    """A new database of ``backend``: empty, or (``migrated``) at the newest schema."""
    if backend == "sqlite":
        path = tmp_path / "memagent.db"
        if migrated:
            shutil.copyfile(request.getfixturevalue("migrated_sqlite_template"), path)
        return f"sqlite:///{path}"
    pg_url = str(request.getfixturevalue("migrated_pg_url" if migrated else "fresh_pg_url"))
    return _through_pgbouncer(pg_url) if backend == "pgbouncer" else pg_url


@pytest.fixture
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database URL of the requested backend (indirect parametrization)."""
    return _url_of(getattr(request, "param", "sqlite"), request, tmp_path)


@pytest.fixture(params=BACKENDS)
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new database of each backend, as memagent leaves it after its first start: a copy
    of ``migrated_sqlite_template`` or ``migrated_pg_template``."""
    return _url_of(request.param, request, tmp_path, migrated=True)


@pytest.fixture
def store(backend_url: str) -> Iterator[SqlStore]:
    s = open_store(backend_url)
    s.create_agent("a")
    yield s
    s.close()


@pytest.fixture
def chat_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """For tests that run ``memagent`` as a subprocess, which inherits this environment:
    keep this machine's credentials, editor and colours out of it."""
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_PROFILE",
                "ANTHROPIC_CONFIG_DIR", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OLLAMA_HOST", "MEMAGENT_MODEL",
                "MEMAGENT_STREAM", "EDITOR", "VISUAL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "userhome"))
    monkeypatch.setenv("NO_COLOR", "1")


@pytest.fixture
def api() -> Iterator[FakeMessagesAPI]:
    """A local Messages API server (tests that need other settings define their own ``api``)."""
    with FakeMessagesAPI() as server:
        yield server
