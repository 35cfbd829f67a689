"""Agents, files and revisions.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _path_type() -> sa.types.TypeEngine[str]:
    # Bytewise comparison so prefix range scans are exact whatever the server locale.
    if op.get_bind().dialect.name == "postgresql":
        return sa.String(1024, collation="C")
    return sa.String(1024)


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "files",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("scope", sa.String(300), nullable=False),
        sa.Column("path", _path_type(), nullable=False),
        sa.Column("content", sa.Text, nullable=True),
        sa.Column("size", sa.Integer, nullable=False, server_default="0"),
        sa.Column("sha256", sa.String(64), nullable=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("deleted", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("scope", "path", name="uq_files_scope_path"),
    )
    op.create_table(
        "revisions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "file_id",
            sa.Integer,
            sa.ForeignKey("files.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("author", sa.String(32), nullable=False),
        sa.Column("approval", sa.String(16), nullable=False),
        sa.Column("message", sa.Text, nullable=False, server_default=""),
        sa.Column("content", sa.Text, nullable=True),
        sa.Column("deleted", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("size", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("file_id", "version", name="uq_revisions_file_version"),
    )


def downgrade() -> None:
    op.drop_table("revisions")
    op.drop_table("files")
    op.drop_table("agents")
