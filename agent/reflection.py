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
  the proposal's base version, then ``vfs.writes.submit``), author ``agent``, origin
  ``reflect`` with the run and its threads, approval ``human`` (review) or
  ``yolo``. A proposal whose file changed since it was made is never applied as
  is. It is re-based only when every hunk of its change applies to whole,
  unchanged lines: the hunk's lines and the line on either side of them occur
  exactly once in the file as it is now (``_merge``, a line-based three-way merge).
  Anything else — a line edited, glued, split or inserted inside a hunk or next to
  it, an ambiguous place, a file created or deleted since — is a ``conflict``:
  review shows both sides (``describe_conflict``) and a person re-proposes or
  discards it; it is never applied. Re-propose marks it ``repropose``; the next
  reflect run (even with no new conversation) is shown its change and redoes it
  against the current file, and the old proposal becomes ``reproposed`` with that
  run. A proposal the file already reflects is dropped as ``stale``, unasked.
- One run per agent at a time (the lock in ``ProposalStore``); a run with nothing
  new to read (and no conflict sent back) stores nothing and moves no mark; a dry
  run stores nothing at all.
- The core never prints or prompts: progress goes to a ``Log`` callback, review
  decisions come from a ``Decide`` callback (and answers to conflicts from a
  ``Resolve`` callback) the front end supplies.
