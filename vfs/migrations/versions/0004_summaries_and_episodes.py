"""Short-term memory and episodic memory: running summaries, failed turns, conversation files.

- ``thread_summaries``: every running summary a thread's context budget wrote, in
  order (the newest is the one in use). ``upto_seq`` is the last message seq the
  summary covers; ``method`` says who wrote it (``model`` or ``fallback``). Rows are
  only ever added, so earlier summaries stay readable.
- ``threads.conversation_path``: the path (inside scope ``conversations:<agent>``)
  of the thread's rendered Markdown file, set once when the thread gets its title;
  ``threads.stale``: true while messages were added that the file does not show yet.
- ``messages.state``: NULL for a message that is part of the conversation;
  ``failed`` for a user turn whose model request failed (kept, never replayed).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "thread_summaries",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "thread_id",
            sa.String(36),
            sa.ForeignKey("threads.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("upto_seq", sa.Integer, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("method", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_thread_summaries_thread", "thread_summaries", ["thread_id", "id"])
    with op.batch_alter_table("threads") as batch:
        batch.add_column(sa.Column("conversation_path", sa.String(1024), nullable=True))
        batch.add_column(sa.Column("stale", sa.Boolean, nullable=False, server_default=sa.false()))
    with op.batch_alter_table("messages") as batch:
        batch.add_column(sa.Column("state", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("state")
    with op.batch_alter_table("threads") as batch:
        batch.drop_column("stale")
        batch.drop_column("conversation_path")
    op.drop_index("ix_thread_summaries_thread", table_name="thread_summaries")
    op.drop_table("thread_summaries")
