"""Reflection runs and the review queue of proposed memory edits, in the database.

``memagent reflect`` reads the conversations since its last run and stores the
memory edits the model proposes here; ``memagent review`` (and ``/review`` in
chat) applies or rejects them through the normal write path. Invariants:

- One run per agent at a time: a run holds the agent's lock while its row in
  ``reflection_runs`` is ``running`` (a partial unique index admits one such row
  per agent, so two processes cannot both insert one). A lock whose holder died
  (same host, process gone) or whose heartbeat is older than ``STALE_AFTER`` is
  taken over; the dead run is marked ``abandoned``.
- A run that finishes records, in one transaction with its proposals, the last
  ``messages.id`` it read (``upto_message``); the next run reads only messages
  after the newest finished run's mark. Failed, abandoned and dry runs move no mark.
- A proposal is stored with the version its file was at (``base_version``, 0 = no
  live file), the content before and after, the reason and the threads it came
  from. Its status only moves forward: ``pending`` -> ``applied`` | ``rejected``
  | ``stale`` (dropped: the file changed and the edit no longer applies, or a
  person discarded the conflict) | ``repropose`` (a conflict a person sent back:
  the next reflect run is shown it and redoes it against the file as it is now)
  -> ``reproposed`` (that run finished, in the same transaction as its own
  proposals). This module never changes memory files; applying is the caller's commit.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Connection, Engine, and_, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from memagent.vfs.backends import WRITE, Database
from memagent.vfs.models import messages, proposals, reflection_runs, threads

RunStatus = Literal["running", "done", "empty", "failed", "abandoned", "dry-run"]
ProposalStatus = Literal["pending", "applied", "rejected", "stale", "repropose", "reproposed"]
ProposalOp = Literal["write", "edit", "delete"]

STALE_AFTER = timedelta(minutes=15)
POLL_SECONDS = 0.25


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(dt: datetime) -> datetime:
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


# The ``model`` of a run that holds one write an MCP client queued for review
# (``memagent mcp serve --approval queue``), followed by the client's name and version.
QUEUED_BY = "mcp: "
# After ``QUEUED_BY``: a change an integration queued (``integration <adapter>``), not an MCP client's.
INTEGRATION_PREFIX = "integration "


def holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Run:
    id: int
    agent: str
    status: str
    started_at: datetime
    finished_at: datetime | None
    upto_message: int | None
    threads: list[str]
    proposals: int
    holder: str
    model: str = ""  # the model of a reflection run; ``QUEUED_BY`` + client for an MCP client's queued write


@dataclass(frozen=True)
class Proposal:
    id: int
    agent: str
    run_id: int
    scope: str
    path: str
    shown: str
    op: ProposalOp
    base_version: int
    before: str | None
    after: str | None
    reason: str
    threads: list[str]
    status: ProposalStatus
    feedback: str
    created_at: datetime


@dataclass(frozen=True)
class NewProposal:
    """A proposal as a run produces it (the row's id and status come from the store)."""

    scope: str
    path: str
    shown: str
    op: ProposalOp
    base_version: int
    before: str | None
    after: str | None
    reason: str


@dataclass(frozen=True)
class ThreadMessage:
    """A message a reflection reads: its id (the cursor), thread and content."""

    id: int
    thread_id: str
    title: str
    seq: int
    role: str
    content: Any
    created_at: datetime
    state: str | None


class Busy(Exception):
    """Another run holds the agent's reflection lock."""

    def __init__(self, run: Run) -> None:
        self.run = run
        super().__init__(f"reflect run {run.id} of agent {run.agent!r} is in progress "
                         f"(started {run.started_at:%Y-%m-%d %H:%M:%S} UTC by {run.holder})")


def _run(row: Any) -> Run:
    return Run(row.id, row.agent, row.status, _aware(row.started_at),
               _aware(row.finished_at) if row.finished_at else None, row.upto_message,
               list(row.threads or []), row.proposals, row.holder, row.model or "")


def _proposal(row: Any) -> Proposal:
    return Proposal(row.id, row.agent, row.run_id, row.scope, row.path, row.shown, row.op, row.base_version,
                    row.before, row.after, row.reason, list(row.threads or []), row.status, row.feedback,
                    _aware(row.created_at))


def _holder_dead(holder: str) -> bool:
    host, _, pid = holder.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class ProposalStore:
    """Reflection runs, their lock, the messages they read, and the proposal queue."""

    def __init__(self, db: Database | Engine) -> None:
        # The store's ``Database`` (``store.db``); an ``Engine`` is wrapped in one.
        self.db = Database.of(db)
        self.engine = self.db.engine

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        # A write transaction (BEGIN IMMEDIATE on SQLite, see vfs/db.py).
        with self.engine.connect().execution_options(**{WRITE: True}) as conn, conn.begin():
            yield conn

    # -- runs and the lock ----------------------------------------------------------

    def _running(self, conn: Connection, agent: str) -> Run | None:
        row = conn.execute(select(reflection_runs).where(reflection_runs.c.agent == agent,
                                                         reflection_runs.c.status == "running")).first()
        return _run(row) if row is not None else None

    def start_run(self, agent: str, *, model: str = "", wait: float = 0.0) -> Run:
        """Take the agent's reflection lock as a new run; ``Busy`` if another run keeps it
        for longer than ``wait`` seconds."""
        deadline = time.monotonic() + max(0.0, wait)
        while True:
            now = _now()
            try:
                with self._write() as conn:
                    current = self._running(conn, agent)
                    if current is not None and self._is_stale(conn, current, now):
                        conn.execute(update(reflection_runs).where(reflection_runs.c.id == current.id)
                                     .values(status="abandoned", finished_at=now,
                                             note="taken over: its process had stopped"))
                        current = None
                    if current is None:
                        run_id = conn.execute(insert(reflection_runs).values(
                            agent=agent, status="running", holder=holder_id(), started_at=now,
                            heartbeat_at=now, proposals=0, model=model, note="",
                        ).returning(reflection_runs.c.id)).scalar_one()
                        return Run(run_id, agent, "running", now, None, None, [], 0, holder_id())
            except IntegrityError:
                current = None  # someone took it between our read and our insert
            if time.monotonic() >= deadline:
                with self.engine.connect() as conn:
                    holder = self._running(conn, agent)
                if holder is None:
                    continue  # it was released just now: try again
                raise Busy(holder)
            time.sleep(POLL_SECONDS)

    def _is_stale(self, conn: Connection, run: Run, now: datetime) -> bool:
        beat = conn.scalar(select(reflection_runs.c.heartbeat_at).where(reflection_runs.c.id == run.id))
        return _holder_dead(run.holder) or (beat is not None and now - _aware(beat) > STALE_AFTER)

    def heartbeat(self, run_id: int) -> None:
        with self._write() as conn:
            conn.execute(update(reflection_runs).where(reflection_runs.c.id == run_id)
                         .values(heartbeat_at=_now()))

    def finish_run(self, run_id: int, status: RunStatus, *, upto_message: int | None = None,
                   threads: Sequence[str] = (), new: Sequence[NewProposal] = (),
                   proposal_status: ProposalStatus = "pending", note: str = "",
                   reproposed: Sequence[int] = ()) -> list[int]:
        """End the run (releasing the lock) and store its proposals, in one transaction.

        ``reproposed``: the ids of ``repropose`` proposals the run was shown; they move
        to ``reproposed`` with it (a run that fails leaves them for the next one).
        Returns the new proposals' ids, in order.
        """
        now = _now()
        ids: list[int] = []
        with self._write() as conn:
            agent = conn.scalar(select(reflection_runs.c.agent).where(reflection_runs.c.id == run_id))
            for p in new:
                ids.append(conn.execute(insert(proposals).values(
                    agent=agent, run_id=run_id, scope=p.scope, path=p.path, shown=p.shown, op=p.op,
                    base_version=p.base_version, before=p.before, after=p.after, reason=p.reason,
                    threads=list(threads), status=proposal_status, feedback="", created_at=now,
                    decided_at=now if proposal_status != "pending" else None,
                ).returning(proposals.c.id)).scalar_one())
            if reproposed:
                conn.execute(update(proposals).where(proposals.c.id.in_(list(reproposed)),
                                                     proposals.c.status == "repropose")
                             .values(status="reproposed", decided_at=now))
            conn.execute(update(reflection_runs).where(reflection_runs.c.id == run_id).values(
                status=status, finished_at=now, heartbeat_at=now,
                upto_message=upto_message if status in ("done", "empty") else None,
                threads=list(threads), proposals=len(new), note=note[:2000]))
        return ids

    def last_finished(self, agent: str) -> Run | None:
        """The newest run whose mark counts (``done`` or ``empty``)."""
        with self.engine.connect() as conn:
            row = conn.execute(select(reflection_runs).where(
                reflection_runs.c.agent == agent, reflection_runs.c.status.in_(("done", "empty")),
                reflection_runs.c.upto_message.is_not(None),
            ).order_by(reflection_runs.c.id.desc()).limit(1)).first()
        return _run(row) if row is not None else None

    def run(self, run_id: int) -> Run | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(reflection_runs).where(reflection_runs.c.id == run_id)).first()
        return _run(row) if row is not None else None

    def runs(self, agent: str, limit: int = 20) -> list[Run]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(reflection_runs).where(reflection_runs.c.agent == agent)
                                .order_by(reflection_runs.c.id.desc()).limit(limit)).all()
        return [_run(r) for r in rows]

    # -- what a run reads ---------------------------------------------------------------

    def messages_after(self, agent: str, *, after_id: int | None, since: datetime | None,
                       limit: int = 5000) -> list[ThreadMessage]:
        """The agent's messages after message ``after_id`` and/or newer than ``since``, oldest first."""
        cond = [threads.c.agent == agent]
        if after_id is not None:
            cond.append(messages.c.id > after_id)
        if since is not None:
            cond.append(messages.c.created_at >= since)
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(messages.c.id, messages.c.thread_id, threads.c.title, messages.c.seq, messages.c.role,
                       messages.c.content, messages.c.created_at, messages.c.state)
                .join(threads, threads.c.id == messages.c.thread_id)
                .where(and_(*cond)).order_by(messages.c.id.desc()).limit(limit)
            ).all()
        return [ThreadMessage(r.id, r.thread_id, r.title, r.seq, r.role, r.content, _aware(r.created_at), r.state)
                for r in reversed(rows)]

    def latest_message_id(self, agent: str) -> int | None:
        with self.engine.connect() as conn:
            found = conn.scalar(select(func.max(messages.c.id)).join(threads, threads.c.id == messages.c.thread_id)
                                .where(threads.c.agent == agent))
        return int(found) if found is not None else None

    # -- the queue ----------------------------------------------------------------------

    def pending(self, agent: str) -> list[Proposal]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(proposals).where(proposals.c.agent == agent, proposals.c.status == "pending")
                                .order_by(proposals.c.id)).all()
        return [_proposal(r) for r in rows]

    def to_repropose(self, agent: str, limit: int = 20) -> list[Proposal]:
        """Conflicts a person sent back for the next reflect run to redo, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(proposals).where(proposals.c.agent == agent,
                                                        proposals.c.status == "repropose")
                                .order_by(proposals.c.id).limit(limit)).all()
        return [_proposal(r) for r in rows]

    def count_pending(self, agent: str) -> int:
        with self.engine.connect() as conn:
            return int(conn.scalar(select(func.count()).select_from(proposals).where(
                proposals.c.agent == agent, proposals.c.status == "pending")) or 0)

    def get(self, proposal_id: int) -> Proposal | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(proposals).where(proposals.c.id == proposal_id)).first()
        return _proposal(row) if row is not None else None

    def decide(self, proposal_id: int, status: ProposalStatus, *, feedback: str = "",
               applied_version: int | None = None) -> bool:
        """Move a pending proposal to ``status``; False if it was no longer pending."""
        with self._write() as conn:
            done = conn.execute(update(proposals).where(proposals.c.id == proposal_id,
                                                        proposals.c.status == "pending")
                                .values(status=status, feedback=feedback[:2000], decided_at=_now(),
                                        applied_version=applied_version)).rowcount
        return bool(done)

    def recent_rejections(self, agent: str, limit: int = 10) -> list[Proposal]:
        """Rejected proposals with feedback, newest first (the next run learns from them)."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(proposals).where(proposals.c.agent == agent, proposals.c.status == "rejected",
                                                        proposals.c.feedback != "")
                                .order_by(proposals.c.id.desc()).limit(limit)).all()
        return [_proposal(r) for r in rows]
