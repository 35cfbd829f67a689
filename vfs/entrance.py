"""The one entrance every writer takes: a prepared change -> no-op check -> reason -> policy -> commit.

``prepare_*`` (``vfs/files/store.py``, or ``AgentView``/an integration's folder in their
own path terms) normalises the path, reads the file once and validates the result
once; ``submit`` then takes the ``PendingChange`` the rest of the way, the same way
for the chat, the command line, reflection, review and the integrations:

1. A change that leaves the file as it is stores nothing (``unchanged``); no one is asked.
2. The reason becomes one bounded line (``reason_line``) and is scanned for secrets
   (``revisions.check_message``) before anyone is asked, since the revision keeps it.
3. The ``Policy`` decides: approve (with the ``Approval`` the revision records),
   reject (with the message the writer gets), or queue (the policy stored the change
   as a proposal, ``vfs/records/queue.py``, and says so).
4. On approval the change is committed at the version it was prepared from: a file
   that changed in between raises ``StaleVersion`` and nothing is stored.

Invariants: without a policy nothing is stored (``refuse`` is the default);
approving everything is an explicit choice (``yolo``); a rejected or queued change
leaves memory as it was. The result's ``Change`` names the file as the writer's
namespace shows it (``pending.shown``). This module imports ``vfs`` only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from memagent.vfs.errors import VfsError
from memagent.vfs.files.revisions import check_message
from memagent.vfs.records.queue import QUEUED_BY, Busy, NewProposal, ProposalStore
from memagent.vfs.types import Approval, Author, Change, FileContent, Origin, PendingChange

REASON_CHARS = 200
# Seconds a queued write waits for a reflection run that holds the agent's queue lock.
QUEUE_WAIT = 10.0

VerdictKind = Literal["approve", "reject", "queue"]
WriteStatus = Literal["committed", "unchanged", "rejected", "queued"]


@dataclass(frozen=True)
class Verdict:
    """A policy's answer. ``approval`` is what an approved revision records; ``message``
    is what the writer is told when the change is rejected or queued."""

    kind: VerdictKind
    approval: Approval = "human"
    message: str = ""
    proposal: int | None = None  # the queued proposal's id

    @staticmethod
    def approve(approval: Approval) -> Verdict:
        return Verdict("approve", approval)

    @staticmethod
    def reject(message: str) -> Verdict:
        return Verdict("reject", message=message)

    @staticmethod
    def queued(proposal: int, message: str) -> Verdict:
        return Verdict("queue", message=message, proposal=proposal)


@dataclass(frozen=True)
class Request:
    """What a policy decides on: the checked change and its one-line reason."""

    pending: PendingChange
    reason: str


class Policy(Protocol):
    """Decides whether a checked change is stored. It may raise ``VfsError`` (e.g. a
    ``StaleVersion`` of its own); that refuses the change and nothing is stored."""

    def __call__(self, request: Request) -> Verdict: ...


@dataclass(frozen=True)
class WriteResult:
    """What ``submit`` did. ``change`` is set when ``committed``; ``message`` when
    ``rejected`` or ``queued``; ``pending`` is always the change that was checked."""

    status: WriteStatus
    pending: PendingChange
    change: Change | None = None
    message: str = ""
    proposal: int | None = None

    @property
    def committed(self) -> bool:
        return self.status == "committed"


class Committer(Protocol):
    """The store's commit (``Store``/``SqlStore`` have it)."""

    def commit(self, pending: PendingChange, *, author: Author, approval: Approval, message: str = "",
               origin: Origin | None = None) -> Change: ...


# -- ready-made policies -----------------------------------------------------------------


def refusing(hint: str) -> Policy:
    """A policy that stores nothing and tells the writer ``hint`` (how to allow changes)."""

    def policy(request: Request) -> Verdict:
        return Verdict.reject(f"the change to {request.pending.shown} was refused: {hint}; nothing was stored")

    return policy


# The default: without an approver every change is refused.
refuse: Policy = refusing("no approver was given, so memagent stores no change")


def approved(approval: Approval) -> Policy:
    """A policy that approves every change, recorded as ``approval``: ``cli`` or ``human``
    for a person's own command (the person typing is the approval), ``yolo`` for writes
    no one looks at."""

    def policy(request: Request) -> Verdict:
        return Verdict.approve(approval)

    return policy


# Approve everything without asking: only ever an explicit choice.
yolo: Policy = approved("yolo")


def asking(ask: Callable[[PendingChange], bool], *, approval: Approval = "human") -> Policy:
    """A policy over a yes/no callback (e.g. one that asks a person): True approves."""

    def policy(request: Request) -> Verdict:
        if ask(request.pending):
            return Verdict.approve(approval)
        return Verdict.reject(f"the change to {request.pending.shown} was refused by the approver; "
                              "nothing was stored")

    return policy


class _Queueing:
    """A policy that queues: ``move`` asks before calling it (a review applies one file at a
    time, so a move, two revisions in one transaction, cannot be queued)."""

    queues = True

    def __init__(self, decide: Callable[[Request], Verdict]) -> None:
        self._decide = decide

    def __call__(self, request: Request) -> Verdict:
        return self._decide(request)


