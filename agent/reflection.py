"""Background reflection: conversations in, proposed memory edits out, a person reviews them.

``reflect`` reads an agent's conversations since its last run (``vfs/proposals.py``
keeps the mark), asks the model — through the ordinary agent loop, with the
``/remember`` and ``/compact`` guidance — for memory edits, and stores them as
pending proposals; ``Review`` applies or rejects them. Invariants:

- Nothing is applied without review unless the caller asks for yolo: the model's
  write/edit/delete tools here change a draft, never memory (``DraftTools``). Each
  drafted file becomes one proposal: validated (with the validator of its path),
  with the version it was drafted against, the content before and after, the
  model's reasons and the threads the run read.
- Applying takes the normal write path (``prepare_write``/``prepare_delete`` with
  the proposal's base version, then ``commit``), author ``agent``, origin
  ``reflect`` with the run and its threads, approval ``human`` (review) or
  ``yolo``. A proposal whose file changed since it was made is never applied as
  is: it is re-based (its one changed block re-applied to the file as it is now,
  when that block is still there exactly once) and shown again, or dropped.
- One run per agent at a time (the lock in ``ProposalStore``); a run with nothing
  new to read stores nothing and moves no mark; a dry run stores nothing at all.
- The core never prints or prompts: progress goes to a ``Log`` callback, review
  decisions come from a ``Decide`` callback the front end supplies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from typing import Any, Literal

from memagent.agent.gate import Decision
from memagent.agent.loop import Agent, Hooks
from memagent.agent.model import Model
from memagent.agent.tools import ApprovalRequest, MemoryTools, Outcome, ToolBox, ToolResult
from memagent.agent.tools.memory import DEFINITIONS as FILE_TOOLS
from memagent.agent.tools.memory import one_line_reason
from memagent.agent.tools.search import SearchTools
from memagent.vfs import episodes
from memagent.vfs.edits import apply_edit, unified_diff
from memagent.vfs.errors import NotFound, StaleVersion, VfsError
from memagent.vfs.proposals import QUEUED_BY, NewProposal, Proposal, ProposalOp, ProposalStore, ThreadMessage
from memagent.vfs.render import render_numbered
from memagent.vfs.scopes import AgentView
from memagent.vfs.types import Change, FileContent, Origin, PendingChange

log = logging.getLogger("memagent.agent.reflection")

Log = Callable[[str], None]
# Asked once per proposal with the approval request (its diff, reason and note).
Decide = Callable[[ApprovalRequest], Decision]

MAX_TRANSCRIPT_CHARS = 60_000
MAX_THREAD_CHARS = 20_000
REFLECT_MAX_STEPS = 40


def _prompt(name: str) -> str:
    return resources.files("memagent.skills_templates").joinpath(f"prompts/{name}.md").read_text("utf-8").strip()


def note_prompt(note: str) -> str:
    """The turn that routes a ``#`` note / ``memagent remember`` note to the right memory file."""
    return f"{_prompt('note')}\n\n<note>\n{note.strip()}\n</note>"


# -- drafts: the model's edits during a run --------------------------------------------


@dataclass
class Draft:
    shown: str
    base_version: int  # 0: no live file when first touched
    before: str | None
    after: str | None  # None: deleted in the draft
    reasons: list[str] = field(default_factory=list)


_PROPOSE = " Nothing is applied now: the change is stored as a proposal the user reviews later."
_DRAFT_DEFS: list[dict[str, Any]] = [
    {**d, "description": d["description"].replace(" A person approves it.", "")
     .replace(" Validated; a person approves it.", " Validated.") + _PROPOSE}
    if d["name"] in ("write_file", "edit_file", "delete_file") else d
    for d in FILE_TOOLS
]


