"""Postgres: the statements and settings only Postgres understands.

Invariants: nothing here leaves session state a transaction-pooling PgBouncer would
break (every ``SET`` is ``LOCAL`` but the lock timeout a session proven direct to the
server sets once, ``engine_setup``; the migration lock is transaction-scoped); no wait
for a lock outlasts the lock timeout (``postgres_roles.lock_timeout_ms``); single
statements that are atomic by themselves (a read, an overwrite, a thread's message)
run in autocommit, saving the BEGIN and COMMIT round trips; the GIN indexes of
``files`` keep a pending list (migration 0007) that ``merge_pending`` empties.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Select,
    bindparam,
    cast,
    create_engine,
    event,
    insert,
    literal_column,
    select,
    text,
)
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError

from memagent.vfs.backends import postgres_roles
from memagent.vfs.backends.base import (
    REVISION_VALUES,
    UPDATE_LIVE,
    Features,
    PrefilterQuery,
    RankIndex,
    RankRow,
    in_scopes,
    raw_fetch_one,
)
from memagent.vfs.models import files, revisions, threads
from memagent.vfs.types import Entry

_HEAD_SQL = "SELECT content, version, deleted FROM files WHERE scope = %s AND path = %s"

# An overwrite as one statement (the UPDATE a CTE the revision INSERT reads): one
# round trip, and, being one statement, atomic without BEGIN and COMMIT
# (``SqlStore.commit`` runs it in autocommit). No row back: the file was not at the
# expected version, and the revision INSERT inserted nothing either.
_UPDATED = UPDATE_LIVE.cte("updated")
_OVERWRITE = (
    insert(revisions)
    .from_select(["file_id", "version", *REVISION_VALUES], select(
        _UPDATED.c.id, _UPDATED.c.version,
        *(cast(bindparam(f"r_{c}"), revisions.c[c].type) for c in REVISION_VALUES)))
    .returning(revisions.c.version)
)

# ls as one statement. The gaps between the child directories' ranges come from the
# directories themselves (each gap ends where the next directory's range begins and
# starts past the previous one's), and each gap is one range of the listing index.
_LS = text("""
WITH d AS (
  SELECT path, files FROM dirs WHERE scope = :scope AND depth = :depth AND path >= :lo AND path < :hi),
b AS (
  SELECT (path || '/') COLLATE "C" AS below, (path || '0') COLLATE "C" AS past FROM d),
g AS (
  SELECT coalesce(lag(past) OVER (ORDER BY below), CAST(:lo AS text) COLLATE "C") AS g_lo, below AS g_hi FROM b
  UNION ALL
  SELECT coalesce((SELECT past FROM b ORDER BY below DESC LIMIT 1), CAST(:lo AS text) COLLATE "C"),
         CAST(:hi AS text) COLLATE "C")
SELECT path, files AS n, true AS dir FROM d
UNION ALL
SELECT f.path, f.size, false FROM g CROSS JOIN LATERAL (
  SELECT path, size FROM files
  WHERE scope = :scope AND path >= g.g_lo AND path < g.g_hi AND deleted = false) AS f
