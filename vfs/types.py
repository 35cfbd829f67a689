"""Plain result values returned by the store (no database objects escape it).

``PendingChange`` is the middle of the one write path (prepare -> approve -> commit,
see ARCHITECTURE.md): everything a gate needs to show and everything ``commit``
needs to apply the change with the optimistic version check, and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Literal

from memagent.vfs.files.edits import unified_diff

# Who made a change: a person in chat ("user"), the model, a subagent, an import,
# a person at the command line.
Author = Literal["user", "agent", "subagent", "import", "cli"]
# How it was approved: a person said yes, approval was off, a person's own command,
# no approval was needed, an MCP client's own per-call permission prompt
# (``memagent mcp serve --approval client``), or an ``allow`` approval rule
# (``vfs/records/rules.py``; the origin's detail names the rule).
Approval = Literal["human", "yolo", "cli", "auto", "client", "rule"]
ChangeOp = Literal["write", "edit", "delete"]
# Where a change came from (provenance, kept with each revision): a chat turn, a
# subagent in a chat turn, a person's `memagent fs`, an import, a reflection run,
# an MCP client, agent creation, a library adapter of memagent.integrations (detail: which).
OriginKind = Literal["chat", "subagent", "cli", "import", "reflect", "mcp", "init", "integration"]
GrepMode = Literal["files_with_matches", "content", "count"]


@dataclass(frozen=True)
class FileInfo:
    path: str
    size: int
    version: int
    updated_at: datetime


@dataclass(frozen=True)
class FileContent:
    path: str
    content: str
    version: int
    total_lines: int
    offset: int = 0
    # Lines returned; equals total_lines - offset when nothing was cut.
    lines: int = 0

    @property
    def more(self) -> bool:
        return self.offset + self.lines < self.total_lines


@dataclass(frozen=True)
class Entry:
    name: str
    is_dir: bool
    size: int  # bytes of a file; number of files below a directory


@dataclass(frozen=True)
class Origin:
    """Where a revision came from. ``thread`` and ``turn`` name the conversation and its
    user turn (1 = the first); ``run`` the reflection run; ``detail`` a short note (the
    subagent, the import source, the threads a reflection read)."""

    kind: OriginKind
    thread: str | None = None
    turn: int | None = None
    run: int | None = None
    detail: str = ""

    @staticmethod
    def default_for(author: str) -> Origin:
        """The origin of a change whose caller named none: read from its author."""
        kind: OriginKind = {"cli": "cli", "import": "import", "subagent": "subagent"}.get(author, "chat")  # type: ignore[assignment]
        return Origin(kind)

    def label(self) -> str:
        """One short line: ``chat 3f2a1b2c turn 4``, ``reflect run 7 (threads ...)``, ``cli``."""
        parts: list[str] = [self.kind]
        if self.run is not None:
            parts.append(f"run {self.run}")
        if self.thread:
            parts.append(self.thread[:8])
        if self.turn is not None:
            parts.append(f"turn {self.turn}")
        out = " ".join(parts)
        return f"{out} ({self.detail})" if self.detail else out


@dataclass(frozen=True)
class Revision:
    path: str
    version: int
    author: str
    approval: str
    message: str
    deleted: bool
    size: int
    created_at: datetime
    # None for revisions stored before provenance was recorded.
    origin: Origin | None = None


@dataclass(frozen=True)
class BlameLine:
    """One line of a file and the revision that last changed it."""

    number: int
    text: str
    version: int
    author: str
    approval: str
    created_at: datetime
    origin: Origin | None
    message: str


@dataclass(frozen=True)
class SearchHit:
    """A file ranked by ``search``: its path (as the caller's namespace shows it), a
    relevance score (higher is better; comparable within one answer only) and a snippet."""

    path: str
    score: float
    snippet: str
    version: int


@dataclass(frozen=True)
class Change:
    """What a mutation did: the revision it appended and the content before/after."""

    path: str
    version: int
    before: str | None
    after: str | None


@dataclass(frozen=True)
class PendingChange:
    """A prepared write, edit or delete: checked and validated, not yet stored.

    ``path`` is normalised and inside ``scope``; ``shown`` is the same file as the
    caller's namespace names it (the view path, e.g. ``/user/x.md``), used in the
    diff and in messages. ``expected_version`` is the version ``before`` was read at
    (0: not live); ``commit`` refuses the change if the file is no longer there.
    """

    op: ChangeOp
    scope: str
    path: str
    shown: str
    before: str | None  # None: the file does not exist now
    after: str | None  # None: a delete
    expected_version: int

    @property
    def new_file(self) -> bool:
        return self.before is None

    @cached_property
    def diff(self) -> str:
        """The unified diff before -> after, labelled with ``shown`` (computed on first use)."""
        return unified_diff(self.before, self.after, self.shown, self.shown)


@dataclass
class GrepResult:
    mode: GrepMode
    files: list[str] = field(default_factory=list)
    lines: list[tuple[str, int, str]] = field(default_factory=list)
    counts: list[tuple[str, int]] = field(default_factory=list)
    truncated: bool = False
    limit: int = 0
    # Why the search stopped before the end (a time limit), or None if it searched everything.
    cut: str | None = None
