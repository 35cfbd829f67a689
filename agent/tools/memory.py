"""The memory file tools (``ls``, ``read_file``, ``write_file``, ``edit_file``,
``delete_file``, ``glob``, ``grep``) as one tool provider over an agent's view.

Contracts are the README's tool contracts (names, parameters, text results); ARCHITECTURE.md
traces a write from the tool call to the commit. Invariants:
- Errors are values: every failure becomes a ``ToolResult(is_error=True)`` whose
  text says how to fix the call; nothing here raises to the loop for a bad call.
- Every change takes the one write path: ``view.prepare_*`` (path rules, one read,
  the edit, validators) -> ``vfs.entrance.submit`` (no-op check, the reason, then this
  provider's policy: the version check, the tools.json probe, the gate) -> the commit
  against the version that was read, so an edit never lands on a file that changed
  underneath it, and a refusal at any step changes nothing. With ``defer`` (writes
  queued for review) the policy stores a proposal instead of approving.
- ``seen`` maps view paths to the version the model has seen (by reading it,
  writing it, or finding it in the system prompt); a write over an existing file
  the model has not seen is refused.
- Every write is checked against the version its own call's context saw, never a
  newer one (``_check_version``). A call that names ``expected_version`` (the
  version its read showed; 0: the file must not exist) is refused at any other
  version. A call without it is checked against the ``Basis`` it was issued on: a
  snapshot of ``seen`` and of the change log's length, taken when the call's
  context was fixed (``based_on``: the loop takes one per batch of parallel tool
  calls, the MCP server one per call as it arrives; otherwise when the call
  starts). So a versionless write is refused if the file's version differs from
  the one the basis saw, or, for a file the basis had not seen, if this session
  (or a subagent sharing its change log) changed it after the basis was taken.
  Reads and writes of calls issued in the same batch therefore never vouch for
  each other.
- ``read_file`` ends with a line ``(version N)`` (or says the version of an empty
  file), and its result carries ``{"path", "version"}`` as ``data``, as do the
  mutating tools' results, so a caller can pass the version back.
- Mutating tools take an optional one-line ``reason`` (secret-scanned before anyone
  is asked): the approval panel shows it and the revision keeps it as its message.
  Every commit carries ``origin`` (the loop sets the thread and turn; a subagent's
  provider names the subagent).
- Every committed change is recorded in the session's ``ChangeLog``, which the
  agent and its subagents share: ``/history``, ``/diff``, ``/undo`` and ``/redo``
  read it.
- A prepared change that changes nothing (``before == after``) is neither shown
  to the gate nor stored; the model is told "No change".
- A write of the agent's own ``/tools.json`` also passes ``check_tools_json`` (the
  live probe of the MCP servers it names, ``tools.mcp.McpTools.check_write``)
  between the seen check and the gate: a refusal changes nothing; a note goes
  into the approval request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from memagent.agent.tools.base import ApprovalRequest, Approvals, ToolResult, schema
from memagent.validators.subagent import DEFAULT_TOOLS
from memagent.vfs import (
    TOOL_OF_OP,
    Action,
    AgentView,
    Author,
    Change,
    Match,
    Origin,
    PendingChange,
    ProposalStore,
    RuleBook,
    StaleVersion,
    WritePolicy,
    WriteRequest,
    WriteVerdict,
    queue_policy,
    reason_line,
    render_grep,
    render_ls,
    render_numbered,
    require_change,
    submit_change,
)


class ToolsJsonVerdict(Protocol):
    """The live check's answer: a refusal (non-empty: refuse) and a note for the panel."""

    @property
    def refusal(self) -> str: ...

    @property
    def note(self) -> str: ...


ToolsJsonCheck = Callable[[str], ToolsJsonVerdict]
# Where a change goes instead of the gate and the commit when writes are queued for
# review (``memagent mcp serve --approval queue``): it stores the checked change as a
# proposal and returns what the model is told.
Defer = Callable[[PendingChange, str], str]

READ_LIMIT = 2000
MUTATING = frozenset({"write_file", "edit_file", "delete_file"})
READ_ONLY = frozenset(DEFAULT_TOOLS)  # the tools that never change memory: a subagent's default

