"""Errors of the virtual filesystem, as values the callers turn into messages.

Invariant: every error raised by the store for a caller's mistake is a ``VfsError``
whose ``str()`` is one line saying what is wrong and how to fix it. The tool layer
turns it into an ``is_error`` tool result, the CLI into one line on stderr. An error
raised by a mutation means nothing was stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memagent.validators import Problem


class VfsError(Exception):
    """Base class; the message is complete and user-facing."""


class InvalidPath(VfsError):
    """A path that breaks the path rules (escapes the root, control chars, too long...)."""


class NotFound(VfsError):
    """No live file (or directory) at that path."""


class AlreadyExists(VfsError):
    """The destination of a move or a create-only write already exists."""


class IsADirectory(VfsError):
    """A file operation was given a path that is a directory."""


class StaleVersion(VfsError):
    """The file changed since the writer read it; the write was refused, not merged."""


class EditMismatch(VfsError):
    """``old_string`` was not found exactly once (and ``replace_all`` was not set)."""


class RevisionNotFound(VfsError):
    """A version number that the file's history does not have."""


class ReadOnly(VfsError):
    """A write to a part of the tree the writer may only read."""


class AgentNotFound(VfsError):
    """The named agent does not exist."""


class InvalidPattern(VfsError):
    """A glob or regular expression that cannot be compiled."""


class DatabaseUnavailable(VfsError):
    """The database URL cannot be opened or reached."""


class ValidationFailed(VfsError):
    """The content breaks the rules of its file kind; carries every problem at once."""

    def __init__(self, path: str, problems: Sequence[Problem]) -> None:
        from memagent.validators import format_problems

        self.path = path
        self.problems = list(problems)
        super().__init__(format_problems(path, self.problems))

    @property
    def summary(self) -> str:
        return str(self).splitlines()[0]
