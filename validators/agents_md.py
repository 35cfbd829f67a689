"""Validator for ``/AGENTS.md``, the agent's core instructions.

Invariants:
- UTF-8 text without NUL characters.
- At most ``Limits.agents_md_bytes`` (default 32 KiB) and never more than the
  generic file cap: the whole file enters every system prompt, so size costs
  tokens on every turn. Over the cap the advice is to move detail into a skill,
  whose body is only read when needed.
"""

from __future__ import annotations

from .base import Limits, Problem
from .text import check_encoding, check_size

KIND = "AGENTS.md"

ADVICE = (
    "AGENTS.md is loaded whole into every prompt, so keep it to standing rules and "
    "preferences: move detailed procedures into a skill under /skills/ (for example "
    "/skills/<name>.md with name and description frontmatter) and leave a one-line "
    "pointer to it here, or merge duplicate rules into general ones."
)


def validate_agents_md(content: str, limits: Limits) -> list[Problem]:
    cap = min(limits.agents_md_bytes, limits.file_bytes)
    return check_encoding(content, KIND) + check_size(content, cap, KIND, ADVICE)