_PATH = {"type": "string", "description": "Absolute path inside memory, e.g. /AGENTS.md"}
# Mutating tools take an optional one-line reason: shown to the person who approves,
# kept as the revision's message.
_REASON = {"type": "string", "description": "Optional: one line saying why (shown for approval, kept in history)."}
# Mutating tools take an optional expected_version: the version the caller's own read saw.
_EXPECTED = {"type": "integer", "minimum": 0,
             "description": "Optional: the N of read_file's '(version N)'; refused if the file is now at "
                            "another version. 0: it must not exist yet. Pass it when calls may run concurrently."}

DEFINITIONS: list[dict[str, Any]] = [
    {"name": "ls", "description": "List a memory folder: one entry a line, folders end in /, with sizes.",
     "input_schema": schema({"path": {**_PATH, "default": "/"}}, [])},
    {"name": "read_file",
     "description": "Read a memory file as numbered lines (`{n:>6}\\t{line}`), then a last line "
                    "'(version N)' (an empty file: one line naming its version); pass N as expected_version "
                    "when you change the file. Use offset/limit for long files.",
     "input_schema": schema({"file_path": _PATH,
                             "offset": {"type": "integer", "minimum": 0, "default": 0,
                                        "description": "Lines to skip."},
                             "limit": {"type": "integer", "minimum": 1, "default": READ_LIMIT,
                                       "description": "Most lines to return."}}, ["file_path"])},
    {"name": "write_file",
     "description": "Create a memory file or overwrite one you have read. Validated; a person approves it.",
     "input_schema": schema({"file_path": _PATH, "content": {"type": "string"}, "reason": _REASON,
                             "expected_version": _EXPECTED}, ["file_path", "content"])},
    {"name": "edit_file",
     "description": "Replace an exact string in a memory file. old_string must occur once unless "
                    "replace_all is true. Validated; a person approves it.",
     "input_schema": schema({"file_path": _PATH, "old_string": {"type": "string"},
                             "new_string": {"type": "string"},
                             "replace_all": {"type": "boolean", "default": False}, "reason": _REASON,
                             "expected_version": _EXPECTED}, ["file_path", "old_string", "new_string"])},
    {"name": "delete_file",
     "description": "Delete a memory file (kept in history; revertible). A person approves it.",
     "input_schema": schema({"file_path": _PATH, "reason": _REASON, "expected_version": _EXPECTED},
                            ["file_path"])},
    {"name": "glob",
     "description": "Find memory files by pattern: ** crosses folders, {a,b} braces; a pattern "
                    "without / matches file names at any depth.",
     "input_schema": schema({"pattern": {"type": "string"}, "path": {**_PATH, "default": "/"}},
                            ["pattern"])},
    {"name": "grep",
     "description": "Search memory file contents, one line at a time, with a Python regular expression "
                    "(or a fixed string); content lines print as path:line:text. Backreferences, lookarounds, "
                    "conditionals, atomic groups, possessive quantifiers, \\B and repeats over 1000 run on a "
                    "backtracking matcher limited to 5 s per call: past it you get what was found and a last "
                    "line '(incomplete: ...)' naming where it stopped and why; drop that construct or narrow "
                    "path or glob.",
     "input_schema": schema({
         "pattern": {"type": "string"},
         "path": {**_PATH, "default": "/"},
         "glob": {"type": ["string", "null"], "default": None,
                  "description": "Only files matching this glob, e.g. *.md"},
         "output_mode": {"type": "string", "enum": ["files_with_matches", "content", "count"],
                         "default": "files_with_matches"},
         "case_insensitive": {"type": "boolean", "default": False},
         "fixed_strings": {"type": "boolean", "default": False}}, ["pattern"])},
]


