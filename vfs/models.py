"""SQLAlchemy Core tables: agents, files (current state) and revisions (every change).

Invariants:
- ``files`` holds one row per (scope, path) ever written; ``content`` is the current
  text (NULL while the file is deleted), so the database itself can search it.
- ``files.version`` equals the highest ``revisions.version`` of that file; every
  mutation bumps it by one and appends exactly one revision in the same transaction.
- ``path`` compares bytewise on both databases (``COLLATE "C"`` on Postgres), so a
  prefix range scan on the (scope, path) index finds exactly a directory's files.
- The schema is created by the Alembic migrations in ``migrations/``, never by
  ``metadata.create_all``; these definitions mirror them for query building.
"""

from __future__ import annotations

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

agents = Table(
    "agents",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(64), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

files = Table(
    "files",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("scope", String(300), nullable=False),
    Column("path", PathType, nullable=False),
    Column("content", Text, nullable=True),
    Column("size", Integer, nullable=False, default=0),
    Column("sha256", String(64), nullable=True),
    Column("version", Integer, nullable=False),
    Column("deleted", Boolean, nullable=False, default=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("scope", "path", name="uq_files_scope_path"),
)

revisions = Table(
    "revisions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("file_id", Integer, ForeignKey("files.id", ondelete="CASCADE"), nullable=False),
    Column("version", Integer, nullable=False),
    Column("author", String(32), nullable=False),
    Column("approval", String(16), nullable=False),
    Column("message", Text, nullable=False, default=""),
    Column("content", Text, nullable=True),
    Column("deleted", Boolean, nullable=False, default=False),
    Column("size", Integer, nullable=False, default=0),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("file_id", "version", name="uq_revisions_file_version"),
)

threads = Table(
    "threads",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("agent", String(64), nullable=False, index=True),
    Column("title", Text, nullable=False, default=""),
    Column("model", String(100), nullable=False, default=""),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

messages = Table(
    "messages",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("thread_id", String(36), ForeignKey("threads.id", ondelete="CASCADE"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("role", String(16), nullable=False),
    Column("content", JSON, nullable=False),
    Column("usage", JSON, nullable=True),
    Column("cost_usd", String(32), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("thread_id", "seq", name="uq_messages_thread_seq"),
)

events = Table(
    "thread_events",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("thread_id", String(36), ForeignKey("threads.id", ondelete="CASCADE"), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("data", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)