""")

# Every GIN index of ``files``, looked up each time: a large bulk load drops and
# re-creates them (new OIDs), and a database without pg_trgm has only one.
_MERGE = text(
    "SELECT gin_clean_pending_list(c.oid) FROM pg_index i "
    "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
    "WHERE i.indrelid = to_regclass('files') AND a.amname = 'gin'"
)
# What ``search`` waits for: only the full-text index it reads (merging a list costs
# milliseconds per index even for one write's entries; grep's trigram list waits
# for the thread).
_MERGE_SEARCH = text("SELECT gin_clean_pending_list(to_regclass('ix_files_search_doc'))")

# A batch at least this large, and at least half the size of the table, drops the
# GIN indexes of ``files`` and builds them again after the insert.
GIN_REBUILD_MIN = 2000  # the default of ``bulk_upkeep``'s ``rebuild_min``


# Ranked search: ts_rank over ``files.search_doc`` (migration 0005).
# Postgres ranks a bounded candidate set. ts_rank must read each ranked row's tsvector,
# which for a file of a few KB lives out of line (TOAST): ~10 us a row, so ranking the
# 3,000 files a common word matches took ~40 ms. The GIN index alone tells which
# files hold which query word without reading any tsvector, so stage one picks the
# PG_CANDIDATES files with the best estimate of ts_rank from what is cheap (how many
# query words a file holds, which of them its path holds, its size: ts_rank with
# every word counted once), and stage two computes the exact ts_rank of those only.
# When no more than PG_CANDIDATES files match, every match is a candidate and the
# ranking is exact; past that, a file that only repeats a word more often than its
# rivals can be missed (bench/RESULTS.md gives how often on the bench corpus).
# Each word's tsquery is written out (not taken from a subquery) so that the planner
# sees a condition the GIN index on search_doc can answer. The estimate is float8
# arithmetic: numeric's ln() alone cost ~10 us a file.
#
# Each word's hits are asked with the scopes, so that the GIN index (migration 0011:
# its first key is ``'' || scope``, written the same way here) walks only the searched
# scopes' entries of that word: at 1,000 agents a common word's hits are 30,000
# files, of which one agent's are 30 (29 ms against 1 ms a search). A user's role
# under row-level security cannot use that expression before the policy (``||`` is
# not leakproof), so it names the bare column, which the (scope, path) b-tree
# answers: each of the scope's files is then read and re-checked (fine for an
# agent's hundreds of files; the owner's plan is the one that scales).
_PG_HITS = """
SELECT f.id, f.deleted, f.size,
       CASE WHEN f.path ILIKE :p{i} THEN {path_weight}::float8 ELSE 1.0::float8 END AS w
FROM files AS f
WHERE {scope} IN ({scopes}) AND f.search_doc @@ plainto_tsquery('english', :w{i})
"""
_PG_SCOPE_KEY = "('' || f.scope::text)"  # ix_files_search_doc's first key (0011)
_PG_SCOPE_COLUMN = "f.scope"

# One word needs no grouping: each match is one row.
_PG_CANDIDATES_ONE = ("SELECT id FROM hits WHERE deleted = false "
                      "ORDER BY w / ln(size + 2.0::float8) DESC, id LIMIT :n")
_PG_CANDIDATES_MANY = ("SELECT id FROM hits WHERE deleted = false "
                       "GROUP BY id, size ORDER BY sum(w) / ln(size + 2.0::float8) DESC, id LIMIT :n")

# OFFSET 0 keeps the candidates' own tests out of the GIN scans (no condition is
# pushed into a subquery with an OFFSET): on a table without statistics (just
# imported) the planner otherwise reached the rows through a b-tree and tested each
# tsvector, ~100 ms at 2,000 files. (MATERIALIZED does the same but copies rows.)
_POSTGRES = """
WITH hits AS (SELECT * FROM ({hits}) AS u OFFSET 0),
cand AS ({candidates})
SELECT f.scope, f.path, f.version, f.content, ts_rank(f.search_doc, {query}, 1) AS score
FROM files AS f
WHERE f.id = ANY(ARRAY(SELECT id FROM cand))
ORDER BY score DESC, f.path, f.scope
LIMIT :k
"""
# A word in the path weighs A (1.0) in search_doc against B (0.4) in the text; ts_rank
# gives such a word ~2.5 times a text word's share, and the estimate does the same.
_PG_PATH_WEIGHT = 2.5
PG_CANDIDATES = 200
# A ranked search is stopped after this long (it never should need it).
RANK_TIMEOUT_MS = 5000


# psycopg's default: a query is prepared on its fifth run on a connection.
PREPARE_THRESHOLD = 5


def _connect_args(parsed: URL) -> dict[str, Any]:
    # Unprepared until proven direct (``_prepare_only_when_direct``): a transaction-
    # pooling PgBouncer may run the next transaction on another server session.
    args: dict[str, Any] = {"prepare_threshold": None}
    if "connect_timeout" not in parsed.query:
        args["connect_timeout"] = 10
    return args


def _prepare_only_when_direct(engine: Engine) -> None:
    """Let psycopg prepare statements on connections proven to reach the server itself.

    Prepared statements save planning on every repeated query (read 0.21 -> 0.26 ms
    and ls 0.75 -> 1.05 ms without them), but a transaction-pooling PgBouncer runs
    each transaction on any server session, where a statement prepared on another
    one does not exist. Connections start unprepared (``_connect_args``); this turns
    preparing on only when the line is proven direct.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        if _direct_to_server(dbapi_conn):
            dbapi_conn.prepare_threshold = PREPARE_THRESHOLD


