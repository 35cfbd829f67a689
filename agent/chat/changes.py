"""The person's own acts on this session's memory edits: undo, redo, and the session's diff.

Invariants:
- Undo and redo walk the session's ``ChangeLog`` stacks (``undoable``, newest last;
  ``redoable``) and each makes one new revision, author ``user``, approval
  ``human``, through the one write path (``prepare_*`` -> ``vfs.entrance.submit`` with
  the person's own approval -> ``commit``): the content is validated, the version
  read is checked, and nothing is lost.
- A file is undone or redone only while it is at the version this session last
  left it at (``ChangeLog.last_version``); if anyone else has changed it since, the
  act is refused with ``Refused``, changing nothing. An undo's own revision is this
  session's, so undo stacks: ``/undo`` three times takes back three edits.
- After an undo or redo the model's idea of the file is stale: ``seen`` forgets it,
  so the agent must read it again before it overwrites it.
"""

from __future__ import annotations

from dataclasses import dataclass

from memagent.agent.tools import ChangeLog, MemoryTools
from memagent.vfs import (
    AgentView,
    Change,
    Origin,
    VfsError,
    approved_policy,
    require_change,
    submit_change,
    unified_diff,
)


class Refused(VfsError):
    """An undo or redo that would overwrite someone else's change; nothing was changed."""


@dataclass(frozen=True)
class Done:
    """What one undo or redo did: the edit it acted on and the revision it made."""

    edit: Change
    revision: Change

    def describe(self, act: str) -> str:
        e, path, now = self.edit, self.edit.path, self.revision.version
        if act == "undo":
            if e.before is None:
                what = f"removed {path}, which that edit created"
            elif e.after is None:
                what = f"restored {path}, which that edit deleted"
            else:
                what = f"{path} is back to version {e.version - 1}"
            return f"Undone: {what} (recorded as version {now})."
        what = f"deleted {path} again" if e.after is None else f"{path} has version {e.version}'s content again"
        return f"Redone: {what} (recorded as version {now})."


def _head(view: AgentView, path: str) -> int:
    """The newest version of ``path`` (a deletion counts), 0 if it has no history."""
    revs = view.history(path)
    return revs[0].version if revs else 0


def _untouched(log: ChangeLog, view: AgentView, path: str, act: str) -> int:
    current = _head(view, path)
    mine = log.last_version(path)
    if current != mine:
        raise Refused(
            f"cannot {act}: {path} changed after that edit (it is now version {current}) and not "
            f"in this session, which left it at version {mine}; see /history {path}, and "
            f"`memagent fs revert {path} --to N` brings back any version")
    return current


def _set(view: AgentView, path: str, content: str | None, current: int, message: str,
         origin: Origin | None) -> Change:
    if content is None:
        pending = view.prepare_delete(path, expected_version=current)
    else:
        live = view.exists(path)
        pending = view.prepare_write(path, content, expected_version=current if live else 0)
    # The person's own act: approved as theirs ("human"), no one else is asked.
    return require_change(submit_change(view.store, pending, policy=approved_policy("human"), author="user",
                                        origin=origin, reason=message))


def undo(memory: MemoryTools, origin: Origin | None = None) -> Done | None:
    """Take back the newest undoable edit of this session; None if there is none."""
    log, view = memory.log, memory.view
    if not log.undoable:
        return None
    edit = log.undoable[-1]
    current = _untouched(log, view, edit.path, "undo")
    revision = _set(view, edit.path, edit.before, current, f"undo version {edit.version}", origin)
    log.record_undo(edit, revision)
    memory.seen.pop(edit.path, None)
    return Done(edit, revision)


def redo(memory: MemoryTools, origin: Origin | None = None) -> Done | None:
    """Re-apply the newest edit ``undo`` took back; None if there is none."""
    log, view = memory.log, memory.view
    if not log.redoable:
        return None
    edit = log.redoable[-1]
    current = _untouched(log, view, edit.path, "redo")
    revision = _set(view, edit.path, edit.after, current, f"redo version {edit.version}", origin)
    log.record_redo(edit, revision)
    memory.seen.pop(edit.path, None)
    return Done(edit, revision)


def session_diff(log: ChangeLog, path: str | None = None) -> list[tuple[str, str]]:
    """(path, unified diff) per file this session changed, from before its first change
    to after its last; files whose changes cancel out give an empty diff."""
    first: dict[str, str | None] = {}
    last: dict[str, str | None] = {}
    for change in log.made:
        if path is not None and change.path != path:
            continue
        first.setdefault(change.path, change.before)
        last[change.path] = change.after
    return [(p, unified_diff(first[p], last[p], p, p)) for p in first]
