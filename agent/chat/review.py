"""Working through the review queue with a person: ``/review`` in chat and ``memagent review``.

One presentation and one wording for both: each proposal is asked through the UI's
own approval panel (``UI.confirm``: the coloured box on a terminal, the plain
``--- … ---`` block in a pipe; ``[a]lways`` approves this one and every later one),
and a conflict is shown the same way in both, with the same question. Invariants:

- What the queue holds passes the UI (which escapes everything for the terminal).
- A conflict is never applied: ``[r]e-propose`` (a reflection run's only), ``[d]iscard``
  or ``[s]kip`` (left pending; also the answer at end of input).
- End of input at an approval stops the review: what was decided stays decided, the
  rest stays pending, and one line says how many.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memagent.agent.chat.ui.base import UI, InputClosed
from memagent.agent.reflection import Checked, Resolution, Review, ReviewSummary, describe_conflict, review
from memagent.vfs import AgentView, Change, ProposalStore

CONFLICT_QUESTION = "[r]e-propose, [d]iscard or [s]kip?"
CONFLICT_QUESTION_NO_REDO = "[d]iscard or [s]kip?"


@dataclass(frozen=True)
class Outcome:
    summary: ReviewSummary | None  # None: stopped at end of input
    line: str  # the closing line, already shown


def conflict_block(c: Checked) -> str:
    """A conflicting proposal as both front ends show it: header, reason, both sides."""
    p = c.proposal
    lines = [f"--- CONFLICT in proposal #{p.id}: {p.op} {p.shown} (not applied) ---"]
    if p.reason:
        lines.append(f"reason: {p.reason}")
    lines += [describe_conflict(c), "---"]
    return "\n".join(lines)


def summary_line(summary: ReviewSummary, left: int) -> str:
    redone = f", {len(summary.reproposed)} re-proposed" if summary.reproposed else ""
    return (f"Review done: {len(summary.applied)} applied, {len(summary.rejected)} rejected, "
            f"{len(summary.dropped)} dropped as stale{redone}, {left} pending.")


def work_through(ui: UI, view: AgentView, queue: ProposalStore, *,
                 on_applied: Callable[[Change], None] = lambda _: None) -> Outcome:
    """Ask ``ui`` about each pending proposal of ``view``'s agent, in order."""
    reviewer = Review(view, queue)

    def resolve(c: Checked) -> Resolution:
        can = reviewer.can_repropose(c.proposal)
        ui.info(conflict_block(c))
        while True:
            answer = ui.read_text(CONFLICT_QUESTION if can else CONFLICT_QUESTION_NO_REDO)
            if answer is None:
                return "skip"  # end of input: leave it pending
            word = answer.strip().lower()
            if word in ("r", "re-propose", "repropose") and can:
                return "repropose"
            if word in ("d", "discard"):
                return "discard"
            if word in ("s", "skip"):
                return "skip"
            ui.info("Please answer r, d or s." if can else "Please answer d or s.")

    try:
        summary = review(view, queue, ui.confirm, on_log=ui.info, resolve=resolve)
    except InputClosed:
        line = f"end of input: {queue.count_pending(view.agent)} proposal(s) left pending"
        ui.info(line)
        return Outcome(None, line)
    for _, change in summary.applied:
        on_applied(change)
    line = summary_line(summary, queue.count_pending(view.agent))
    ui.info(line)
    return Outcome(summary, line)