def _direct_to_server(dbapi_conn: Any) -> bool:
    info = dbapi_conn.info
    peer, port = getattr(info, "hostaddr", ""), getattr(info, "port", None)
    if not peer:
        return False  # a Unix socket: a pooler may listen on one too
    cur = dbapi_conn.cursor()
    try:
        cur.execute("SELECT host(inet_server_addr()), inet_server_port()")
        row = cur.fetchone()
    finally:
        cur.close()
        dbapi_conn.rollback()
    if not row or row[0] is None or row[1] != port:
        return False
    try:
        return bool(ipaddress.ip_address(row[0]) == ipaddress.ip_address(peer))
    except ValueError:
        return False


def pg_condition(pg_pattern: str) -> ColumnElement[bool]:
    # Inline (literal_execute), as grep/fts.py does for LIKE: a generic plan with a bound
    # parameter could not let pg_trgm read the regex.
    return files.c.content.bool_op("~")(bindparam(None, pg_pattern, literal_execute=True))


# pg_trgm extracts no trigram from a pattern that can match the empty string: the
# plan of that is a full index scan, the yardstick for "the index does not narrow".
_FULL_SCAN = "(?n)"


def _bitmap_cost(conn: Connection, pg_pattern: str) -> float:
    query: Select[Any] = select(literal_column("1")).select_from(files).where(pg_condition(pg_pattern))
    sql = str(query.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
    plan = conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + sql).scalar_one()
    if isinstance(plan, str):
        plan = json.loads(plan)
    return float(plan[0]["Plan"]["Total Cost"])


def pg_index_narrows(conn: Connection, pg_pattern: str) -> bool:
    """True if pg_trgm's index can narrow ``content ~ pg_pattern``.

    pg_trgm reads trigrams out of many regexes (``[0-9]{3}-[0-9]{4}``: 14 ms instead
    of a 300 ms scan at 10,000 files) but not all (``[0-9]{5}``); forcing the index
    then costs a full index scan on top of reading every file. Ask the planner,
    in a savepoint so that neither the setting nor an error (Postgres refusing the
    pattern) outlives the question.
    """
    try:
        with conn.begin_nested() as probe:
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
            narrows = _bitmap_cost(conn, pg_pattern) < 0.5 * _bitmap_cost(conn, _FULL_SCAN)
            probe.rollback()
    except DBAPIError:
        return False
    return narrows


