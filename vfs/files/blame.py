"""Blame: for each line of a file, the revision that last changed it.

Invariants:
- The answer is computed from the revisions alone (oldest first): each revision's
  lines are matched against the previous revision's with the bounded line diff of
  ``vfs/files/edits.py``; a line kept unchanged keeps its revision, an inserted or
  replaced line takes the new one. A tombstone empties the file, so lines brought
  back by a revert (or re-creation) belong to that revision, as in git.
- Work is bounded by the diff's own budget per revision; the caller bounds the
  number of revisions read (``MAX_REVISIONS``: older history is attributed to the
  oldest revision read, and ``Blame.partial`` says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memagent.vfs.files.edits import _opcodes
from memagent.vfs.types import BlameLine, Origin

MAX_REVISIONS = 2000


@dataclass(frozen=True)
class RevisionText:
    """What blame needs of one revision."""

    version: int
    content: str | None  # None: a tombstone
    author: str
    approval: str
    created_at: datetime
    origin: Origin | None
    message: str


def _lines(content: str | None) -> list[str]:
    return content.splitlines() if content else []


def blame(revs: Sequence[RevisionText]) -> list[BlameLine]:
    """The last revision of ``revs`` (oldest first), line by line, with who changed each line."""
    if not revs:
        return []
    owner: list[int] = []  # index into revs, per line of the current text
    current: list[str] = []
    for i, rev in enumerate(revs):
        new = _lines(rev.content)
        if i == 0 or not current:
            owner = [i] * len(new)
        else:
            nxt: list[int] = []
            for tag, i1, i2, j1, j2 in _opcodes(current, new):
                if tag == "equal":
                    nxt += owner[i1:i2]
                else:
                    nxt += [i] * (j2 - j1)
            owner = nxt
        current = new
    out: list[BlameLine] = []
    for n, (line, idx) in enumerate(zip(current, owner, strict=True), 1):
        r = revs[idx]
        out.append(BlameLine(n, line, r.version, r.author, r.approval, r.created_at, r.origin, r.message))
    return out
