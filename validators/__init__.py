"""Validators for memory files: every write is checked before it is stored.

``validate(path, content)`` returns every problem of one write at once
(``[]`` = valid) and never raises; each Problem says where and how to fix it.
The secret scanner runs on every path and content, and ``scan_message`` on a
revision message. ``read_frontmatter`` is the one frontmatter reader, for the
validators and the agent alike; ``check_name`` checks a skill or subagent name.
``config_location`` says whether a path lies where another program reads
configuration (the one list: refused at write, never exported or imported).
This package imports nothing from ``memagent.agent`` or ``memagent.vfs``: the
store calls it, never the other way round.
"""

from __future__ import annotations

from .base import Limits, Problem, format_problems
from .config_files import CONFIG_NAMES, config_location
from .fields import check_name
from .frontmatter import MAX_FRONTMATTER_BYTES, Frontmatter, read_frontmatter
from .nesting import MAX_DEPTH
from .registry import kind_of, validate
from .secrets import scan_message, scan_path, scan_secrets

__all__ = [
    "CONFIG_NAMES",
    "MAX_DEPTH",
    "MAX_FRONTMATTER_BYTES",
    "Frontmatter",
    "Limits",
    "Problem",
    "check_name",
    "config_location",
    "format_problems",
    "kind_of",
    "read_frontmatter",
    "scan_message",
    "scan_path",
    "scan_secrets",
    "validate",
]