class DraftTools:
    """The file tools for a reflection run: reads go to memory (or the draft of a file
    already changed in this run), writes change the draft only."""

    def __init__(self, view: AgentView, reader: MemoryTools) -> None:
        self.view = view
        self.reader = reader
        self.drafts: dict[str, Draft] = {}

    def definitions(self) -> list[dict[str, Any]]:
        return _DRAFT_DEFS

    def run(self, name: str, args: dict[str, Any]) -> ToolResult:
        if name == "read_file":
            return self._read_file(**args)
        if name == "write_file":
            return self._write_file(**args)
        if name == "edit_file":
            return self._edit_file(**args)
        if name == "delete_file":
            return self._delete_file(**args)
        return self.reader.run(name, args)

    def _current(self, path: str) -> Draft:
        """The draft of ``path`` (view path), started from memory as it is now."""
        target = self.view.resolve(path, write=True)
        shown = target.shown
        if shown in self.drafts:
            return self.drafts[shown]
        try:
            fc = self.view.read(shown)
            draft = Draft(shown, fc.version, fc.content, fc.content)
        except NotFound:
            draft = Draft(shown, 0, None, None)
        self.drafts[shown] = draft
        return draft

    def _read_file(self, file_path: str, offset: int = 0, limit: int = 2000) -> ToolResult:
        shown = self.view.resolve(file_path).shown
        draft = self.drafts.get(shown)
        if draft is None:
            return self.reader.run("read_file", {"file_path": file_path, "offset": offset, "limit": limit})
        if draft.after is None:
            return ToolResult(f"{shown} is deleted in your proposals; write_file to propose it again", True)
        lines = draft.after.splitlines(keepends=True)
        chosen = lines[offset : offset + limit]
        return ToolResult(render_numbered(FileContent(shown, "".join(chosen), draft.base_version, len(lines),
                                                      offset, len(chosen))) + "\n(your proposed text)")

    def _record(self, draft: Draft, after: str | None, reason: str, verb: str) -> ToolResult:
        if after is not None:
            self.view.check(draft.shown, after)
        draft.after = after
        line = one_line_reason(reason)
        if line and line not in draft.reasons:
            draft.reasons.append(line)
        return ToolResult(f"Proposed: {verb} {draft.shown} (stored for review when you finish; not applied).")

    def _write_file(self, file_path: str, content: str, reason: str = "") -> ToolResult:
        draft = self._current(file_path)
        return self._record(draft, content, reason, "write")

    def _edit_file(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False,
                   reason: str = "") -> ToolResult:
        draft = self._current(file_path)
        if draft.after is None:
            raise NotFound(f"no file at {draft.shown}; use write_file to propose a new file")
        after = apply_edit(draft.shown, draft.after, old_string, new_string, replace_all)
        return self._record(draft, after, reason, "edit")

    def _delete_file(self, file_path: str, reason: str = "") -> ToolResult:
        draft = self._current(file_path)
        if draft.after is None:
            raise NotFound(f"no file at {draft.shown}; nothing to delete")
        return self._record(draft, None, reason, "delete")

    def proposals(self) -> list[NewProposal]:
        out: list[NewProposal] = []
        for shown in sorted(self.drafts):
            d = self.drafts[shown]
            if d.after == d.before:
                continue
            op: ProposalOp = "delete" if d.after is None else ("write" if d.before is None else "edit")
            target = self.view.resolve(shown, write=True)
            out.append(NewProposal(target.scope, target.path, shown, op, d.base_version, d.before, d.after,
                                   "; ".join(d.reasons)))
        return out


class _NoGate:
    """Reflection's reader never commits; a gate that refuses keeps it that way."""

    def check(self, request: ApprovalRequest) -> Outcome:
        return Outcome(False, "human", "reflection does not write memory directly")


# -- a run ---------------------------------------------------------------------------------


Status = Literal["done", "nothing", "busy", "dry-run"]


@dataclass
class ReflectResult:
    status: Status
    run_id: int | None = None
    threads: list[str] = field(default_factory=list)
    proposals: list[NewProposal] = field(default_factory=list)
    proposal_ids: list[int] = field(default_factory=list)
    applied: list[Change] = field(default_factory=list)
    answer: str = ""
    message: str = ""


def transcript(rows: Sequence[ThreadMessage]) -> tuple[str, list[str]]:
    """The messages as Markdown, grouped by thread (newest threads kept within the bounds)."""
    order: list[str] = []
    by_thread: dict[str, list[ThreadMessage]] = {}
    for m in rows:
        if m.thread_id not in by_thread:
            order.append(m.thread_id)
            by_thread[m.thread_id] = []
        by_thread[m.thread_id].append(m)
    parts: list[str] = []
    used: list[str] = []
    total = 0
    for tid in reversed(order):  # newest activity last in ``rows``: keep the newest threads
        msgs = by_thread[tid]
        body = "".join(episodes.render_message(m.role, m.content, m.created_at, state=m.state) for m in msgs)
        if not body.strip():
            continue
        if len(body) > MAX_THREAD_CHARS:
            body = "\n_(earlier part of this conversation left out)_\n" + body[-MAX_THREAD_CHARS:]
        title = msgs[0].title or "untitled"
        piece = (f"<conversation thread=\"{tid[:8]}\" title=\"{' '.join(title.split())[:80]}\" "
                 f"from=\"{msgs[0].created_at:%Y-%m-%d %H:%M}\">\n{body.strip()}\n</conversation>\n")
        if total + len(piece) > MAX_TRANSCRIPT_CHARS and parts:
            break
        parts.append(piece)
        used.append(tid)
        total += len(piece)
    return "\n".join(reversed(parts)), list(reversed(used))


def _has_user_text(rows: Sequence[ThreadMessage]) -> bool:
    for m in rows:
        if m.role != "user":
            continue
        if isinstance(m.content, str) and m.content.strip():
            return True
        if isinstance(m.content, list) and any(isinstance(b, dict) and b.get("type") == "text"
                                               and str(b.get("text", "")).strip() for b in m.content):
            return True
    return False