class PostgresBackend:
    """``Backend`` for Postgres (the psycopg 3 driver)."""

    name: Literal["postgresql"] = "postgresql"
    read_options: Mapping[str, Any] = {"isolation_level": "AUTOCOMMIT"}
    atomic_overwrite = True
    pending_shared = False
    sql_false = "false"

    drops_connections = True

    def create_engine(self, parsed: URL, url: str) -> Engine:
        # LIFO: the connection used last is used next, so a burst of calls runs on one
        # connection whose server process has its catalog caches warm (FIFO rotated
        # through every pooled one, each cold: ls took 3 ms instead of 1).
        engine = create_engine(self.engine_url(parsed, url), connect_args=_connect_args(parsed),
                               pool_use_lifo=True)
        _prepare_only_when_direct(engine)
        self.engine_setup(engine)  # the lock timeout; after the direct-line proof above
        # A role's row-level-security refusal becomes one VfsError line (migration 0010).
        postgres_roles.explain_refusals(engine)
        return engine

    def missing_database(self, parsed: URL) -> str | None:
        return None  # a server database that is missing fails when it is opened

    def engine_url(self, parsed: URL, url: str) -> str:
        if parsed.drivername == "postgresql":
            # Plain postgresql:// would pick psycopg2, which we do not ship.
            return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
        return url

    def engine_setup(self, engine: Engine) -> None:
        """Bound every wait for a lock (``lock_timeout``): a writing tenant may lock a table.

        Connection arguments and pool checks are vfs/db.py's (URL-driven); it calls this
        after its own ``connect`` listeners, so a line proven direct to the server is
        known here (``postgres_roles.sets_own_timeout``). Such a session sets the
        timeout once, for its whole life. Through a transaction-pooling PgBouncer a
        session ``SET`` would land on whichever server session ran it, so each
        transaction sets it (``SET LOCAL``, on the driver: the transaction's first
        statement) and single statements in autocommit run with the role's default
        (``postgres_roles.set_role_lock_timeout``; the owner's: the database's).
        """
        ms = postgres_roles.lock_timeout_ms()  # a bad MEMAGENT_LOCK_TIMEOUT: one line, now

        @event.listens_for(engine, "connect")
        def _session(dbapi_conn: Any, _record: Any) -> None:
            if postgres_roles.sets_own_timeout(dbapi_conn):
                with dbapi_conn.cursor() as cur:
                    cur.execute(f"SET lock_timeout = {ms}")
                dbapi_conn.commit()  # a SET rolled back would be undone

        @event.listens_for(engine, "begin")
        def _transaction(conn: Connection) -> None:
            driver: Any = conn.connection.dbapi_connection
            if driver is None or driver.autocommit or postgres_roles.sets_own_timeout(driver):
                return
            with driver.cursor() as cur:  # not conn.execute: the transaction is still being begun
                cur.execute(f"SET LOCAL lock_timeout = {ms}")

    def head(self, driver: Any, scope: str, path: str) -> tuple[Any, ...] | None:
        driver.autocommit = True  # no BEGIN/ROLLBACK round trips around one SELECT
        try:
            return raw_fetch_one(driver, _HEAD_SQL, (scope, path))
        except Exception as exc:
            # Below SQLAlchemy, so explain_refusals does not see it: a lock wait given up
            # is one line here too.
            waited = postgres_roles.lock_timeout_ms() if postgres_roles.sets_own_timeout(driver) else None
            locked = postgres_roles.lock_refusal(exc, _HEAD_SQL, waited)
            if locked is not None:
                raise locked from None
            raise
        finally:
            # As the pool hands it to SQLAlchemy. Not on a dead connection: that one
            # is dropped by the caller, and setting it would raise and hide the error.
            if not (driver.closed or driver.broken):
                driver.autocommit = False

    def overwrite(self, conn: Connection, where: Mapping[str, Any], state: Mapping[str, Any],
                  revision: Mapping[str, Any]) -> int | None:
        version = conn.execute(_OVERWRITE, {**where, **state,
                                            **{f"r_{k}": v for k, v in revision.items()}}).scalar()
        return None if version is None else int(version)

    def ls_entries(self, conn: Connection, args: Mapping[str, Any], cut: int) -> list[Entry]:
        # Both steps (directories, then the files in the gaps) in one round trip.
        return [Entry(p[cut:], bool(is_dir), int(n)) for p, n, is_dir in conn.execute(_LS, args)]

    def grep_deadline(self, conn: Connection, ms: int) -> None:
        # A server-side regex (the pre-filter) cannot be stopped from the client once
        # it runs: let the server stop it at grep's deadline.
        conn.exec_driver_sql(f"SET LOCAL statement_timeout = {max(int(ms), 1)}")

    def rows_filtered(self, conn: Connection) -> bool:
        return postgres_roles.filtered(conn)

    def grep_index_only(self, conn: Connection) -> bool:
        # Postgres does not cost reading TOASTed content: on a small scope it picks a
        # scan that reads every file's text over the trigram index (17 ms instead of
        # 1 ms at 1,000 files). Rule out the sequential scan here; the caller hides
        # the b-tree columns ("|| ''", "IS NOT TRUE"), so the trigram index is the
        # only way in. Not for a user's role under row-level security (migration 0010):
        # LIKE is not leakproof, so the trigram index cannot be used before the policy
        # and the (scope, path) index must narrow instead (650 ms -> ms at 10,000 files).
        if self.rows_filtered(conn):
            return False
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        return True

    def grep_prefilter(self, conn: Connection, scope: str, features: Features,
                       query: PrefilterQuery) -> ColumnElement[bool] | None:
        # pg_trgm's GIN index answers LIKE/ILIKE, and Postgres re-checks the LIKE itself.
        return query.like() if features.pg_trgm else None

    def regex_prefilter(self, conn: Connection, features: Features, pg_pattern: str) -> ColumnElement[bool] | None:
        return pg_condition(pg_pattern) if features.pg_trgm and pg_index_narrows(conn, pg_pattern) else None

    def search_features(self, conn: Connection) -> Features:
        found = conn.execute(text(
            "SELECT 1 FROM pg_indexes WHERE tablename = 'files' AND indexname = 'ix_files_content_trgm'"
        )).first()
        return Features(self.name, pg_trgm=found is not None)

    def rank_index(self, conn: Connection) -> RankIndex:
        found = conn.exec_driver_sql(
            "SELECT 1 FROM information_schema.columns WHERE table_name = 'files' "
            "AND column_name = 'search_doc'").first()
        return "tsvector" if found else "scan"

    def rank_rows(self, conn: Connection, scopes: Sequence[str], words: Sequence[str],
                  stems: Sequence[str], k: int, *, path_weight: float) -> list[RankRow]:
        """Exact ts_rank over the ``PG_CANDIDATES`` best estimated matches (see ``_POSTGRES``)."""
        placeholders, params = in_scopes(scopes)
        scope = _PG_SCOPE_COLUMN if self.rows_filtered(conn) else _PG_SCOPE_KEY
        hits = " UNION ALL ".join(_PG_HITS.format(i=i, path_weight=_PG_PATH_WEIGHT, scope=scope,
                                                  scopes=placeholders)
                                  for i in range(len(words)))
        query_sql = " || ".join(f"plainto_tsquery('english', :w{i})" for i in range(len(words)))
        wparams: dict[str, Any] = {f"w{i}": w for i, w in enumerate(words)}
        # Words are letters and digits only (``search.lexical.terms``), so nothing in them is a
        # LIKE wildcard; ILIKE folds case (/AGENTS.md) at half the cost of lower() + LIKE.
        wparams.update({f"p{i}": f"%{stem}%" for i, stem in enumerate(stems)})
        candidates = _PG_CANDIDATES_ONE if len(words) == 1 else _PG_CANDIDATES_MANY
        sql = text(_POSTGRES.format(hits=hits, candidates=candidates, query=query_sql))
        conn.exec_driver_sql(f"SET LOCAL statement_timeout = {RANK_TIMEOUT_MS}")
        # The planner does not cost reading each row's TOASTed tsvector: for a word in
        # 30 % of an agent's files it took a sequential scan re-checking every file
        # (1,000 files: 6 ms) over the GIN index's 0.3 ms.
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        found = conn.execute(sql, {**params, **wparams, "n": max(PG_CANDIDATES, k), "k": k})
        return [RankRow(r.scope, r.path, r.version, r.content, float(r.score)) for r in found]

    def merge_pending(self, engine: Engine, *, search_only: bool, own: str) -> bool:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT", **{own: True}) as conn:
            conn.execute(_MERGE_SEARCH if search_only else _MERGE).all()
        return True

    def merges_in_background(self, engine: Engine) -> bool:
        return True

    @contextmanager
    def bulk_upkeep(self, conn: Connection, new_rows: int, *,
                    rebuild_min: int = GIN_REBUILD_MIN) -> Iterator[bool]:
        # The transaction-local ``memagent.bulk`` pauses the directory trigger (the
        # full-text indexes are GIN indexes, not triggers); a batch that is a large
        # share of the table drops the GIN indexes and builds them once after it.
        if conn.scalar(text("SELECT to_regclass('dirs') IS NOT NULL")) is not True:
            yield False  # before migration 0006 the triggers do the work
            return
        rebuild = _gin_to_rebuild(conn, new_rows, rebuild_min)
        for name, _ddl in rebuild:
            conn.execute(text(f'DROP INDEX "{name}"'))
        conn.execute(text("SELECT set_config('memagent.bulk', 'on', true)"))
        try:
            yield True
        finally:
            conn.execute(text("SELECT set_config('memagent.bulk', '', true)"))
        if rebuild:
            conn.execute(text("SET LOCAL maintenance_work_mem = '256MB'"))
            for _name, ddl in rebuild:
                conn.execute(text(ddl))

    def migration_lock(self, conn: Connection, wait_seconds: int, key: int) -> None:
        # Transaction-scoped: works through a transaction-pooling PgBouncer and is
        # released by the commit or rollback that ends the migration.
        conn.execute(text(f"SET LOCAL lock_timeout = '{int(wait_seconds)}s'"))
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})

    @contextmanager
    def small_write(self, engine: Engine) -> Iterator[Connection]:
        # Each statement commits by itself: no BEGIN/COMMIT round trips (a thread's log
        # is written several times per turn).
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            yield conn

    @contextmanager
    def locking_write(self, engine: Engine) -> Iterator[Connection]:
        with engine.begin() as conn:
            yield conn

    def append_message(self, conn: Connection, row: Any, mark: Any, thread_id: str) -> None:
        # One statement (a data-modifying CTE): the message, its thread's stale mark and
        # the first message's path commit together, in one round trip, so a thread
        # never has a message its file cannot find.
        added = row.returning(row.table.c.thread_id).cte("added")
        conn.execute(mark.where(threads.c.id.in_(select(added.c.thread_id))).add_cte(added))

    def note_every_file(self, conn: Connection) -> None:
        conn.execute(text("INSERT INTO embedding_pending(file_id, seq) "
                          "SELECT id, nextval('embedding_note_seq') FROM files WHERE content IS NOT NULL "
                          "ON CONFLICT (file_id) DO UPDATE SET seq = EXCLUDED.seq"))


