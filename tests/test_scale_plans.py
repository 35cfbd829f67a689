"""Per-agent calls read only their agent's rows: query plans on a database of many agents.

Issue 30: with 1,000 agents in one database, a per-agent call must cost what it costs
on a database holding that agent alone, so no plan may read other agents' rows. These
tests fill a real SQLite and a real Postgres database with a few hundred agents
(``bench.scale.fill``: the store's own bulk API, so triggers, directory counts and
full-text documents are the store's), ANALYZE it, run each per-agent call once while
capturing its SQL, and ``EXPLAIN`` every statement (``bench.scale.plans``, the same
capture the scale bench reports).

- Every statement of ls, read_file, glob, history, write_file and edit_file must be
  answered through an index led by the scope (or by a file's id, reached from one),
  with no sequential scan of a table holding agents' rows. Dropping the scope index
  must make the check fail (``test_the_check_fails_without_the_scope_index``).
- grep and ranked search read only the agent's entries of their indexes: on Postgres
  the GIN indexes keyed by scope first (migration 0011), on SQLite the scope's rowid
  block in its bucket of FTS5 tables (0012).

No timing is asserted (the ratios are ``python -m bench --agents 1000``'s).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from bench import scale
from memagent.vfs import SqlStore, open_store
from memagent.vfs.paths import scope_name

AGENTS = 300
PER_AGENT = 20
SCOPE_LED = {"ls /", "ls /knowledge", 'glob("skills/*.md")', "read_file 4 KB", "history of a file",
             "write_file 4 KB (validated, revision)", "edit_file 4 KB (validated, revision)"}
GLOBAL = {"grep rare literal, files", "grep common word, files", "search lexical, question"}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def many(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlStore]:
    """A database of AGENTS agents x PER_AGENT files, ANALYZEd (built once per backend)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('scale') / 'many.db'}"
        cm = None
    else:
        cm = _fresh_pg()
        url = next(cm)
    store = open_store(url)
    scale.fill(store, scale.pool(7, size=60), AGENTS, PER_AGENT, seed=7)
    try:
        yield store
    finally:
        store.close()
        if cm is not None:
            next(cm, None)


def _fresh_pg() -> Iterator[str]:
    from bench import pg
    from tests.conftest import _need_pg

    with pg.database(_need_pg(), "t_scale_") as url:
        yield url


def _calls(store: SqlStore) -> dict[str, scale.Fn]:
    named = scale.calls(store, hybrid=False)
    # The bench names ls of its first topic folder; any knowledge folder is the same call.
    topic = next(k for k in named if k.startswith("ls /knowledge"))
    named["ls /knowledge"] = named.pop(topic)
    return named


def _plans_of(store: SqlStore, wanted: set[str]) -> list[scale.Plan]:
    named = _calls(store)
    missing = wanted - set(named)
    assert not missing, f"the bench no longer has these calls: {missing}"
    return scale.plans(store, {k: named[k] for k in sorted(wanted)})


def _unscoped(found: list[scale.Plan]) -> list[str]:
    """Statements that read other agents' rows, or that no index answers at all."""
    out = [f"{p.call}: {p.problem}\n  {p.sql.strip()[:200]}\n{p.plan}" for p in found if p.scans]
    out += [f"{p.call}: no index used\n  {p.sql.strip()[:200]}\n{p.plan}" for p in found
            if not p.indexes and not p.scans and _reads(p.sql)]
    return out


_READS_FILES = re.compile(r"\b(?:FROM|JOIN)\s+files\b", re.IGNORECASE)


def _reads(sql: str) -> bool:
    """Whether a statement reads rows of ``files`` (an ``INSERT ... VALUES`` reads none;
    ``to_regclass('files')`` or ``gin_clean_pending_list`` read the catalog only)."""
    head = sql.lstrip().upper()
    if head.startswith("INSERT") and " SELECT " not in f" {head} ":
        return False
    return _READS_FILES.search(sql) is not None


def test_the_measured_agent_is_one_of_many(many: SqlStore) -> None:
    agents = many.list_agents()
    assert len(agents) == AGENTS and scale.MEASURED in agents
    assert len(many.glob(scale.SCOPE, "**")) == PER_AGENT


def test_per_agent_calls_read_only_their_agents_rows(many: SqlStore) -> None:
    found = _plans_of(many, SCOPE_LED)
    assert {p.call for p in found} == SCOPE_LED, "every call must have run SQL that was explained"
    bad = _unscoped(found)
    assert not bad, "\n\n".join(bad)
    used = {i for p in found for i in p.indexes}
    # The scope-led indexes these calls are answered by (named in the closing note).
    assert "ix_files_listing" in used and "ix_dirs_children" in used


@pytest.mark.parametrize("call", sorted(GLOBAL))
def test_grep_and_search_read_only_their_agents_rows(many: SqlStore, call: str) -> None:
    """Postgres: the GIN indexes are keyed by scope first (migration 0011) and grep and
    search name that key, so only the agent's entries of each word are read. SQLite:
    the FTS5 tables are read in the scope's own rowid range of its bucket (0012)."""
    found = _plans_of(many, {call})
    bad = _unscoped(found)
    assert not bad, "\n\n".join(bad)
    if many.engine.dialect.name == "postgresql":
        index = "ix_files_search_doc" if call.startswith("search") else "ix_files_content_trgm"
    else:
        index = "files_search" if call.startswith("search") else "files_fts"
    assert index in {i for p in found for i in p.indexes}, [p.plan for p in found]


