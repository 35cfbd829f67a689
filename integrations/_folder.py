"""One agent's folder as another program names it: path mapping and the write path.

``MemoryFolder`` maps the paths a client uses (``/memories/notes.md`` for the
Anthropic memory tool, ``/notes.md`` for deepagents) onto files of the scope
``agent:<name>`` below ``root``, and back. Invariants:

- A client path maps to exactly one inner path below ``root``, or is refused with
  ``InvalidPath`` (``vfs/paths.py`` rules plus the adapter's own, e.g. no ``..``).
  The folders memagent reserves for other scopes (``/user/``, ``/org/``,
  ``/conversations/``) are refused when ``root`` is ``/``: a file stored there in the
  agent's scope would be hidden from every agent view.
- Errors name files as the client names them (the store is passed ``shown``).
- Every change goes ``prepare_*`` -> the approver (if any) -> ``commit`` with author
  ``agent``, approval ``human`` (an approver said yes) or ``yolo`` (no approver), and
  origin ``Origin("integration", detail=<adapter>)``. A change that would leave a file
  as it is stores nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memagent.vfs import paths
from memagent.vfs.errors import InvalidPath, VfsError
from memagent.vfs.store import Store
from memagent.vfs.types import Approval, Change, FileInfo, Origin, PendingChange

# Decides whether a prepared change may be stored (e.g. asks a person); False refuses it.
Approver = Callable[[PendingChange], bool]
# Top-level folders of an agent's view that belong to other scopes (vfs/scopes.py MOUNTS).
RESERVED = ("user", "org", "conversations")


class Refused(VfsError):
    """The approver said no; nothing was stored."""


@dataclass(frozen=True)
class Located:
    """A client path resolved: the inner path in the scope and the path as the client shows it."""

    inner: str
    shown: str


class MemoryFolder:
    """File access to ``agent:<agent>`` below ``root``, shown to the client under ``prefix``."""

    def __init__(self, store: Store, agent: str, *, adapter: str, root: str = "/", prefix: str = "",
                 approve: Approver | None = None) -> None:
        store.require_agent(agent)
        self.store = store
        self.agent = agent
        self.scope = f"agent:{agent}"
        self.adapter = adapter
        self.root = paths.normalize(root)
        if self.root != "/" and self.root.split("/")[1] in RESERVED:
            raise InvalidPath(f"root {self.root} lies in a folder memagent reserves for shared memory; "
                              "choose another folder of the agent")
        self.prefix = prefix.rstrip("/")
        self.approve = approve

    # -- paths ----------------------------------------------------------------

    def locate(self, rel: str) -> Located:
        """``rel`` (a path relative to the folder, ``/`` = the folder itself) resolved."""
        norm = paths.normalize(rel if rel.startswith("/") else "/" + rel)
        if self.root == "/" and norm != "/" and norm.split("/")[1] in RESERVED:
            head = norm.split("/")[1]
            raise InvalidPath(f"{self.prefix}/{head} is reserved by memagent for shared memory; "
                              "store files under another folder name")
        inner = norm if self.root == "/" else (self.root if norm == "/" else self.root + norm)
        return Located(inner, self.show(inner))

    def show(self, inner: str) -> str:
        """An inner path as the client names it."""
        rel = inner if self.root == "/" else inner[len(self.root):] or "/"
        if not self.prefix:
            return rel
        return self.prefix if rel == "/" else self.prefix + rel

    def files_below(self, loc: Located) -> list[FileInfo]:
        """Live files at or below ``loc`` (inner paths), in path order: one query."""
        prefix = paths.dir_prefix(loc.inner)
        return [f for f in self.store.all_files(self.scope) if f.path == loc.inner or f.path.startswith(prefix)]

    # -- the write path ---------------------------------------------------------

    def _approval(self, pending: PendingChange) -> Approval:
        if self.approve is None:
            return "yolo"
        if not self.approve(pending):
            raise Refused(f"the change to {pending.shown} was refused by the approver; nothing was stored")
        return "human"

    def commit(self, pending: PendingChange, message: str = "") -> Change | None:
        """Approve and store ``pending``; None when it would change nothing (then nothing is stored)."""
        if pending.before == pending.after:
            return None
        approval = self._approval(pending)
        return self.store.commit(pending, author="agent", approval=approval, message=message,
                                 origin=Origin("integration", detail=self.adapter))

    def write(self, loc: Located, content: str, *, expected_version: int | None = None,
              message: str = "") -> Change | None:
        pending = self.store.prepare_write(self.scope, loc.inner, content, expected_version=expected_version,
                                           shown=loc.shown)
        return self.commit(pending, message)

    def edit(self, loc: Located, old: str, new: str, *, replace_all: bool, expected_version: int | None = None,
             message: str = "") -> Change | None:
        pending = self.store.prepare_edit(self.scope, loc.inner, old, new, replace_all=replace_all,
                                          expected_version=expected_version, shown=loc.shown)
        return self.commit(pending, message)

    def delete(self, loc: Located, *, message: str = "") -> Change | None:
        pending = self.store.prepare_delete(self.scope, loc.inner, shown=loc.shown)
        return self.commit(pending, message)

    def move(self, src: Located, dst: Located) -> Change:
        """Move one file (one transaction: a delete revision and a create revision)."""
        content = self.store.read(self.scope, src.inner, shown=src.shown).content
        # The approver sees the file as it would arrive; move() validates it again in its transaction.
        self._approval(self.store.prepare_write(self.scope, dst.inner, content, expected_version=0,
                                                shown=dst.shown))
        # move() names files mount + inner path: right when root is "/"; otherwise its rare
        # errors (a race with another writer) name the inner path.
        mount = self.prefix if self.root == "/" else ""
        approval: Approval = "yolo" if self.approve is None else "human"
        return self.store.move(self.scope, src.inner, dst.inner, author="agent", approval=approval, mount=mount,
                               origin=Origin("integration", detail=self.adapter))


__all__ = ["Approver", "Located", "MemoryFolder", "Refused"]
