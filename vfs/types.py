"""Plain result values returned by the store (no database objects escape it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

Author = Literal["user", "agent", "subagent", "import", "cli"]
Approval = Literal["human", "yolo", "cli", "auto"]
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
class Revision:
    path: str
    version: int
    author: str
    approval: str
    message: str
    deleted: bool
    size: int
    created_at: datetime


@dataclass(frozen=True)
class Change:
    """What a mutation did: the revision it appended and the content before/after."""

    path: str
    version: int
    before: str | None
    after: str | None


@dataclass
class GrepResult:
    mode: GrepMode
    files: list[str] = field(default_factory=list)
    lines: list[tuple[str, int, str]] = field(default_factory=list)
    counts: list[tuple[str, int]] = field(default_factory=list)
    truncated: bool = False
    limit: int = 0
