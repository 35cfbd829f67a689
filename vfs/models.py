"""SQLAlchemy Core tables: agents, files (current state) and revisions (every change).

Invariants:
- ``files`` holds one row per (scope, path) ever written; ``content`` is the current
  text (NULL while the file is deleted), so the database itself can search it.
- ``files.version`` equals the highest ``revisions.version`` of that file; every
  mutation bumps it by one and appends exactly one revision in the same transaction.
- ``path`` compares bytewise on both databases (``COLLATE "C"`` on Postgres), so a
  prefix range scan on the (scope, path) index finds exactly a directory's files.
- Every revision carries its provenance (``origin*`` columns, 0005). The full-text
  search index (FTS5 ``files_search`` on SQLite, the generated ``files.search_doc``
  on Postgres) lives only in the migrations: queries reach it as text (``search/lexical.py``).
- ``dirs`` (0006) holds one row per directory with live files below it and their
  count, kept in step by triggers on ``files`` (see that migration); ``ls`` reads
  a directory's children from it instead of every path below.
- ``reflection_runs`` and ``proposals`` hold background reflection and its review
  queue (``records/queue.py``).
- The schema is created by the Alembic migrations in ``migrations/``, never by
  ``metadata.create_all``; these definitions mirror them for query building.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

PathType = String(1024).with_variant(String(1024, collation="C"), "postgresql")


def _table(name: str, *columns: Column[Any] | UniqueConstraint) -> Table:
    """A table with an integer ``id`` primary key, the shape of every table but ``threads``."""
    return Table(name, metadata, Column("id", Integer, primary_key=True), *columns)


def _when(name: str) -> Column[Any]:
    """A timezone-aware timestamp column (``created_at``, ``updated_at``), always set."""
    return Column(name, DateTime(timezone=True), nullable=False)


def _thread_id() -> Column[Any]:
    return Column("thread_id", String(36), ForeignKey("threads.id", ondelete="CASCADE"), nullable=False)


agents = _table(
    "agents",
    Column("name", String(64), nullable=False, unique=True),
    _when("created_at"),
)

files = _table(
    "files",
    Column("scope", String(300), nullable=False),
    Column("path", PathType, nullable=False),
    Column("content", Text, nullable=True),
    Column("size", Integer, nullable=False, default=0),
    Column("sha256", String(64), nullable=True),
    Column("version", Integer, nullable=False),
    Column("deleted", Boolean, nullable=False, default=False),
    _when("created_at"),
    _when("updated_at"),
    UniqueConstraint("scope", "path", name="uq_files_scope_path"),
)

# Every directory with a live file below it, and how many (0006); kept by triggers on files.
dirs = Table(
    "dirs",
    metadata,
    Column("scope", String(300), primary_key=True),
    Column("path", PathType, primary_key=True),
    Column("depth", Integer, nullable=False),  # number of "/" in path
    Column("files", Integer, nullable=False),  # live files below, at any depth
)

revisions = _table(
    "revisions",
    Column("file_id", Integer, ForeignKey("files.id", ondelete="CASCADE"), nullable=False),
    Column("version", Integer, nullable=False),
    Column("author", String(32), nullable=False),
    Column("approval", String(16), nullable=False),
    Column("message", Text, nullable=False, default=""),
    Column("content", Text, nullable=True),
    Column("deleted", Boolean, nullable=False, default=False),
    Column("size", Integer, nullable=False, default=0),
    _when("created_at"),
    # Provenance (0005): where the change came from (``types.Origin``); NULL before 0005.
    Column("origin", String(16), nullable=True),
    Column("origin_thread", String(36), nullable=True),
    Column("origin_turn", Integer, nullable=True),
    Column("origin_run", Integer, nullable=True),
    Column("origin_detail", Text, nullable=True),
    UniqueConstraint("file_id", "version", name="uq_revisions_file_version"),
)

threads = Table(
    "threads",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("agent", String(64), nullable=False, index=True),
    Column("title", Text, nullable=False, default=""),
    Column("model", String(100), nullable=False, default=""),
    _when("created_at"),
    _when("updated_at"),
    # Path of the thread's rendered file in scope ``conversations:<agent>`` (0004).
    Column("conversation_path", String(1024), nullable=True),
    # True while the thread has messages its conversation file does not show yet (0004).
    Column("stale", Boolean, nullable=False, default=False),
)

messages = _table(
    "messages",
    _thread_id(),
    Column("seq", Integer, nullable=False),
    Column("role", String(16), nullable=False),
    Column("content", JSON, nullable=False),
    Column("usage", JSON, nullable=True),
    Column("cost_usd", String(32), nullable=True),
    _when("created_at"),
    # NULL: part of the conversation; "failed": a user turn whose request failed,
    # kept for the record but never replayed to the model (0004).
    Column("state", String(16), nullable=True),
    UniqueConstraint("thread_id", "seq", name="uq_messages_thread_seq"),
)

events = _table(
    "thread_events",
    _thread_id(),
    Column("kind", String(32), nullable=False),
    Column("data", JSON, nullable=False),
    _when("created_at"),
)

# Every running summary the context budget wrote for a thread; the newest is in use (0004).
thread_summaries = _table(
    "thread_summaries",
    _thread_id(),
    Column("upto_seq", Integer, nullable=False),
    Column("text", Text, nullable=False),
    Column("method", String(16), nullable=False),
    _when("created_at"),
)

# One row per `memagent reflect` run; a "running" row is the agent's reflection lock (0005).
reflection_runs = _table(
    "reflection_runs",
    Column("agent", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("holder", String(300), nullable=False, default=""),
    _when("started_at"),
    _when("heartbeat_at"),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    Column("upto_message", Integer, nullable=True),
    Column("threads", JSON, nullable=True),
    Column("proposals", Integer, nullable=False, default=0),
    Column("model", String(100), nullable=False, default=""),
    Column("note", Text, nullable=False, default=""),
)

# Memory edits proposed by a reflection run, waiting for review (0005).
proposals = _table(
    "proposals",
    Column("agent", String(64), nullable=False),
    Column("run_id", Integer, ForeignKey("reflection_runs.id", ondelete="CASCADE"), nullable=False),
    Column("scope", String(300), nullable=False),
    Column("path", PathType, nullable=False),
    Column("shown", String(1100), nullable=False),
    Column("op", String(16), nullable=False),
    Column("base_version", Integer, nullable=False),
    Column("before", Text, nullable=True),
    Column("after", Text, nullable=True),
    Column("reason", Text, nullable=False, default=""),
    Column("threads", JSON, nullable=True),
    Column("status", String(16), nullable=False),
    Column("feedback", Text, nullable=False, default=""),
    Column("applied_version", Integer, nullable=True),
    _when("created_at"),
    Column("decided_at", DateTime(timezone=True), nullable=True),
)