# The same tools for a small model's prompt (the compact profile, ``agent/prompt.py``): short
# descriptions, only the parameters a call needs. The handlers are the same: a parameter left
# out here (reason, expected_version, replace_all, grep's flags) is refused by ToolBox's
# schema check like any unknown one, with the list of those there are.
_CPATH = {"type": "string", "description": "e.g. /AGENTS.md"}
COMPACT_DEFINITIONS: list[dict[str, Any]] = [
    {"name": "ls", "description": "List a memory folder.", "input_schema": schema({"path": _CPATH}, [])},
    {"name": "read_file", "description": "Read a memory file: numbered lines, then '(version N)'. "
                                         "offset/limit: lines to skip/return.",
     "input_schema": schema({"file_path": _CPATH, "offset": {"type": "integer"}, "limit": {"type": "integer"}},
                            ["file_path"])},
    {"name": "write_file", "description": "Create a memory file, or overwrite one you read, with its whole "
                                          "content. Validated; a person approves it.",
     "input_schema": schema({"file_path": _CPATH, "content": {"type": "string"}}, ["file_path", "content"])},
    {"name": "edit_file", "description": "Replace old_string (exact, found once) with new_string in a memory "
                                         "file. Validated; a person approves it.",
     "input_schema": schema({"file_path": _CPATH, "old_string": {"type": "string"},
                             "new_string": {"type": "string"}}, ["file_path", "old_string", "new_string"])},
    {"name": "delete_file", "description": "Delete a memory file (kept in history). A person approves it.",
     "input_schema": schema({"file_path": _CPATH}, ["file_path"])},
    {"name": "glob", "description": "Find memory files by pattern, e.g. **/*.md.",
     "input_schema": schema({"pattern": {"type": "string"}, "path": _CPATH}, ["pattern"])},
    {"name": "grep", "description": "Find memory files whose text matches a regular expression "
                                    "(output_mode content: path:line:text).",
     "input_schema": schema({"pattern": {"type": "string"}, "path": _CPATH,
                             "output_mode": {"type": "string", "enum": ["files_with_matches", "content"]}},
                            ["pattern"])},
]


@dataclass
class ChangeLog:
    """The memory revisions one chat session made, shared by the agent and its subagents.

    ``made`` holds every revision in order (edits, and ``/undo``'s and ``/redo``'s
    own revisions) for ``/history`` and ``/diff``; ``undoable`` the edits ``/undo``
    can still take back, newest last; ``redoable`` the edits ``/undo`` took back,
    which ``/redo`` re-applies, newest last. A new edit empties ``redoable`` (as in
    an editor); an undo or a redo is itself a revision, so they stack.
    """

    made: list[Change] = field(default_factory=list)
    undoable: list[Change] = field(default_factory=list)
    redoable: list[Change] = field(default_factory=list)
    # Edits queued for review instead (proposal id, op, path), in order: ``memagent run --json``.
    queued: list[tuple[int, str, str]] = field(default_factory=list)

    def record(self, change: Change, *, undoable: bool = True) -> None:
        self.made.append(change)
        if undoable:
            self.undoable.append(change)
            self.redoable.clear()

    def record_undo(self, undone: Change, done: Change) -> None:
        """``done`` is the revision that took back ``undone``, the newest undoable edit."""
        self.made.append(done)
        self.undoable.remove(undone)
        self.redoable.append(undone)

    def record_redo(self, redone: Change, done: Change) -> None:
        """``done`` re-applied ``redone``, the newest undone edit; it can be undone in turn."""
        self.made.append(done)
        self.redoable.remove(redone)
        self.undoable.append(done)

    def last_version(self, path: str) -> int | None:
        """The version of the newest revision of ``path`` this session made, if any."""
        return next((c.version for c in reversed(self.made) if c.path == path), None)

    def __len__(self) -> int:
        return len(self.made)


@dataclass(frozen=True)
class Basis:
    """What a tool call's context had seen when the call was issued.

    ``seen`` is a copy of the provider's ``seen`` then; ``changes`` the length of the
    change log then, so ``log.made[changes:]`` are the changes made after it.
    """

    seen: Mapping[str, int]
    changes: int


