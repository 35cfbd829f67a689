"""Threads: a conversation's messages, tool calls, approvals and usage, in the database.

Invariants: messages are stored in API shape (role + content blocks) with a
sequence number per thread, so a resumed thread replays exactly what the model saw;
the last message may be replaced only by ``replace_last`` (used to fold a new user
turn into a pending user message after an interruption, keeping roles alternating).
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from memagent.vfs.errors import VfsError
from memagent.vfs.models import events, messages, threads


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class ThreadInfo:
    id: str
    agent: str
    title: str
    model: str
    created_at: datetime
    updated_at: datetime
    messages: int


class ThreadNotFound(VfsError):
    pass


class ThreadStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._next_seq: dict[str, int] = {}

    @contextmanager
    def _small_write(self) -> Iterator[Connection]:
        """A connection for one or two independent statements.

        On Postgres each statement commits by itself (no BEGIN/COMMIT round trips: a
        thread's log is written several times per turn); SQLite keeps a transaction,
        which costs nothing there.
        """
        if self.engine.dialect.name == "postgresql":
            with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                yield conn
        else:
            with self.engine.begin() as conn:
                yield conn

    def create(self, agent: str, model: str) -> str:
        tid = str(uuid.uuid4())
        now = _now()
        with self.engine.begin() as conn:
            conn.execute(insert(threads).values(id=tid, agent=agent, title="", model=model,
                                                created_at=now, updated_at=now))
        return tid

    def get(self, agent: str, thread_id: str) -> ThreadInfo:
        with self.engine.connect() as conn:
            rows = self._infos(conn, agent, prefix=thread_id)
        if len(rows) != 1:
            what = "no thread" if not rows else f"{len(rows)} threads"
            raise ThreadNotFound(
                f"{what} of agent {agent!r} match id {thread_id!r}; list them with /threads "
                "or `memagent chat --resume` for the latest"
            )
        return rows[0]

    def _infos(self, conn: Any, agent: str, prefix: str | None = None) -> list[ThreadInfo]:
        count = (select(func.count()).where(messages.c.thread_id == threads.c.id)
                 .scalar_subquery())
        q = select(threads, count.label("n")).where(threads.c.agent == agent)
        if prefix:
            q = q.where(threads.c.id.startswith(prefix, autoescape=True))
        q = q.order_by(threads.c.updated_at.desc())
        return [ThreadInfo(r.id, r.agent, r.title, r.model, r.created_at, r.updated_at, r.n)
                for r in conn.execute(q)]

    def list(self, agent: str, limit: int = 20) -> list[ThreadInfo]:
        with self.engine.connect() as conn:
            return self._infos(conn, agent)[:limit]

    def latest(self, agent: str) -> str | None:
        items = self.list(agent, 1)
        return items[0].id if items else None

    def load(self, thread_id: str) -> builtins.list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(messages.c.role, messages.c.content)
                .where(messages.c.thread_id == thread_id).order_by(messages.c.seq)
            ).all()
        return [{"role": r.role, "content": r.content} for r in rows]

    def append(self, thread_id: str, message: dict[str, Any], *, usage: dict[str, int] | None = None,
               cost_usd: float | None = None) -> None:
        """Add a message; one short transaction (the next seq number is remembered)."""
        now = _now()
        for attempt in (1, 2):
            seq = self._next_seq.get(thread_id) or self._last_seq(thread_id) + 1
            try:
                with self._small_write() as conn:
                    conn.execute(insert(messages).values(
                        thread_id=thread_id, seq=seq, role=message["role"], content=message["content"],
                        usage=usage, cost_usd=None if cost_usd is None else f"{cost_usd:.6f}",
                        created_at=now))
                    if message["role"] == "user" and _has_text(message["content"]):
                        # Activity time orders /threads and --resume; one update per turn is enough.
                        values: dict[str, Any] = {"updated_at": now}
                        if seq == 1:
                            values["title"] = _title(message["content"])
                        conn.execute(update(threads).where(threads.c.id == thread_id).values(**values))
            except IntegrityError:
                # Another session appended to this thread meanwhile: re-read the end once.
                self._next_seq.pop(thread_id, None)
                if attempt == 2:
                    raise
                continue
            self._next_seq[thread_id] = seq + 1
            return

    def _last_seq(self, thread_id: str) -> int:
        with self.engine.connect() as conn:
            last = conn.scalar(select(func.max(messages.c.seq)).where(messages.c.thread_id == thread_id))
        return int(last or 0)

    def replace_last(self, thread_id: str, message: dict[str, Any]) -> None:
        with self.engine.begin() as conn:
            seq = conn.scalar(select(func.max(messages.c.seq)).where(messages.c.thread_id == thread_id))
            conn.execute(update(messages).where(messages.c.thread_id == thread_id,
                                                messages.c.seq == seq)
                         .values(content=message["content"]))

    def event(self, thread_id: str, kind: str, data: dict[str, Any]) -> None:
        with self._small_write() as conn:
            conn.execute(insert(events).values(thread_id=thread_id, kind=kind, data=data,
                                               created_at=_now()))

    def events(self, thread_id: str) -> builtins.list[tuple[str, dict[str, Any]]]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(events.c.kind, events.c.data)
                                .where(events.c.thread_id == thread_id).order_by(events.c.id))
            return [(r.kind, r.data) for r in rows]

    def usage(self, thread_id: str) -> tuple[dict[str, int], float]:
        """Summed token usage and cost of a thread."""
        total: dict[str, int] = {}
        cost = 0.0
        with self.engine.connect() as conn:
            for u, c in conn.execute(select(messages.c.usage, messages.c.cost_usd)
                                     .where(messages.c.thread_id == thread_id)):
                for k, v in (u or {}).items():
                    total[k] = total.get(k, 0) + int(v)
                cost += float(c or 0)
        return total, cost


def _has_text(content: Any) -> bool:
    return isinstance(content, str) or any(
        isinstance(b, dict) and b.get("type") == "text" for b in content)


def _title(content: Any) -> str:
    text = content if isinstance(content, str) else " ".join(
        b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    text = " ".join(text.split())
    return text[:60] + ("..." if len(text) > 60 else "")
