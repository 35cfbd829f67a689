"""Reviewing proposals: check one against its file as it is now, re-base or refuse it, apply or reject it.

The proposals come from reflection runs (``reflection.reflect``) and from writes an
approval rule or ``--approval queue`` queued (an MCP client's, ``memagent run``'s, an
integration's); ``Review`` and ``review`` serve them all, and the front ends
(``chat/review.py``) drive them through callbacks. Invariants:

- Applying takes the normal write path (``prepare_write``/``prepare_delete`` with
  the proposal's base version, then ``vfs.entrance.submit``: ``commit_proposal``),
  author ``agent``, origin ``reflect`` with the run and its threads (or the queuing
  client's), approval ``human`` (review) or ``yolo``.
- A proposal whose file changed since it was made is never applied as is. It is
  re-based only when every hunk of its change applies to whole, unchanged lines: the
  hunk's lines and the line on either side of them occur exactly once in the file as
  it is now (``merge``, a line-based three-way merge). Anything else — a line edited,
  glued, split or inserted inside a hunk or next to it, an ambiguous place, a file
  created or deleted since — is a ``conflict``: review shows both sides
  (``describe_conflict``) and a person re-proposes or discards it; it is never
  applied. A proposal the file already reflects is dropped as ``stale``, unasked.
- Nothing here prints or prompts: decisions come from a ``Decide`` callback, answers
  to conflicts from a ``Resolve`` callback, progress goes to a ``Log`` callback.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from memagent.agent.gate import Decision
from memagent.agent.tools import ApprovalRequest
from memagent.vfs import (
    INTEGRATION_PREFIX,
    QUEUED_BY,
    AgentView,
    Change,
    NotFound,
    Origin,
    PendingChange,
    Proposal,
    ProposalStore,
    StaleVersion,
    VfsError,
    approved_policy,
    require_change,
    submit_change,
    unified_diff,
)

Log = Callable[[str], None]
# Asked once per proposal with the approval request (its diff, reason and note).
Decide = Callable[[ApprovalRequest], Decision]


def reflection_origin(run_id: int, threads: Sequence[str]) -> Origin:
    """The origin of a change a reflection run proposed: the run and the threads it read."""
    detail = "threads " + ", ".join(t[:8] for t in threads) if threads else ""
    return Origin("reflect", thread=threads[0] if len(threads) == 1 else None, run=run_id, detail=detail[:300])


# -- applying and reviewing -----------------------------------------------------------------


def commit_proposal(view: AgentView, shown: str, op: str, after: str | None, base: int, reason: str,
                    origin: Origin, approval: Literal["human", "yolo"]) -> Change:
    """A decided proposal through the write path, at version ``base`` (``StaleVersion`` if the file moved on)."""
    pending: PendingChange = (view.prepare_delete(shown, expected_version=base) if after is None
                              else view.prepare_write(shown, after, expected_version=base))
    # The one entrance: review (or --yolo) has already decided, so the policy approves as that.
    return require_change(submit_change(view.store, pending, policy=approved_policy(approval), author="agent",
                                        origin=origin, reason=reason or f"reflect: {op}"))


# -- re-basing a proposal onto a file that changed since ------------------------------------

# fresh: the file is at the proposal's version; rebased: it changed, and the proposal's
# hunks apply to whole lines the change left alone; conflict: they do not (shown in
# review: re-propose or discard, never applied); stale: the file already reads as the
# proposal would make it (nothing left to apply, dropped unasked).
CheckState = Literal["fresh", "rebased", "conflict", "stale"]
# What a person makes of a conflict: keep it for the next reflect run to redo against the
# file as it is now, drop it, or leave it pending.
Resolution = Literal["repropose", "discard", "skip"]


@dataclass(frozen=True)
class Hunk:
    """One change of a proposal, in lines of the text it was made against:
    ``lines[start:end]`` become ``new`` (``start == end``: an insertion before line ``start``)."""

    start: int
    end: int
    new: tuple[str, ...]


def split_lines(text: str) -> list[str]:
    """``text`` as whole lines, each with its ``\\n`` (the last may lack one).

    Only ``\\n`` ends a line: ``str.splitlines`` would also cut at form feeds and
    Unicode separators, and a hunk could then land inside what a person sees as a line.
    """
    parts = text.split("\n")
    out = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def line_hunks(before: str, after: str) -> list[Hunk]:
    """The changes from ``before`` to ``after``, whole lines, in order, never touching."""
    a, b = split_lines(before), split_lines(after)
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    return [Hunk(i1, i2, tuple(b[j1:j2])) for tag, i1, i2, j1, j2 in ops if tag != "equal"]


def _place(h: Hunk, base: list[str], cur: list[str]) -> int | None:
    """Where ``base[h.start:h.end]`` stands in ``cur``: the one place where those lines,
    with the line before and the line after them (or the start and end of the file),
    occur unchanged as whole lines. None when there is no such place or more than one."""
    lead = 1 if h.start > 0 else 0
    trail = 1 if h.end < len(base) else 0
    block = base[h.start - lead : h.end + trail]
    size = len(block)
    # Without a line before it, the block must open the file; without one after, close it.
    starts = range(len(cur) - size + 1) if lead else range(1 if size <= len(cur) else 0)
    found: int | None = None
    for p in starts:
        if block and cur[p] != block[0]:
            continue
        if cur[p : p + size] == block and (trail or p + size == len(cur)):
            if found is not None:
                return None
            found = p
    return None if found is None else found + lead


@dataclass(frozen=True)
class Clash:
    hunk: Hunk
    line: str  # the proposal's line that no longer stands where it did, for the message


def merge(before: str, after: str, current: str) -> str | Clash:
    """``before -> after``'s hunks applied to ``current``, or the first hunk that cannot be.

    A line-based three-way merge: each hunk is placed by ``_place`` (its lines and the
    lines on either side unchanged, found exactly once); hunks keep their order, and two
    hunks that shared a context line in ``before`` must share it in ``current`` (no
    edit may have slipped in between). Any overlap with the person's change — an edited,
    glued, split, moved or inserted line inside a hunk or next to it — is a clash.
    """
    base, cur = split_lines(before), split_lines(current)
    out: list[str] = []
    at = 0  # the next line of ``cur`` to copy
    prev: tuple[Hunk, int] | None = None
    for h in line_hunks(before, after):
        p = _place(h, base, cur)
        clash = Clash(h, _describe_line(h, base))
        if p is None:
            return clash
        if prev is not None:
            ph, pp = prev
            base_gap, cur_gap = h.start - ph.end, p - (pp + ph.end - ph.start)
            if cur_gap < 0 or (cur_gap != base_gap if base_gap <= 1 else cur_gap < 2):
                return clash
        out += cur[at:p]
        out += h.new
        at = p + h.end - h.start
        prev = (h, p)
    out += cur[at:]
    return "".join(out)


def _describe_line(h: Hunk, base: list[str]) -> str:
    def short(line: str) -> str:
        text = " ".join(line.split())
        return f"`{text[:60]}…`" if len(text) > 60 else f"`{text}`"

    if h.end > h.start:
        return f"line {h.start + 1} ({short(base[h.start])})"
    if h.start > 0:
        return f"the lines it adds after line {h.start} ({short(base[h.start - 1])})"
    return "the lines it adds at the start"


def rebase(before: str | None, after: str | None, current: str | None) -> str | None:
    """``after``'s change re-applied to ``current``, or None when that is not safe.

    Safe means every hunk of ``before -> after`` finds its lines, and the line on each
    side of them, as whole, unchanged lines of ``current``, exactly once (see ``merge``);
    a missing side (a new or deleted file) never re-bases.
    """
    if before is None or after is None or current is None:
        return None
    merged = merge(before, after, current)
    return merged if isinstance(merged, str) else None


@dataclass(frozen=True)
class Checked:
    """A pending proposal as it stands now (see ``CheckState``)."""

    proposal: Proposal
    state: CheckState
    version: int  # the file's version now (0: no live file)
    after: str | None  # what applying would write (re-based when needed); None for a conflict
    # fresh/rebased: what applying changes in the file now; conflict: the proposal's own
    # change, against the version it was made on.
    diff: str
    why: str = ""
    since: str = ""  # conflict: what changed in the file since the proposal was made


def describe_conflict(c: Checked) -> str:
    """Both sides of a conflict, for a person: the proposal's change and the file's."""
    p = c.proposal
    now = f"version {c.version}" if c.version else "deleted"
    mine = c.diff.rstrip("\n") or "(no change)"
    theirs = c.since.rstrip("\n") or "(no change)"
    return (f"{c.why}\n=== the proposal (against version {p.base_version}) ===\n{mine}\n"
            f"=== changes to {p.shown} since (version {p.base_version} -> {now}) ===\n{theirs}")


# After ``QUEUED_BY``: an edit an approval rule (or the unattended policy) queued in a
# memagent session of its own (``memagent chat``, ``memagent run``), not an MCP client's.
MEMAGENT_PREFIX = "memagent "


def queued_by(client: str) -> str:
    """Who queued a write, for people: ``memagent run``, ``integration X``, ``MCP client X``."""
    if client.startswith(MEMAGENT_PREFIX):
        return client
    if client.startswith(INTEGRATION_PREFIX):
        return f"integration {client[len(INTEGRATION_PREFIX):]}"
    return f"MCP client {client}"


class Review:
    """The review queue of one agent: check, approve, reject."""

    def __init__(self, view: AgentView, queue: ProposalStore) -> None:
        self.view = view
        self.queue = queue

    def pending(self) -> list[Proposal]:
        return self.queue.pending(self.view.agent)

    def check(self, p: Proposal) -> Checked:
        try:
            fc = self.view.read(p.shown)
            version, current = fc.version, fc.content
        except NotFound:
            version, current = 0, None
        if version == p.base_version:
            return Checked(p, "fresh", version, p.after, unified_diff(p.before, p.after, p.shown, p.shown))
        made = f"{p.shown} changed since this proposal (made against version {p.base_version}"
        if current == p.after:
            return Checked(p, "stale", version, None, "",
                           f"{made}) and already reads as the proposal would make it")
        merged: str | Clash | None = None
        if p.before is None or p.after is None or current is None:
            now = f"version {version}" if version else "deleted"
            what = ("the proposal creates it, but a file was written there since" if p.before is None
                    else "the proposal deletes it, but its content changed since" if p.after is None
                    else "the file was deleted since")
            why = f"{made}, now {now}): {what}; it is not applied"
        else:
            merged = merge(p.before, p.after, current)
            if isinstance(merged, str):
                if merged == current:
                    return Checked(p, "stale", version, None, "",
                                   f"{made}) and already reads as the proposal would make it")
                return Checked(p, "rebased", version, merged, unified_diff(current, merged, p.shown, p.shown),
                               f"{made}); re-based onto version {version}")
            why = (f"{made}, now version {version}) and its change to {merged.line} overlaps those "
                   f"changes; it is not applied")
        return Checked(p, "conflict", version, None, unified_diff(p.before, p.after, p.shown, p.shown), why,
                       since=unified_diff(p.before, current, p.shown, p.shown))

    def source(self, p: Proposal) -> str:
        """Where a proposal came from, for a list: ``reflect run 7``, or who queued the write
        (a queued write has no run of its own to name)."""
        client = self._client(p)
        return f"reflect run {p.run_id}" if client is None else f"queued by {queued_by(client)}"

    def can_repropose(self, p: Proposal) -> bool:
        """Only a reflection run can redo a proposal; a queued write (an MCP client's, a
        `memagent run`'s) cannot."""
        return self._client(p) is None

    def _client(self, p: Proposal) -> str | None:
        """The MCP client that queued ``p`` (None: a reflection run made it)."""
        run = self.queue.run(p.run_id)
        if run is not None and run.model.startswith(QUEUED_BY):
            return run.model[len(QUEUED_BY):]
        return None

    def origin(self, p: Proposal) -> Origin:
        """Where the applied revision says the change came from: the reflection run and
        its threads, or the MCP client whose write was queued."""
        client = self._client(p)
        if client is not None and client.startswith(MEMAGENT_PREFIX):
            # Queued by an approval rule (or unattended) in `memagent chat` or `memagent run`.
            return Origin("chat", detail=f"{client}, queued as proposal #{p.id}"[:300])
        if client is not None and client.startswith(INTEGRATION_PREFIX):
            # An integration's queued change (``integrations/_folder.py``), not an MCP client's.
            adapter = client[len(INTEGRATION_PREFIX):]
            return Origin("integration", detail=f"{adapter}, queued as proposal #{p.id}"[:300])
        if client is not None:
            return Origin("mcp", detail=f"{client}, queued as proposal #{p.id}"[:300])
        return reflection_origin(p.run_id, p.threads)

    def request(self, c: Checked) -> ApprovalRequest:
        p = c.proposal
        op: Literal["write", "edit", "delete"] = p.op
        threads = ", ".join(t[:8] for t in p.threads)
        client = self._client(p)
        if client is not None:
            note = f"proposal #{p.id}, a write queued by {queued_by(client)}"
        else:
            note = f"proposal #{p.id} from reflect run {p.run_id}" + (f" (threads {threads})" if threads else "")
        if c.state == "rebased":
            note += f"\n{c.why}"
        return ApprovalRequest(op, p.shown, c.diff, new_file=c.version == 0 and c.after is not None,
                               note=note, reason=p.reason)

    def approve(self, c: Checked, *, approval: Literal["human", "yolo"] = "human") -> Change:
        """Apply a checked proposal through the write path (``StaleVersion`` if the file moved on)."""
        p = c.proposal
        if c.state in ("stale", "conflict"):
            raise StaleVersion(c.why)
        change = commit_proposal(self.view, p.shown, p.op, c.after, c.version, p.reason, self.origin(p), approval)
        self.queue.decide(p.id, "applied", applied_version=change.version)
        return change

    def reject(self, p: Proposal, feedback: str = "") -> None:
        self.queue.decide(p.id, "rejected", feedback=feedback)

    def drop(self, c: Checked) -> None:
        self.queue.decide(c.proposal.id, "stale", feedback=c.why)

    def settle(self, c: Checked, resolution: Resolution) -> bool:
        """A person's answer to a conflict: ``repropose`` keeps it for the next reflect run
        (status ``repropose``), ``discard`` drops it (``stale``), ``skip`` leaves it pending.
        Nothing is ever applied. False when it was no longer pending."""
        p = c.proposal
        if c.state != "conflict":
            raise ValueError(f"proposal #{p.id} is {c.state}, not a conflict")
        if resolution == "skip":
            return True
        if resolution == "repropose":
            if not self.can_repropose(p):
                raise VfsError(f"proposal #{p.id} is a write {self.source(p)}; no reflect run can redo it: "
                               f"discard it and let its writer write again")
            return self.queue.decide(p.id, "repropose", feedback=c.why)
        return self.queue.decide(p.id, "stale", feedback=f"discarded in review: {c.why}")


# Asked once per conflicting proposal (``describe_conflict`` shows both sides).
Resolve = Callable[[Checked], Resolution]


@dataclass
class ReviewSummary:
    applied: list[tuple[Proposal, Change]] = field(default_factory=list)
    rejected: list[Proposal] = field(default_factory=list)
    dropped: list[tuple[Proposal, str]] = field(default_factory=list)  # stale, or a conflict discarded
    reproposed: list[Proposal] = field(default_factory=list)
    conflicts: list[tuple[Proposal, str]] = field(default_factory=list)  # left pending
    left: int = 0


def review(view: AgentView, queue: ProposalStore, decide: Decide, *, on_log: Log = lambda _: None,
           ids: Sequence[int] | None = None, resolve: Resolve | None = None) -> ReviewSummary:
    """Go through the pending proposals in order, asking ``decide`` for each.

    ``a`` (always) approves this one and every later one; a stale proposal is
    dropped without asking. A conflict is never applied: it goes to ``resolve``
    (re-propose, discard or skip), or without one it is shown through ``on_log``
    and left pending. A callback that raises ends the review (what was decided
    stays decided). A file that changes between the check and the commit is
    refused by the write path and the proposal stays pending.
    """
    r = Review(view, queue)
    todo = [p for p in r.pending() if ids is None or p.id in ids]
    out = ReviewSummary()
    approve_all = False
    for i, p in enumerate(todo):
        c = r.check(p)
        if c.state == "stale":
            r.drop(c)
            out.dropped.append((p, c.why))
            on_log(f"dropped proposal #{p.id} ({p.op} {p.shown}): {c.why}")
            continue
        if c.state == "conflict":
            if resolve is None:
                out.conflicts.append((p, c.why))
                on_log(f"conflict in proposal #{p.id} ({p.op} {p.shown}), left pending: "
                       f"`memagent review {view.agent}` re-proposes or discards it\n{describe_conflict(c)}")
                continue
            try:
                choice = resolve(c)
            except BaseException:
                out.left = len(todo) - i
                raise
            r.settle(c, choice)
            if choice == "repropose":
                out.reproposed.append(p)
                on_log(f"proposal #{p.id} ({p.op} {p.shown}) kept for the next reflect run to redo against "
                       f"version {c.version}")
            elif choice == "discard":
                out.dropped.append((p, c.why))
                on_log(f"discarded proposal #{p.id} ({p.op} {p.shown})")
            else:
                out.conflicts.append((p, c.why))
            continue
        if not approve_all:
            try:
                decision = decide(r.request(c))
            except BaseException:
                out.left = len(todo) - i
                raise
            if decision.kind == "always":
                approve_all = True
            elif decision.kind == "reject":
                r.reject(p, decision.feedback)
                out.rejected.append(p)
                on_log(f"rejected proposal #{p.id} ({p.op} {p.shown})"
                       + (f": {decision.feedback}" if decision.feedback else ""))
                continue
        try:
            change = r.approve(c)
        except StaleVersion as exc:
            # Changed while the person decided: what they saw is not what would be
            # applied, so nothing is; the next review checks it again.
            out.conflicts.append((p, str(exc)))
            on_log(f"proposal #{p.id} ({p.op} {p.shown}) left pending: {exc}")
            continue
        except VfsError as exc:
            r.queue.decide(p.id, "stale", feedback=str(exc))
            out.dropped.append((p, str(exc)))
            on_log(f"dropped proposal #{p.id} ({p.op} {p.shown}): {exc}")
            continue
        out.applied.append((p, change))
        on_log(f"applied proposal #{p.id}: {p.op} {p.shown} (now version {change.version})")
    return out