@dataclass(frozen=True)
class RuledApproval:
    """The agent's approval rules (``vfs/records/rules.py``) as a provider applies them.

    ``queue`` is where an edit a ``queue`` rule picks goes (a ``queue_policy``;
    None: this context has no review queue, so such an edit is refused);
    ``unattended`` is what ``ask`` becomes where no one can be asked (``memagent run``:
    ``queue`` by default); ``heard`` is told, in one line, which rule decided each edit
    (chat shows it)."""

    book: RuleBook
    queue: WritePolicy | None = None
    unattended: Action | None = None
    heard: Callable[[str], None] | None = None

    def match(self, tool: str, path: str | None, *, default: Action = "ask") -> Match:
        found = self.book.decide(tool, path, default=default)
        if found.action == "ask" and self.unattended is not None:
            return Match(self.unattended, found.rule, found.number)
        return found


def agent_rules(view: AgentView, proposals: ProposalStore | None, *, by: str, unattended: Action | None = None,
                heard: Callable[[str], None] | None = None) -> RuledApproval:
    """The approval rules of ``view``'s agent, queueing into its review queue as ``by``
    (``memagent chat``, ``memagent run``, an MCP client: what review shows). Every session
    applies them through here; ``proposals`` None (a store double has no review queue):
    ``queue`` rules refuse."""
    queue = queue_policy(proposals, view.agent, by=by) if proposals is not None else None
    return RuledApproval(RuleBook(view.store, view.agent), queue, unattended, heard)


