"""Background reflection: conversations in, proposed memory edits out, a person reviews them.

``reflect`` reads an agent's conversations since its last run (``vfs/records/queue.py``
keeps the mark), asks the model — through the ordinary agent loop, with the
``/remember`` and ``/compact`` guidance — for memory edits, and stores them as
pending proposals; ``Review`` applies or rejects them. Two modules hold the rest:
``reflection_drafts`` (the run's file tools, ``DraftTools``) and
``reflection_review`` (checking, re-basing, applying and rejecting proposals). Their
public names are importable from here too (``__all__``), as the front ends do.
Invariants:

- Nothing is applied without review unless the caller asks for yolo: the model's
  write/edit/delete tools here change a draft, never memory (``DraftTools``). Each
  drafted file becomes one proposal: validated (with the validator of its path),
  with the version it was drafted against, the content before and after, the
  model's reasons and the threads the run read.
- Applying, with yolo or in review, takes the normal write path; a proposal whose
  file changed since it was made is re-based only onto whole, unchanged lines and is
  otherwise a conflict, never applied (``reflection_review`` states the rules).
  Re-propose marks a conflict ``repropose``; the next reflect run (even with no new
  conversation) is shown its change and redoes it against the current file, and the
  old proposal becomes ``reproposed`` with that run.
- One run per agent at a time (the lock in ``ProposalStore``); a run with nothing
  new to read (and no conflict sent back) stores nothing and moves no mark; a dry
  run stores nothing at all.
- The core never prints or prompts: progress goes to a ``Log`` callback, review
  decisions come from a ``Decide`` callback (and answers to conflicts from a
  ``Resolve`` callback) the front end supplies.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from typing import Literal

from memagent.agent.loop import Agent, Hooks
from memagent.agent.model import Model
from memagent.agent.reflection_drafts import Draft, DraftTools, NoGate
from memagent.agent.reflection_review import (
    MEMAGENT_PREFIX,
    Checked,
    CheckState,
    Decide,
    Hunk,
    Log,
    Resolution,
    Resolve,
    Review,
    ReviewSummary,
    commit_proposal,
    describe_conflict,
    line_hunks,
    queued_by,
    rebase,
    reflection_origin,
    review,
    split_lines,
)
from memagent.agent.tools import MemoryTools
from memagent.agent.tools.toolset import tool_box
from memagent.vfs import (
    AgentView,
    Change,
    NewProposal,
    Proposal,
    ProposalStore,
    ThreadMessage,
    render_message,
    unified_diff,
)

__all__ = [
    "MAX_THREAD_CHARS", "MAX_TRANSCRIPT_CHARS", "MEMAGENT_PREFIX", "REFLECT_MAX_STEPS",
    "CheckState", "Checked", "Decide", "Draft", "DraftTools", "Hunk", "Log", "ReflectResult", "Resolution",
    "Resolve", "Review", "ReviewSummary", "Status", "describe_conflict", "line_hunks", "note_prompt", "queued_by",
    "rebase", "reflect", "reflection_origin", "review", "split_lines", "transcript",
]

log = logging.getLogger("memagent.agent.reflection")

MAX_TRANSCRIPT_CHARS = 60_000
MAX_THREAD_CHARS = 20_000
REFLECT_MAX_STEPS = 40


def _prompt(name: str) -> str:
    return resources.files("memagent.skills_templates").joinpath(f"prompts/{name}.md").read_text("utf-8").strip()


def note_prompt(note: str) -> str:
    """The turn that routes a ``#`` note / ``memagent remember`` note to the right memory file."""
    return f"{_prompt('note')}\n\n<note>\n{note.strip()}\n</note>"


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


def reflect(view: AgentView, model: Model, queue: ProposalStore, *, since: datetime | None = None,
            dry_run: bool = False, yolo: bool = False, wait: float = 0.0,
            on_log: Log = lambda _: None) -> ReflectResult:
    """One reflection run over ``view``'s agent (see the module docstring).

    Raises ``vfs.records.queue.Busy`` when another run keeps the lock past ``wait``
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
                change = commit_proposal(view, p.shown, p.op, p.after, p.base_version, p.reason, origin, "yolo")
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
    reader = MemoryTools(view, NoGate())
    drafts = DraftTools(view, reader)
    hooks = Hooks(on_model_start=lambda: queue.heartbeat(run_id)) if run_id is not None else Hooks()
    agent = Agent(tool_box("reflection", view, memory=drafts), model, memory=reader, hooks=hooks,
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
