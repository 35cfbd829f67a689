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
- Every change goes ``prepare_*`` -> ``vfs.entrance.submit`` (no-op check, the
  policy, ``commit`` at the version read) with author ``agent`` and origin
  ``Origin("integration", detail=<adapter>)``. A change that would leave a file as
  it is stores nothing.
- Nothing is applied silently. ``approve`` chooses the policy: a callback (True
  approves, recorded ``human``), ``"yolo"`` (everything, recorded ``yolo``: an
  explicit choice), ``"queue"`` (each change becomes a pending proposal for
  ``memagent review``; ``Queued`` says so) or nothing, the default, which refuses
  every change with ``Refused`` naming how to allow it.
- The agent's approval rules (``vfs/records/rules.py``, set with ``memagent
  approval``) come first, as in chat, ``run`` and ``mcp serve``: the first rule
  matching the tool (``write_file``/``edit_file``/``delete_file``) on the file's path
  in the agent's view decides: ``allow`` stores without asking (recorded ``rule``,
  even without ``approve``), ``queue`` makes a proposal, ``deny`` refuses with the
  rule named (also under ``approve="queue"``: nothing is queued), ``ask`` (or no
  rule) is ``approve``'s policy. The rules are read at each change, so one added
  from another terminal counts at once. ``approve="yolo"`` overrides them, as
  ``--yolo`` does. A move is the delete of its source and the write of its
  destination: a rule must let both through, and one that would queue either
  refuses the move (a review applies one file at a time).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from memagent.vfs import (
    INTEGRATION_PREFIX,
    MOUNTS,
    TOOL_OF_OP,
    Change,
    FileInfo,
    FileTool,
    InvalidPath,
    Match,
    Origin,
    PendingChange,
    RuleBook,
    Store,
    VfsError,
    WritePolicy,
    WriteRefused,
    WriteRequest,
    WriteVerdict,
    asking_policy,
    dir_prefix,
    memory_of,
    move_file,
    normalize_path,
    queue_policy,
    refusing_policy,
    scope_name,
    submit_change,
    yolo_policy,
)

# Decides whether a prepared change may be stored (e.g. asks a person); False refuses it.
Approver = Callable[[PendingChange], bool]
# The explicit choices besides a callback: store everything, or queue everything for review.
ApproveMode = Literal["yolo", "queue"]
Approve = Approver | ApproveMode | None
# Top-level folders of an agent's view that belong to other scopes (defined once in vfs/paths.py).
RESERVED = MOUNTS
# What a refusal without an approver tells the program's author (and its model).
HOW_TO_ALLOW = ('no approver was given; pass approve="yolo" to store changes without asking, '
                'approve=<callback> to decide each one, or approve="queue" to queue them for `memagent review`')


class Refused(WriteRefused):
    """The policy refused the change (no approver, or the approver said no); nothing was stored."""


class Queued(VfsError):
    """The change was stored as a proposal for review, not applied; the message says how to apply it."""


@dataclass(frozen=True)
class Located:
    """A client path resolved: the inner path in the scope and the path as the client shows it."""

    inner: str
    shown: str