def _gin_to_rebuild(conn: Connection, new_rows: int, rebuild_min: int) -> list[tuple[str, str]]:
    """The GIN indexes of ``files`` (name, definition) to drop for a large batch, or none.

    Inserting row by row into a GIN index (the trigram index of 0003, the full-text
    index of 0005), even through its pending list, costs several times more than building
    it once over the whole table, but a build reads the whole table: worth it only
    when the batch is a large share of it. The drop and the build are in the
    batch's transaction (all or nothing); meanwhile other sessions wait to read
    ``files`` (the drop holds its lock until commit), as an import of that size
    would make them wait for its rows anyway.
    """
    if new_rows < rebuild_min:
        return []
    if not conn.scalar(text("SELECT pg_has_role(current_user, relowner, 'USAGE') FROM pg_class "
                            "WHERE oid = 'files'::regclass")):
        return []  # only the table's owner may drop its indexes: a user's role (0010) inserts as is
    rows = conn.scalar(text("SELECT reltuples FROM pg_class WHERE oid = 'files'::regclass"))
    if rows is None or rows < 0:  # never analysed: count (a table never analysed is young)
        rows = conn.scalar(text("SELECT count(*) FROM files"))
    if new_rows * 2 < int(rows or 0):
        return []
    found = conn.execute(text(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() "
        "AND tablename = 'files' AND indexdef LIKE '% USING gin %'"))
    return [(str(name), str(ddl)) for name, ddl in found]


POSTGRES = PostgresBackend()