def reflection_origin(run_id: int, threads: Sequence[str]) -> Origin:
    detail = "threads " + ", ".join(t[:8] for t in threads) if threads else ""
    return Origin("reflect", thread=threads[0] if len(threads) == 1 else None, run=run_id, detail=detail[:300])


def reflect(view: AgentView, model: Model, queue: ProposalStore, *, since: datetime | None = None,
            dry_run: bool = False, yolo: bool = False, wait: float = 0.0,
            on_log: Log = lambda _: None) -> ReflectResult:
    """One reflection run over ``view``'s agent (see the module docstring).

    Raises ``vfs.proposals.Busy`` when another run keeps the lock past ``wait``
    seconds, and ``ModelError`` when the model fails (the run is then marked failed).
    """
    agent = view.agent
    run = queue.start_run(agent, model=model.name, wait=wait)
    try:
        last = queue.last_finished(agent)
        after = None if since is not None else (last.upto_message if last is not None else None)
        rows = queue.messages_after(agent, after_id=after, since=since)
        if not rows or not _has_user_text(rows):
            queue.finish_run(run.id, "dry-run" if dry_run else "empty",
                             upto_message=last.upto_message if last else None,
                             note="no new conversations")
            when = f" since run {last.id} ({last.finished_at:%Y-%m-%d %H:%M} UTC)" if last and last.finished_at \
                else ""
            return ReflectResult("nothing", run.id, message=f"nothing to reflect on: no new conversation{when}")
        text, used = transcript(rows)
        upto = max(m.id for m in rows)
        answer, drafts = _ask(view, model, queue, run.id, text)
        new = drafts.proposals()
        origin = reflection_origin(run.id, used)
        if dry_run:
            queue.finish_run(run.id, "dry-run", threads=used, note="dry run: nothing stored")
            for p in new:
                on_log(f"would propose: {p.op} {p.shown}" + (f" — {p.reason}" if p.reason else ""))
            return ReflectResult("dry-run", run.id, used, new, answer=answer,
                                 message=f"dry run: {len(new)} proposal(s), nothing stored")
        applied: list[Change] = []
        if yolo:
            for p in new:
                change = _commit(view, p.shown, p.op, p.after, p.base_version, p.reason, origin, "yolo")
                applied.append(change)
                on_log(f"applied {p.op} {p.shown} (now version {change.version})"
                       + (f" — {p.reason}" if p.reason else "") + f" [reflect run {run.id}]")
        ids = queue.finish_run(run.id, "done", upto_message=upto, threads=used, new=new,
                               proposal_status="applied" if yolo else "pending")
        if not yolo:
            for pid, p in zip(ids, new, strict=True):
                on_log(f"proposal #{pid}: {p.op} {p.shown}" + (f" — {p.reason}" if p.reason else "")
                       + f" [reflect run {run.id}]")
        what = (f"{len(applied)} change(s) applied (yolo)" if yolo
                else f"{len(new)} proposal(s) waiting for review (`memagent review {agent}`)" if new
                else "no memory changes proposed")
        return ReflectResult("done", run.id, used, new, ids, applied, answer,
                             f"reflect run {run.id}: read {len(used)} conversation(s); {what}")
    except BaseException as exc:
        if run.id is not None:
            try:
                queue.finish_run(run.id, "failed", note=f"{type(exc).__name__}: {exc}"[:500])
            except Exception:  # noqa: BLE001 - the original error matters more
                log.exception("could not mark reflect run %s failed", run.id)
        raise


def _ask(view: AgentView, model: Model, queue: ProposalStore, run_id: int, text: str) -> tuple[str, DraftTools]:
    reader = MemoryTools(view, _NoGate())
    drafts = DraftTools(view, reader)
    hooks = Hooks(on_model_start=lambda: queue.heartbeat(run_id))
    agent = Agent(ToolBox([drafts, SearchTools(view)]), model, memory=reader, hooks=hooks,
                  max_steps=REFLECT_MAX_STEPS)
    rejected = queue.recent_rejections(view.agent)
    lessons = ""
    if rejected:
        lessons = "\n\nThe user rejected these earlier proposals, with this feedback; take it into account:\n" + \
            "\n".join(f"- {p.op} {p.shown}: {' '.join(p.feedback.split())[:300]}" for p in rejected)
    prompt = f"{_prompt('reflect')}{lessons}\n\nThe conversations since the last reflection:\n\n{text}"
    result = agent.turn(prompt, title="reflect")
    return result.text, drafts


# -- applying and reviewing -----------------------------------------------------------------