class MemoryFolder:
    """File access to ``agent:<agent>`` below ``root``, shown to the client under ``prefix``."""

    def __init__(self, store: Store, agent: str, *, adapter: str, root: str = "/", prefix: str = "",
                 approve: Approve = None) -> None:
        store.require_agent(agent)
        self.store = store
        self.agent = agent
        self.scope = scope_name("agent", agent)
        self.adapter = adapter
        self.root = normalize_path(root)
        if self.root != "/" and self.root.split("/")[1] in RESERVED:
            raise InvalidPath(f"root {self.root} lies in a folder memagent reserves for shared memory; "
                              "choose another folder of the agent")
        self.prefix = prefix.rstrip("/")
        self.approve = approve
        self.rules = RuleBook(store, agent)
        self.asked = self._policy(approve)  # what ``ask`` (no rule) means here
        self.policy = self.asked if approve == "yolo" else _Ruled(self, moving=False)

    def _policy(self, approve: Approve) -> WritePolicy:
        if approve is None:
            return refusing_policy(HOW_TO_ALLOW)
        if approve == "yolo":
            return yolo_policy
        if approve == "queue":
            queue = self.queue_policy()
            if queue is None:
                raise VfsError('approve="queue" needs a store with a database engine (open_store gives one)')
            return queue
        if callable(approve):
            return asking_policy(approve)
        raise VfsError(f'approve must be a callback, "yolo" or "queue", not {approve!r}')

    # -- approval rules -----------------------------------------------------------

    def rule_for(self, tool: FileTool, inner: str) -> Match:
        """The first of the agent's rules matching ``tool`` on ``inner`` (a path of the agent's view)."""
        return self.rules.decide(tool, inner)

    def denied(self, tool: FileTool, shown: str, found: Match) -> str:
        """What a writer is told when ``found`` (a ``deny`` rule) refuses ``tool`` on ``shown``."""
        return (f"{tool} {shown} was refused by approval {found.describe()} of agent {self.agent!r}; nothing was "
                "stored. Do not retry it: tell the user, who can change the rules with `memagent approval`.")

    def queue_policy(self) -> WritePolicy | None:
        """Where a ``queue`` rule sends a change: the agent's review queue (None: the store has none)."""
        records = memory_of(self.store)
        if records is None:  # another program's store, or a double: no review queue
            return None
        return queue_policy(records.queue, self.agent, by=f"{INTEGRATION_PREFIX}{self.adapter}")

    # -- paths ----------------------------------------------------------------

    def locate(self, rel: str) -> Located:
        """``rel`` (a path relative to the folder, ``/`` = the folder itself) resolved."""
        norm = normalize_path(rel if rel.startswith("/") else "/" + rel)
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
        prefix = dir_prefix(loc.inner)
        return [f for f in self.store.all_files(self.scope) if f.path == loc.inner or f.path.startswith(prefix)]

    # -- the write path ---------------------------------------------------------

    def commit(self, pending: PendingChange, message: str = "") -> Change | None:
        """Store ``pending`` if the policy approves; None when it would change nothing.

        ``Refused`` when the policy rejects it and ``Queued`` when it became a proposal:
        either way nothing was stored.
        """
        result = submit_change(self.store, pending, policy=self.policy, author="agent", reason=message,
                               origin=Origin("integration", detail=self.adapter))
        if result.status == "rejected":
            raise Refused(result.message)
        if result.status == "queued":
            raise Queued(result.message)
        return result.change

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
        """Move one file (one transaction: a delete and a create revision) through the write
        entrance, which asks this folder's policy about the file as it would arrive."""
        # move() names files mount + inner path: right when root is "/"; otherwise its rare
        # errors (a race with another writer) name the inner path.
        mount = self.prefix if self.root == "/" else ""
        policy = self.policy
        if self.approve != "yolo":
            # The source's delete is asked of the rules here; the destination's write by the policy.
            found = self.rule_for("delete_file", src.inner)
            if found.action == "deny":
                raise Refused(self.denied("delete_file", src.shown, found))
            if found.action == "queue":
                raise Refused(_unqueueable(src.shown, dst.shown, found))
            policy = _Ruled(self, moving=True)
        result = move_file(self.store, self.scope, src.inner, dst.inner, policy=policy, author="agent",
                             origin=Origin("integration", detail=self.adapter), mount=mount)
        if result.change is None:
            raise Refused(result.message)
        return result.change


class _Ruled:
    """A folder's policy: its agent's approval rules, then (``ask``) what ``approve`` chose.

    ``queues`` is the chosen policy's (``move_file`` refuses a queueing policy before
    asking it); ``moving``: the change is a move's destination, which a ``queue`` rule
    cannot take."""

    def __init__(self, folder: MemoryFolder, *, moving: bool) -> None:
        self.folder = folder
        self.moving = moving
        self.queues = bool(getattr(folder.asked, "queues", False))

    def __call__(self, request: WriteRequest) -> WriteVerdict:
        pending = request.pending
        tool = TOOL_OF_OP[pending.op]
        found = self.folder.rule_for(tool, pending.path)
        if found.action == "allow":
            return WriteVerdict.approve("rule")
        if found.action == "deny":
            return WriteVerdict.reject(self.folder.denied(tool, pending.shown, found))
        if found.action == "queue":
            if self.moving:
                return WriteVerdict.reject(_unqueueable("", pending.shown, found))
            queue = self.folder.queue_policy()
            if queue is None:
                return WriteVerdict.reject(f"{tool} {pending.shown} matches approval {found.describe()}, but this "
                                             "store has no review queue; nothing was stored")
            return queue(request)
        return self.folder.asked(request)


def _unqueueable(src: str, dst: str, found: Match) -> str:
    what = f"moving {src} to {dst}" if src else f"moving a file to {dst}"
    return (f"{what} matches approval {found.describe()}, but a move cannot be queued for review (a review "
            "applies one file at a time); nothing was stored: write the new file and delete the old one instead")


__all__ = ["HOW_TO_ALLOW", "Approve", "ApproveMode", "Approver", "Located", "MemoryFolder", "Queued", "Refused"]
