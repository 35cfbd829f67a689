"""The backend protocol: what differs between the databases memagent runs on.

Every statement or setting that only one database understands lives in a backend
module (``sqlite.py``, ``postgres.py``) behind ``Backend``; the rest of ``vfs/``
asks the backend of its engine or connection (``backend_for``) and never branches
on a dialect itself (``tests/test_backends.py`` enforces it). Invariants:

- A backend holds no state of its own: one instance per database kind, shared by
  every engine of that kind; whatever it needs per database it reads from the
  connection it is given.
- Each operation gives the same answer on every backend (the tests run each on
  real SQLite and real Postgres); only how, and how fast, differs.
- Backends import nothing of ``vfs`` above the schema (``models``), the result
  types and the errors, so that every other module may import them.

The statements shared by both (standard SQL) are here too, so a backend and the
modules above it use the same ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

from sqlalchemy import ColumnElement, Connection, Engine, bindparam, insert, update
from sqlalchemy.engine import URL

from memagent.vfs.models import files, revisions
from memagent.vfs.types import Entry

# Execution option marking a connection that will write: SQLite begins its
# transaction IMMEDIATE (holding the write lock from the start).
WRITE = "memagent_write"

# ``rank_index``'s answers: which full-text index ranked search reads.
RankIndex = Literal["fts5", "tsvector", "scan"]


@dataclass(frozen=True)
class Features:
    """Which search indexes the connected database has (migration 0003)."""

    dialect: str
    sqlite_fts: bool = False
    sqlite_pending: bool = False  # fts_pending (0008): rows the FTS5 indexes lag behind
    pg_trgm: bool = False


# The ``files`` columns that describe a file's content (``revisions._state``).
STATE_COLUMNS = ("content", "size", "sha256", "deleted", "updated_at")

# The two statements of every overwrite and edit, built once: constructing a Core
# statement costs more than SQLite takes to run it (bind names prefixed ``w_`` where
# they would clash with a column set in ``values``).
UPDATE_LIVE = (
    update(files)
    .where(files.c.scope == bindparam("w_scope"), files.c.path == bindparam("w_path"),
           files.c.version == bindparam("w_expected"), files.c.deleted.is_(False))
    .values(version=files.c.version + 1, **{c: bindparam(c) for c in STATE_COLUMNS})
    .returning(files.c.id, files.c.version)
)
INSERT_REVISION = insert(revisions)
# A revision's own columns (besides file_id and version), as ``overwrite`` takes them.
REVISION_VALUES = ("author", "approval", "message", "content", "deleted", "size", "created_at",
                   "origin", "origin_thread", "origin_turn", "origin_run", "origin_detail")


class RankRow(NamedTuple):
    """A ranked file as ``rank_rows`` gives it: ``score`` is higher-is-better."""

    scope: str
    path: str
    version: int
    content: str
    score: float


def in_scopes(scopes: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """``:s0, :s1, ...`` and their values: an ``IN (...)`` of scopes as bound parameters."""
    names = [f"s{i}" for i in range(len(scopes))]
    return ", ".join(":" + n for n in names), dict(zip(names, scopes, strict=True))


class PrefilterQuery(Protocol):
    """A grep pattern's required text, rendered for whichever index a backend has
    (``vfs/grep/fts.py`` builds it; backends never read the pattern themselves)."""

    def fts5(self) -> str:
        """An FTS5 MATCH expression over the trigram index."""
        ...

    def like(self) -> ColumnElement[bool]:
        """A ``LIKE``/``ILIKE`` condition on ``files.content`` (pg_trgm's index answers it)."""
        ...


@runtime_checkable
class Backend(Protocol):
    """The dialect-specific operations of the store, its threads and its indexes."""

    @property
    def name(self) -> Literal["sqlite", "postgresql"]:
        """The SQLAlchemy dialect name."""
        ...

    @property
    def read_options(self) -> Mapping[str, Any]:
        """Execution options of a connection that runs single reads (Postgres:
        AUTOCOMMIT, no BEGIN/ROLLBACK round trips; SQLite transactions cost nothing)."""
        ...

    @property
    def atomic_overwrite(self) -> bool:
        """Whether ``overwrite`` is one statement, atomic by itself (run in autocommit)."""
        ...

    @property
    def pending_shared(self) -> bool:
        """Whether the database's own pending table lists every writer's unmerged rows
        (SQLite's ``fts_pending``), so a search merges whatever is there."""
        ...

    @property
    def sql_false(self) -> str:
        """``files.deleted = <this>`` in SQL text: false, spelled as the database stores it."""
        ...

    @property
    def drops_connections(self) -> bool:
        """Whether a pooled connection can die while idle (a server restarts or ends
        sessions), so the pool tests one before reuse (vfs/db.py ``_ping_when_idle``)."""
        ...

    def create_engine(self, parsed: URL, url: str) -> Engine:
        """The engine for ``url`` (parsed: ``parsed``), not yet connected: the driver memagent
        ships, its connection arguments, the pool, and each connection's settings (pragmas,
        BEGIN IMMEDIATE, the lock timeout...)."""
        ...

    def missing_database(self, parsed: URL) -> str | None:
        """The database file ``parsed`` names, when it is a file that does not exist (a
        command that must not create one refuses it); None otherwise."""
        ...

    def head(self, driver: Any, scope: str, path: str) -> tuple[Any, ...] | None:
        """(content, version, deleted) of one file by the raw DBAPI ``driver`` connection."""
        ...

    def overwrite(self, conn: Connection, where: Mapping[str, Any], state: Mapping[str, Any],
                  revision: Mapping[str, Any]) -> int | None:
        """Move a live file at ``where["w_expected"]`` to ``state`` and append its revision.

        Returns the new version, or None when the file was not live at that version
        (nothing written)."""
        ...

    def ls_entries(self, conn: Connection, args: Mapping[str, Any], cut: int) -> list[Entry]:
        """A folder's entries, unsorted: ``args`` has scope, depth, lo and hi (its range)."""
        ...

    def grep_deadline(self, conn: Connection, ms: int) -> None:
        """Bound the server's share of a grep to ``ms`` (in ``conn``'s transaction)."""
        ...

    def rows_filtered(self, conn: Connection) -> bool:
        """Whether this connection's login sees only the rows granted to it (a user's
        role under row-level security, Postgres migration 0010)."""
        ...

    def grep_index_only(self, conn: Connection) -> bool:
        """Make the trigram index the only way into ``files`` for this transaction.

        True when the caller must also hide the b-tree columns (Postgres); False: the
        planner needs no help."""
        ...

    def grep_prefilter(self, conn: Connection, scope: str, features: Features,
                       query: PrefilterQuery) -> ColumnElement[bool] | None:
        """A WHERE condition on ``files`` that every live file of ``scope`` holding the
        query's required text meets (a superset: grep checks each candidate exactly), or
        None when this database has no index for it (grep scans)."""
        ...

    def regex_prefilter(self, conn: Connection, features: Features, pg_pattern: str) -> ColumnElement[bool] | None:
        """For a regex no literal narrows (``pg_pattern``: the regex in Postgres' syntax,
        ``grep.regex_tree.pg_syntax``): a WHERE condition the database's own index answers, when it
        narrows the search; None when grep should read every text (RE2 pre-checks them)."""
        ...

    def search_features(self, conn: Connection) -> Features:
        """Which grep pre-filter indexes the database has."""
        ...

    def rank_index(self, conn: Connection) -> RankIndex:
        """Which full-text index ranked search can read."""
        ...

    def rank_rows(self, conn: Connection, scopes: Sequence[str], words: Sequence[str],
                  stems: Sequence[str], k: int, *, path_weight: float) -> list[RankRow]:
        """The best ``k`` live files of ``scopes`` for ``words`` by the full-text index.

        Only when ``rank_index`` is not ``"scan"``. ``stems`` are the words' stems, for
        finding them in paths; ``path_weight`` is what a word in the path is worth
        against one in the text where the index takes it at query time (bm25's column
        weight; Postgres fixed it in ``search_doc``'s A/B weights when indexing)."""
        ...

    def merge_pending(self, engine: Engine, *, search_only: bool, own: str) -> bool:
        """Merge the full-text indexes' pending entries (connections marked ``own``).

        Returns whether anything was merged."""
        ...

    def merges_in_background(self, engine: Engine) -> bool:
        """Whether a background thread may merge for ``engine`` (not in-memory SQLite)."""
        ...

    def bulk_upkeep(self, conn: Connection, new_rows: int, *,
                    rebuild_min: int = ...) -> AbstractContextManager[bool]:
        """Around a batch insert: pause the per-row index triggers, index the batch after.

        Yields whether they were paused (then the caller upserts ``dirs`` itself). An
        index cheaper to build once than to feed row by row (Postgres' GIN) is rebuilt
        for a batch of at least ``rebuild_min`` rows and half the table."""
        ...

    def migration_lock(self, conn: Connection, wait_seconds: int, key: int) -> None:
        """Wait (bounded) for the migration lock, held until ``conn``'s transaction ends.

        Raises ``DBAPIError`` when the wait times out."""
        ...

    def small_write(self, engine: Engine) -> AbstractContextManager[Connection]:
        """A connection for one or two independent statements (a thread's log)."""
        ...

    def locking_write(self, engine: Engine) -> AbstractContextManager[Connection]:
        """A write transaction in which ``SELECT ... FOR UPDATE`` holds rows until it ends."""
        ...

    def append_message(self, conn: Connection, row: Any, mark: Any, thread_id: str) -> None:
        """Insert a message (``row``) and run its thread's update (``mark``) together."""
        ...

    def note_every_file(self, conn: Connection) -> None:
        """Note every live file for embedding, each with a fresh seq (as the triggers do)."""
        ...


def raw_fetch_one(driver: Any, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """One row of ``sql`` on a raw DBAPI connection (the caller owns the connection)."""
    cur = driver.cursor()
    try:
        cur.execute(sql, params)
        row: tuple[Any, ...] | None = cur.fetchone()
        return row
    finally:
        cur.close()
