"""Reflection's file tools: the model's writes during a run change a draft, never memory.

``DraftTools`` is the tool provider a reflection run (``reflection.reflect``) gives
its agent in place of the memory tools' writers. It reuses what does not write:
the memory tools' definitions (``tools.memory.DEFINITIONS``, their descriptions saying
that nothing is applied now) and a ``MemoryTools`` reader for ``ls``, ``glob``,
``grep`` and ``read_file`` of a file the run has not touched; the edit itself is
vfs's ``apply_edit``, the validation the view's ``check``, the reason vfs's
``reason_line``. It does not take ``MemoryTools``' write path: a run's changes to one
file chain in its draft (a second edit applies to the drafted text, which memory does
not hold), and all of them become one proposal against the version first read.

Invariants:
- Nothing here commits: ``NoGate`` refuses every approval the reader could ask for,
  and the write tools only change ``Draft.after``.
- A draft starts from memory as it is when the run first touches the path
  (``base_version``; 0 and ``before`` None when no live file) and reads of that path
  answer the draft from then on.
- Every drafted text passes the validator of its path when drafted, and a reason
  carrying a secret is refused then, not at review.
- ``proposals`` gives one ``NewProposal`` per drafted file whose text differs from
  where it started, in path order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memagent.agent.tools import ApprovalRequest, MemoryTools, Outcome, ToolResult
from memagent.agent.tools.memory import DEFINITIONS as FILE_TOOLS
from memagent.vfs import (
    AgentView,
    FileContent,
    NewProposal,
    NotFound,
    ProposalOp,
    StaleVersion,
    apply_edit,
    check_message,
    reason_line,
    render_numbered,
)


@dataclass
class Draft:
    """One file's draft in a run: where it started (``before`` at ``base_version``) and its text now."""

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

    def _checked(self, file_path: str, expected_version: int | None) -> Draft:
        """The draft of ``file_path``; with ``expected_version`` (the definitions offer it, as the
        memory tools do), refused unless that is the version the draft started from, which is
        what read_file shows for the path during the run (0: no file)."""
        draft = self._current(file_path)
        if expected_version is not None and expected_version != draft.base_version:
            now = f"version {draft.base_version}" if draft.base_version else "no file"
            raise StaleVersion(f"{draft.shown} is at {now} in this run, not version {expected_version}; "
                               "read it again and re-apply your change")
        return draft

    def _write_file(self, file_path: str, content: str, reason: str = "",
                    expected_version: int | None = None) -> ToolResult:
        draft = self._checked(file_path, expected_version)
        return self._record(draft, content, reason, "write")

    def _edit_file(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False,
                   reason: str = "", expected_version: int | None = None) -> ToolResult:
        draft = self._checked(file_path, expected_version)
        if draft.after is None:
            raise NotFound(f"no file at {draft.shown}; use write_file to propose a new file")
        after = apply_edit(draft.shown, draft.after, old_string, new_string, replace_all)
        return self._record(draft, after, reason, "edit")

    def _delete_file(self, file_path: str, reason: str = "", expected_version: int | None = None) -> ToolResult:
        draft = self._checked(file_path, expected_version)
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


class NoGate:
    """Reflection's reader never commits; a gate that refuses keeps it that way."""

    def check(self, request: ApprovalRequest) -> Outcome:
        return Outcome(False, "human", "reflection does not write memory directly")
