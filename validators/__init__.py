"""Validators for memory files: every write is checked before it is stored.

``validate(path, content)`` returns every problem of one write at once
(``[]`` = valid); each Problem says where and how to fix it. The secret scanner
runs on every path. This package imports nothing from ``memagent.agent`` or
``memagent.vfs``: the store calls it, never the other way round.
"""

from __future__ import annotations

from .base import Limits, Problem, format_problems
from .registry import kind_of, validate
from .secrets import scan_secrets

__all__ = ["Limits", "Problem", "format_problems", "kind_of", "scan_secrets", "validate"]