def test_sqlite_agents_fill_buckets_of_tables(many: SqlStore) -> None:
    """300 agents x 20 files are more than one bucket holds: later agents' entries are in
    bucket tables of their own, and every agent's grep and search still find its files."""
    if many.engine.dialect.name != "sqlite":
        pytest.skip("SQLite's buckets (Postgres keys its GIN indexes by scope instead)")
    from memagent.vfs.backends import sqlite_fts

    with many.engine.connect() as conn:
        buckets = dict(conn.execute(text("SELECT bucket, count(*) FROM fts_scopes GROUP BY bucket")).all())
        names = set(conn.scalars(text("SELECT name FROM sqlite_master WHERE type = 'table'")))
    assert len(buckets) >= 2 and sum(buckets.values()) >= AGENTS
    assert {"files_fts_1", "files_search_1"} <= names
    # Each bucket holds about BUCKET_FILES files: the scopes' counts, not the agents'.
    assert max(buckets.values()) * PER_AGENT <= sqlite_fts.BUCKET_FILES + PER_AGENT * 3
    for number in (0, AGENTS - 1):
        scope = scope_name("agent", scale.agent_name(number))
        files = many.glob(scope, "**")
        some = many.read(scope, files[3]).content.split()[5]
        assert files[3] in many.grep(scope, some, fixed_strings=True).files


def test_the_check_fails_without_the_scope_index(many: SqlStore) -> None:
    """Without the scope indexes (dropped in a transaction rolled back) the check sees the scans."""
    dialect = many.engine.dialect.name
    if dialect == "postgresql":
        with many.engine.connect() as conn:
            conn.execute(text("DROP INDEX ix_files_listing"))
            conn.execute(text("DROP INDEX ix_dirs_children"))
            # Migration 0011's GIN indexes lead with the scope too.
            conn.execute(text("DROP INDEX IF EXISTS ix_files_content_trgm"))
            conn.execute(text("DROP INDEX IF EXISTS ix_files_search_doc"))
            conn.execute(text("ALTER TABLE files DROP CONSTRAINT uq_files_scope_path"))
            conn.execute(text("ALTER TABLE dirs DROP CONSTRAINT pk_dirs"))
            plan = scale.explain(conn, scale.HEAD_SQL.format(p="%s"), (scale.SCOPE, scale.READ_PATH))
            ls_plan = scale.explain(conn, "SELECT path, files FROM dirs WHERE scope = %s AND depth = 1",
                                    (scale.SCOPE,))
            conn.rollback()
    else:
        # SQLite cannot drop the unique constraint's automatic index; NOT INDEXED plans
        # the same statements as if no index on the table existed.
        with many.engine.connect() as conn:
            plan = scale.explain(conn, scale.HEAD_SQL.format(p="?").replace("FROM files", "FROM files NOT INDEXED"),
                                 (scale.SCOPE, scale.READ_PATH))
            ls_plan = scale.explain(conn, "SELECT path, files FROM dirs NOT INDEXED WHERE scope = ? AND depth = 1",
                                    (scale.SCOPE,))
    for call, p in (("read_file", plan), ("ls", ls_plan)):
        got = scale.read_plan(call, "", p, dialect)
        assert got.scans and not got.indexes, p


def test_semantic_search_scores_only_the_agents_own_vectors(many: SqlStore, tmp_path: Path) -> None:
    """Vector search on many agents answers what a database of the agent alone answers."""
    many.vectors.use(scale.HashEmbedder())
    single = open_store(f"sqlite:///{tmp_path / 'single.db'}")
    try:
        single.vectors.use(scale.HashEmbedder())
        scale.fill(single, scale.pool(7, size=60), 1, PER_AGENT, seed=7)
        query = "how do we handle the zephyr deploys?"
        # Every file (the other tests of the module may have added bench-*.md to the
        # many-agent database only: those are left out of the comparison).
        got = [h for h in many.search([scale.SCOPE], query, mode="semantic", k=100)
               if not h.path.startswith("/knowledge/bench-")]
        alone = single.search([scale.SCOPE], query, mode="semantic", k=100)
        assert alone
        assert [h.path for h in got] == [h.path for h in alone]
        assert np.allclose([h.score for h in got], [h.score for h in alone])
        other = scope_name("agent", scale.agent_name(0))
        assert {h.scope for h in many.search([scale.SCOPE, other], query, mode="semantic", k=50)} == {
            scale.SCOPE, other}
    finally:
        single.close()


def test_the_check_tells_a_scoped_fts5_read_from_a_whole_one() -> None:
    """SQLite: an FTS5 MATCH in a rowid range is the scope's block; without one, the bucket's."""
    scoped = scale.read_plan("grep", "", "SCAN files_fts_2 VIRTUAL TABLE INDEX 0:M1><", "sqlite")
    whole = scale.read_plan("grep", "", "SCAN files_fts VIRTUAL TABLE INDEX 0:M1", "sqlite")
    assert scoped.indexes == ["files_fts"] and not scoped.scans
    assert whole.scans and "files_fts" in whole.scans[0]