"""

from __future__ import annotations

import difflib
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
from memagent.agent.tools.search import SearchTools
from memagent.vfs import (
    INTEGRATION_PREFIX,
    QUEUED_BY,
    AgentView,
    Change,
    FileContent,
    NewProposal,
    NotFound,
    Origin,
    PendingChange,
    Proposal,
    ProposalOp,
    ProposalStore,
    StaleVersion,
    ThreadMessage,
    VfsError,
    apply_edit,
    approved_policy,
    check_message,
    reason_line,
    render_message,
    render_numbered,
    require_change,
    submit_change,
    unified_diff,
)

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
        line = reason_line(reason)
        check_message(draft.shown, line)  # a reason carrying a secret is refused now, not at review
        draft.after = after
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
        body = "".join(render_message(m.role, m.content, m.created_at, state=m.state) for m in msgs)
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
    # A dry run stores nothing, so it takes no run (no number used up, no lock: it only reads).
    run = None if dry_run else queue.start_run(agent, model=model.name, wait=wait)
    run_id = run.id if run is not None else None
    try:
        last = queue.last_finished(agent)
        after = None if since is not None else (last.upto_message if last is not None else None)
        rows = queue.messages_after(agent, after_id=after, since=since)
        # Conflicts a person sent back from review: redone even with no new conversation.
        redo = queue.to_repropose(agent)
        if (not rows or not _has_user_text(rows)) and not redo:
            if run_id is not None:
                queue.finish_run(run_id, "empty", upto_message=last.upto_message if last else None,
                                 note="no new conversations")
            when = f" since run {last.id} ({last.finished_at:%Y-%m-%d %H:%M} UTC)" if last and last.finished_at \
                else ""
            return ReflectResult("nothing", run_id, message=f"nothing to reflect on: no new conversation{when}")
        text, used = transcript(rows)
        upto = max((m.id for m in rows), default=last.upto_message if last else None)
        answer, drafts = _ask(view, model, queue, run_id, text, redo)
        new = drafts.proposals()
        if run_id is None:  # the dry run
            for p in new:
                on_log(f"would propose: {p.op} {p.shown}" + (f" — {p.reason}" if p.reason else ""))
            return ReflectResult("dry-run", None, used, new, answer=answer,
                                 message=f"dry run: {len(new)} proposal(s), nothing stored")
        assert run_id is not None  # only a dry run has none
        origin = reflection_origin(run_id, used)
        applied: list[Change] = []
        if yolo:
            for p in new:
                change = _commit(view, p.shown, p.op, p.after, p.base_version, p.reason, origin, "yolo")
                applied.append(change)
                on_log(f"applied {p.op} {p.shown} (now version {change.version})"
                       + (f" — {p.reason}" if p.reason else "") + f" [reflect run {run_id}]")
        ids = queue.finish_run(run_id, "done", upto_message=upto, threads=used, new=new,
                               proposal_status="applied" if yolo else "pending",
                               reproposed=[p.id for p in redo])
        if not yolo:
            for pid, p in zip(ids, new, strict=True):
                on_log(f"proposal #{pid}: {p.op} {p.shown}" + (f" — {p.reason}" if p.reason else "")
                       + f" [reflect run {run_id}]")
        what = (f"{len(applied)} change(s) applied (yolo)" if yolo
                else f"{len(new)} proposal(s) waiting for review (`memagent review {agent}`)" if new
                else "no memory changes proposed")
        return ReflectResult("done", run_id, used, new, ids, applied, answer,
                             f"reflect run {run_id}: read {len(used)} conversation(s); {what}")
    except BaseException as exc:
        if run_id is not None:
            try:
                queue.finish_run(run_id, "failed", note=f"{type(exc).__name__}: {exc}"[:500])
            except Exception:  # noqa: BLE001 - the original error matters more
                log.exception("could not mark reflect run %s failed", run_id)
        raise


def _redo_section(redo: Sequence[Proposal]) -> str:
    """The conflicts a person sent back, each with the change it made (bounded)."""
    if not redo:
        return ""
    parts = ["\n\nThe user sent these earlier proposals back: the file changed since they were made and "
             "they no longer apply. Read each file as it is now and, if the change is still worth making, "
             "propose it again against the current text (or leave it if the user's own edit covers it):"]
    for p in redo:
        diff = unified_diff(p.before, p.after, p.shown, p.shown)
        if len(diff) > 4000:
            diff = diff[:4000] + "\n(diff cut)\n"
        parts.append(f"- proposal #{p.id}: {p.op} {p.shown}" + (f" — {p.reason}" if p.reason else "")
                     + f"\n```diff\n{diff.rstrip()}\n```")
    return "\n".join(parts)


def _ask(view: AgentView, model: Model, queue: ProposalStore, run_id: int | None, text: str,
         redo: Sequence[Proposal] = ()) -> tuple[str, DraftTools]:
    reader = MemoryTools(view, _NoGate())
    drafts = DraftTools(view, reader)
    hooks = Hooks(on_model_start=lambda: queue.heartbeat(run_id)) if run_id is not None else Hooks()
    agent = Agent(ToolBox([drafts, SearchTools(view)]), model, memory=reader, hooks=hooks,
                  max_steps=REFLECT_MAX_STEPS)
    rejected = queue.recent_rejections(view.agent)
    lessons = ""
    if rejected:
        lessons = "\n\nThe user rejected these earlier proposals, with this feedback; take it into account:\n" + \
            "\n".join(f"- {p.op} {p.shown}: {' '.join(p.feedback.split())[:300]}" for p in rejected)
    prompt = (f"{_prompt('reflect')}{lessons}{_redo_section(redo)}\n\nThe conversations since the last "
              f"reflection:\n\n{text or '(none new)'}")
    result = agent.turn(prompt, title="reflect")
    return result.text, drafts


# -- applying and reviewing -----------------------------------------------------------------


def _commit(view: AgentView, shown: str, op: str, after: str | None, base: int, reason: str, origin: Origin,
            approval: Literal["human", "yolo"]) -> Change:
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
class _Clash:
    hunk: Hunk
    line: str  # the proposal's line that no longer stands where it did, for the message


def _merge(before: str, after: str, current: str) -> str | _Clash:
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
        clash = _Clash(h, _describe_line(h, base))
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
    side of them, as whole, unchanged lines of ``current``, exactly once (see ``_merge``);
    a missing side (a new or deleted file) never re-bases.
    """
    if before is None or after is None or current is None:
        return None
    merged = _merge(before, after, current)
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
        merged: str | _Clash | None = None
        if p.before is None or p.after is None or current is None:
            now = f"version {version}" if version else "deleted"
            what = ("the proposal creates it, but a file was written there since" if p.before is None
                    else "the proposal deletes it, but its content changed since" if p.after is None
                    else "the file was deleted since")
            why = f"{made}, now {now}): {what}; it is not applied"
        else:
            merged = _merge(p.before, p.after, current)
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
        change = _commit(self.view, p.shown, p.op, c.after, c.version, p.reason, self.origin(p), approval)
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