class MemoryTools:
    """``ToolProvider`` of the file tools for one agent (or subagent)."""

    def __init__(self, view: AgentView, gate: Approvals, *, author: Author = "agent",
                 log: ChangeLog | None = None, check_tools_json: ToolsJsonCheck | None = None,
                 defer: Defer | None = None, rules: RuledApproval | None = None, compact: bool = False) -> None:
        self.view = view
        # The compact profile's definitions (a small model's prompt): same tools, fewer words.
        self.compact = compact
        self.defer = defer
        self.rules = rules
        self.check_tools_json = check_tools_json
        self.gate = gate
        self.author: Author = author
        # Where this provider's changes come from; the loop sets the thread and turn.
        self.origin: Origin = Origin("subagent" if author == "subagent" else "chat")
        self.log = log if log is not None else ChangeLog()
        self.seen: dict[str, int] = {}
        # The basis of the calls running now (``based_on``); None: each call's own start.
        self._basis: Basis | None = None
        self._handlers: dict[str, Callable[..., ToolResult]] = {
            "ls": self._ls, "read_file": self._read_file, "write_file": self._write_file,
            "edit_file": self._edit_file, "delete_file": self._delete_file,
            "glob": self._glob, "grep": self._grep,
        }

    def definitions(self) -> list[dict[str, Any]]:
        return COMPACT_DEFINITIONS if self.compact else DEFINITIONS

    def run(self, name: str, args: dict[str, Any]) -> ToolResult:
        return self._handlers[name](**args)

    # -- the basis of a call ----------------------------------------------------

    def snapshot(self) -> Basis:
        """The basis of a call issued now.

        Safe to take from another thread while a call runs (the MCP server takes it on
        its event loop): the log's length is read before ``seen`` is copied, and a
        commit records its change before it moves ``seen``, so a commit racing with
        the snapshot can only make the call's check stricter, never let it through.
        """
        changes = len(self.log.made)
        return Basis(dict(self.seen), changes)

    @contextmanager
    def based_on(self, basis: Basis | None = None) -> Iterator[Basis]:
        """Run the calls inside against ``basis`` (default: a snapshot taken now).

        The loop wraps each batch of parallel tool calls (the model issued them all
        on what it had seen before the batch); the MCP server wraps each call with the
        snapshot taken as it arrived. Calls inside must run one at a time.
        """
        taken = basis if basis is not None else self.snapshot()
        previous, self._basis = self._basis, taken
        try:
            yield taken
        finally:
            self._basis = previous

    def _current_basis(self) -> Basis:
        return self._basis if self._basis is not None else self.snapshot()

    # -- reading ----------------------------------------------------------------

    def _ls(self, path: str = "/") -> ToolResult:
        return ToolResult(render_ls(self.view.ls(path)))

    def _read_file(self, file_path: str, offset: int = 0, limit: int = READ_LIMIT) -> ToolResult:
        fc = self.view.read(file_path, offset=offset, limit=limit)
        self.seen[fc.path] = fc.version
        text = render_numbered(fc)
        if fc.total_lines:  # an empty file's one line already names its version
            text += f"\n(version {fc.version})"
        return ToolResult(text, data={"path": fc.path, "version": fc.version})

    def _glob(self, pattern: str, path: str = "/") -> ToolResult:
        found = self.view.glob(pattern, path)
        return ToolResult("\n".join(found) if found else "No files found.")

    def _grep(self, pattern: str, path: str = "/", glob: str | None = None,
              output_mode: str = "files_with_matches", case_insensitive: bool = False,
              fixed_strings: bool = False) -> ToolResult:
        result = self.view.grep(pattern, path=path, glob=glob, output_mode=output_mode,
                                case_insensitive=case_insensitive, fixed_strings=fixed_strings)
        return ToolResult(render_grep(result))

    # -- writing ----------------------------------------------------------------

    def _check_version(self, pending: PendingChange, expected_version: int | None) -> None:
        """The change must be based on the version this call's own context saw, not a newer one."""
        shown, now = pending.shown, pending.expected_version  # ``now``: 0 when the file is not live
        if expected_version is not None:
            # The caller named the version its read saw; nothing else vouches for it.
            if expected_version == now:
                return
            if expected_version == 0:
                raise StaleVersion(f"{shown} already exists (version {now}) but expected_version 0 says you "
                                   "expected no file there; read it again and re-apply your change")
            raise StaleVersion(f"{shown} changed since you read it (you saw version {expected_version}, it is "
                               f"now {f'version {now}' if now else 'gone'}); read it again and re-apply "
                               "your change")
        basis = self._current_basis()
        seen = basis.seen.get(shown)
        if seen is not None:
            if seen != now:
                raise StaleVersion(f"{shown} changed since you read it (you saw version {seen}, it is now "
                                   f"version {now}); read it again and re-apply your change")
            return
        # Not seen when the call was issued: it still must not land on a change made after
        # that by another call of this session (or a subagent sharing its change log).
        later = next((c for c in reversed(self.log.made[basis.changes:]) if c.path == shown), None)
        if later is not None:
            raise StaleVersion(f"{shown} changed since you read it (another call changed it to version "
                               f"{later.version} after this call was issued; it is now version {now}); read it "
                               "again and re-apply your change")

    def _gated(self, pending: PendingChange, reason: str = "",
               expected_version: int | None = None) -> ToolResult:
        """The change through the one write entrance (``vfs.entrance.submit``: no-op check,
        reason, policy, commit at the version read); this provider's policy is the version
        check, the tools.json probe, then the gate (or ``defer``)."""

        def policy(request: WriteRequest) -> WriteVerdict:
            self._check_version(pending, expected_version)  # raises StaleVersion: nothing is stored
            reason = request.reason
            asked = replace(ApprovalRequest.for_change(pending), reason=reason)
            if (self.check_tools_json is not None and pending.after is not None
                    and pending.scope == self.view.scope and pending.path == "/tools.json"):
                check = self.check_tools_json(pending.after)
                if check.refusal:
                    return WriteVerdict.reject(check.refusal)
                if check.note:
                    asked = replace(asked, note=check.note)
            # --yolo (the gate's, or a server's) is decided before the rules and overrides them.
            if self.rules is not None and not getattr(self.gate, "yolo", False):
                decided = self._by_rule(request)
                if decided is not None:
                    return decided
            if self.defer is not None:
                # Checked exactly as a commit would be (paths, validators, version), then queued, not stored.
                return WriteVerdict.queued(0, self.defer(pending, reason))
            outcome = self.gate.check(asked)
            if not outcome.approved:
                msg = f"The user rejected this change to {pending.shown}; nothing was changed."
                if outcome.feedback:
                    msg += f" Their feedback: {outcome.feedback}"
                return WriteVerdict.reject(msg)
            return WriteVerdict.approve(outcome.approval)

        result = submit_change(self.view, pending, policy=policy, author=self.author, origin=self.origin,
                               reason=reason)
        if result.status == "unchanged":
            # Nothing to approve or store; the model now knows this version's content.
            self.seen[pending.shown] = pending.expected_version
            return ToolResult(f"No change: {pending.shown} already has exactly that content "
                              f"(version {pending.expected_version}); nothing was written.",
                              data={"path": pending.shown, "version": pending.expected_version})
        if result.status == "rejected":
            return ToolResult(result.message, True)
        if result.status == "queued":
            if result.proposal:
                self.log.queued.append((result.proposal, pending.op, pending.shown))
            return ToolResult(result.message)
        change = require_change(result)
        self.log.record(change)
        if change.after is None:
            self.seen.pop(change.path, None)
        else:
            self.seen[change.path] = change.version
        verb = {"write": "Wrote", "edit": "Edited", "delete": "Deleted"}[pending.op]
        return ToolResult(f"{verb} {change.path} (now version {change.version}).",
                          data={"path": change.path, "version": change.version})

    def _by_rule(self, request: WriteRequest) -> WriteVerdict | None:
        """The verdict of the first approval rule matching this edit; None: ``ask`` (the
        context's own way: the gate, or ``defer``)."""
        assert self.rules is not None
        pending = request.pending
        tool = TOOL_OF_OP[pending.op]
        found = self.rules.match(tool, pending.shown)
        what = f"{tool} {pending.shown}"
        if self.rules.heard is not None and (found.rule is not None or found.action != "ask"):
            verb = {"allow": "allowed", "ask": "asks", "queue": "queued", "deny": "denied"}[found.action]
            self.rules.heard(f"approval {found.describe()}: {what} {verb}")
        if found.action == "allow":
            return WriteVerdict.approve("rule")
        if found.action == "deny":
            return WriteVerdict.reject(
                f"{what} was refused by approval {found.describe()} of agent {self.view.agent!r}; nothing was "
                "stored. Do not retry it: tell the user, who can change the rules with `memagent approval`.")
        if found.action == "queue":
            if self.rules.queue is None:
                return WriteVerdict.reject(f"{what} matches approval {found.describe()}, but this session has "
                                             "no review queue; nothing was stored")
            return self.rules.queue(request)
        return None

    def _write_file(self, file_path: str, content: str, reason: str = "",
                    expected_version: int | None = None) -> ToolResult:
        expected = _expected(expected_version)
        pending = self.view.prepare_write(file_path, content)
        if expected is None and pending.before is not None and pending.shown not in self._current_basis().seen:
            # Read in the same batch (or a call still running) does not count: this call was
            # issued before that read's result existed.
            late = " (a read_file issued together with this call does not count)" \
                if pending.shown in self.seen else ""
            return ToolResult(
                f"{pending.shown} already exists (version {pending.expected_version}) and you have "
                f"not read it{late}; read_file it first so you do not overwrite what you have not seen, "
                "or use edit_file", True)
        return self._gated(pending, reason, expected)

    def _edit_file(self, file_path: str, old_string: str, new_string: str,
                   replace_all: bool = False, reason: str = "",
                   expected_version: int | None = None) -> ToolResult:
        expected = _expected(expected_version)
        if old_string and old_string == new_string:
            fc = self.view.read(file_path)
            if old_string in fc.content:
                return ToolResult(f"No change: old_string and new_string are the same, so {fc.path} stays "
                                  f"as it is (version {fc.version}); nothing was written.",
                                  data={"path": fc.path, "version": fc.version})
        return self._gated(self.view.prepare_edit(file_path, old_string, new_string,
                                                  replace_all=replace_all), reason, expected)

    def _delete_file(self, file_path: str, reason: str = "", expected_version: int | None = None) -> ToolResult:
        expected = _expected(expected_version)
        return self._gated(self.view.prepare_delete(file_path), reason, expected)


def _expected(value: object) -> int | None:
    """``expected_version`` as given (None: absent); anything but a whole number >= 0 is a bad argument."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        # A TypeError becomes the toolbox's "bad arguments for <tool>" result.
        raise TypeError(f"expected_version must be a whole number >= 0 (the version read_file showed), "
                        f"not {value!r}")
    return value


def one_line_reason(reason: object) -> str:
    """A tool's ``reason`` as one bounded line ("" when absent or not text): the entrance's rule."""
    return reason_line(reason)