def _commit(view: AgentView, shown: str, op: str, after: str | None, base: int, reason: str, origin: Origin,
            approval: Literal["human", "yolo"]) -> Change:
    pending: PendingChange = (view.prepare_delete(shown, expected_version=base) if after is None
                              else view.prepare_write(shown, after, expected_version=base))
    return view.commit(pending, author="agent", approval=approval, message=reason or f"reflect: {op}",
                       origin=origin)


def rebase(before: str | None, after: str | None, current: str | None) -> str | None:
    """``after``'s change re-applied to ``current``, or None when it cannot be done safely.

    The change is the one block between the text ``before`` and ``after`` share at
    the start and at the end (whole lines); it re-applies when that block of
    ``before`` occurs exactly once in ``current``.
    """
    if before is None or after is None or current is None:
        return None
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    old = "".join(a[head : len(a) - tail])
    new = "".join(b[head : len(b) - tail])
    if not old:
        # A pure insertion: anchor it on the line before it (or the start).
        anchor = a[head - 1] if head else ""
        if not anchor:
            return new + current
        if current.count(anchor) != 1:
            return None
        at = current.index(anchor) + len(anchor)
        return current[:at] + new + current[at:]
    if current.count(old) != 1:
        return None
    return current.replace(old, new)


@dataclass(frozen=True)
class Checked:
    """A pending proposal as it stands now: fresh, re-based onto a newer version, or stale."""

    proposal: Proposal
    state: Literal["fresh", "rebased", "stale"]
    version: int  # the file's version now (0: no live file)
    after: str | None  # what applying would write (re-based when needed)
    diff: str
    why: str = ""


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
        now = f"version {version}" if version else "deleted"
        rebased = rebase(p.before, p.after, current)
        if rebased is None or rebased == current:
            return Checked(p, "stale", version, None, "",
                           f"{p.shown} changed since this proposal (made against version {p.base_version}, now "
                           f"{now}) and the change no longer applies")
        return Checked(p, "rebased", version, rebased, unified_diff(current, rebased, p.shown, p.shown),
                       f"{p.shown} changed since this proposal (made against version {p.base_version}); "
                       f"re-based onto version {version}")

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
        if client is not None:
            return Origin("mcp", detail=f"{client}, queued as proposal #{p.id}"[:300])
        return reflection_origin(p.run_id, p.threads)

    def request(self, c: Checked) -> ApprovalRequest:
        p = c.proposal
        op: Literal["write", "edit", "delete"] = p.op
        threads = ", ".join(t[:8] for t in p.threads)
        client = self._client(p)
        if client is not None:
            note = f"proposal #{p.id}, a write queued by MCP client {client}"
        else:
            note = f"proposal #{p.id} from reflect run {p.run_id}" + (f" (threads {threads})" if threads else "")
        if c.state == "rebased":
            note += f"\n{c.why}"
        return ApprovalRequest(op, p.shown, c.diff, new_file=c.version == 0 and c.after is not None,
                               note=note, reason=p.reason)

    def approve(self, c: Checked, *, approval: Literal["human", "yolo"] = "human") -> Change:
        """Apply a checked proposal through the write path (``StaleVersion`` if the file moved on)."""
        p = c.proposal
        if c.state == "stale":
            raise StaleVersion(c.why)
        change = _commit(self.view, p.shown, p.op, c.after, c.version, p.reason, self.origin(p), approval)
        self.queue.decide(p.id, "applied", applied_version=change.version)
        return change

    def reject(self, p: Proposal, feedback: str = "") -> None:
        self.queue.decide(p.id, "rejected", feedback=feedback)

    def drop(self, c: Checked) -> None:
        self.queue.decide(c.proposal.id, "stale", feedback=c.why)


@dataclass
class ReviewSummary:
    applied: list[tuple[Proposal, Change]] = field(default_factory=list)
    rejected: list[Proposal] = field(default_factory=list)
    dropped: list[tuple[Proposal, str]] = field(default_factory=list)
    left: int = 0


def review(view: AgentView, queue: ProposalStore, decide: Decide, *, on_log: Log = lambda _: None,
           ids: Sequence[int] | None = None) -> ReviewSummary:
    """Go through the pending proposals in order, asking ``decide`` for each.

    ``a`` (always) approves this one and every later one; a stale proposal is
    dropped without asking; a decision callback that raises ends the review (what
    was decided stays decided).
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
            on_log(f"dropped proposal #{p.id} ({p.op} {p.shown}): {c.why}; run reflect again for a fresh one")
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
        except (StaleVersion, VfsError) as exc:
            r.queue.decide(p.id, "stale", feedback=str(exc))
            out.dropped.append((p, str(exc)))
            on_log(f"dropped proposal #{p.id} ({p.op} {p.shown}): {exc}")
            continue
        out.applied.append((p, change))
        on_log(f"applied proposal #{p.id}: {p.op} {p.shown} (now version {change.version})")
    return out