def queue(proposals: ProposalStore, agent: str, *, by: str, wait: float = QUEUE_WAIT) -> Policy:
    """A policy that stores each change as a pending proposal of ``agent`` for
    ``memagent review`` instead of committing it. ``by`` names the writer (recorded
    as the run's model after ``QUEUED_BY``)."""

    def policy(request: Request) -> Verdict:
        p = request.pending
        try:
            run = proposals.start_run(agent, model=f"{QUEUED_BY}{by}"[:100], wait=wait)
        except Busy:
            raise VfsError(f"the review queue of agent {agent!r} is busy (a reflect run holds it); nothing was "
                           "queued: try the same call again in a minute") from None
        new = NewProposal(p.scope, p.path, p.shown, p.op, p.expected_version, p.before, p.after, request.reason)
        ids = proposals.finish_run(run.id, "done", new=[new], note=f"queued by {by}"[:500])
        return Verdict.queued(ids[0], (
            f"Queued for review as proposal #{ids[0]}: {p.op} {p.shown}. Nothing is changed until a person "
            f"approves it with `memagent review {agent}`; {p.shown} stays at version {p.expected_version} "
            "until then."))

    return _Queueing(policy)


# -- the entrance ------------------------------------------------------------------------


def reason_line(reason: object) -> str:
    """A reason as one bounded line ("" when absent or not text)."""
    if not isinstance(reason, str):
        return ""
    line = " ".join(reason.split())
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1] + "…"


def submit(store: Committer, pending: PendingChange, *, policy: Policy = refuse, author: Author,
           origin: Origin | None = None, reason: object = "") -> WriteResult:
    """Take a prepared change to its commit (see the module docstring for the steps).

    Raises ``ValidationFailed`` for a reason carrying a secret, ``StaleVersion`` when
    the file changed since ``pending`` was read, and whatever ``VfsError`` the policy
    raises; in every case nothing is stored.
    """
    if pending.before == pending.after:
        return WriteResult("unchanged", pending)
    line = reason_line(reason)
    check_message(pending.shown, line)  # refused before anyone is asked, not after
    verdict = policy(Request(pending, line))
    if verdict.kind == "reject":
        return WriteResult("rejected", pending, message=verdict.message)
    if verdict.kind == "queue":
        return WriteResult("queued", pending, message=verdict.message, proposal=verdict.proposal)
    c = store.commit(pending, author=author, approval=verdict.approval, message=line, origin=origin)
    return WriteResult("committed", pending, Change(pending.shown, c.version, c.before, c.after))


class Refused(VfsError):
    """A change the policy rejected (or queued); nothing was stored."""


class Mover(Protocol):
    """What ``move`` needs of the store (``Store``/``SqlStore`` have it)."""

    def read(self, scope: str, path: str, *, offset: int = 0, limit: int | None = None,
             shown: str | None = None) -> FileContent: ...

    def prepare_write(self, scope: str, path: str, content: str, *, expected_version: int | None = None,
                      shown: str | None = None) -> PendingChange: ...

    def move(self, scope: str, src: str, dst: str, *, author: Author = "cli", approval: Approval = "cli",
             message: str = "", mount: str = "", origin: Origin | None = None,
             expected_version: int | None = None) -> Change: ...


def move(store: Mover, scope: str, src: str, dst: str, *, policy: Policy = refuse, author: Author,
         origin: Origin | None = None, reason: object = "", mount: str = "") -> WriteResult:
    """Move one file of ``scope`` through the same steps as ``submit``: read the source
    once, check the destination as the write it becomes (path rules, validators, not
    there yet), the reason, the policy on that write, then the store's move (a delete
    and a create revision in one transaction) at the source version that was read.
    ``mount`` prefixes the paths as the writer shows them. A queueing policy is refused
    before it is asked: a move cannot be queued for review."""
    if getattr(policy, "queues", False):
        raise Refused(f"moving {mount + src} to {mount + dst} cannot be queued for review (a review applies one "
                      "file at a time); nothing was stored: write the new file and delete the old one instead")
    fc = store.read(scope, src, shown=mount + src)
    pending = store.prepare_write(scope, dst, fc.content, expected_version=0, shown=mount + dst)
    line = reason_line(reason)
    check_message(pending.shown, line)
    verdict = policy(Request(pending, line))
    if verdict.kind == "reject":
        return WriteResult("rejected", pending, message=verdict.message)
    if verdict.kind == "queue":  # a policy that queued without saying so up front
        return WriteResult("queued", pending, message=verdict.message, proposal=verdict.proposal)
    c = store.move(scope, src, dst, author=author, approval=verdict.approval, message=line, mount=mount,
                   origin=origin, expected_version=fc.version)
    return WriteResult("committed", pending, Change(pending.shown, c.version, c.before, c.after))


def require(result: WriteResult) -> Change:
    """The committed change, or ``Refused`` with the policy's message (for writers that
    treat a refusal as an error). An unchanged result raises too: callers that accept
    "nothing to do" check ``status`` first."""
    if result.change is not None:
        return result.change
    if result.status == "unchanged":
        raise Refused(f"{result.pending.shown} already has exactly that content; nothing was written")
    raise Refused(result.message)


__all__ = ["Committer", "Mover", "Policy", "Refused", "Request", "Verdict", "WriteResult", "WriteStatus", "approved",
           "asking", "move", "queue", "reason_line", "refuse", "refusing", "require", "submit", "yolo"]
