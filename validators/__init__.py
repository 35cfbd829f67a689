"""Validators for memory files: every write is checked before it is stored.

``validate(path, content)`` returns every problem of one write at once
(``[]`` = valid) and never raises; each Problem says where and how to fix it.
The secret scanner runs on every path and content, and ``scan_message`` on a
revision message. ``read_frontmatter`` is the one frontmatter reader, for the
validators and the agent alike; ``check_name`` checks a skill or subagent name.
This package imports nothing from ``memagent.agent`` or ``memagent.vfs``: the
store calls it, never the other way round.
"""

from __future__ import annotations

from .base import Limits, Problem, format_problems
from .fields import check_name
from .frontmatter import MAX_FRONTMATTER_BYTES, Frontmatter, read_frontmatter
from .nesting import MAX_DEPTH
from .registry import kind_of, validate
from .secrets import scan_message, scan_path, scan_secrets

__all__ = [
    "MAX_DEPTH",
    "MAX_FRONTMATTER_BYTES",
    "Frontmatter",
    "Limits",
    "Problem",
    "check_name",
    "format_problems",
    "kind_of",
    "read_frontmatter",
    "scan_message",
    "scan_path",
    "scan_secrets",
    "validate",
]
