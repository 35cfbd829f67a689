"""Maps a memory path to its validators; ``validate()`` is the single entry point.

Invariants:
- Every path gets the generic text rules (UTF-8, no NUL, size cap) and the
  secret scanner; a path of a known kind also gets that kind's validator.
- All problems of one write are returned together, in a stable order: text
  rules, then the kind's rules, then secrets in the content, then in the path.
  ``[]`` means valid.
- NUL characters and unpaired surrogates are reported once by the text rules;
  the kind's parser then sees a copy where each is replaced by one stand-in
  character, so its line and column numbers still match the original.
- Content more than ``_PARSE_FACTOR`` times over its cap is only reported as
  too large: parsing and scanning megabytes that will be refused anyway is
  wasted work, and the other problems surface once it is cut down.
- A path is the kind the prompt index takes it for: the index globs
  ``skills/*.md``, ``skills/*/SKILL.md`` and ``subagents/*.md``, whose ``*``
  also matches an empty stem, so ``/skills/.md`` is a skill (refused by the
  name rules), never plain text that reaches the prompt unchecked.
- ``validate`` is total: any path and content give a list, never an exception.
  Each kind validator is bounded on its own (depth, frontmatter size, no YAML
  aliases); a last-resort guard turns anything they still raise into a Problem.
- The path itself is scanned for secrets, like the content.
- A path with a segment that is a configuration location of another program
  (``config_files.py``: ``/.git/...``, ``/knowledge/.git/...``, ``/.envrc``,
  ``/.claude/...``; which names count below the top is that module's rule) is
  refused whatever its content: an export would hand it to that program.
- Every path, whatever its kind, refuses C0 controls other than tab, newline and
  carriage return, DEL and C1 controls (``control_chars.py``), named with their line.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .agents_md import validate_agents_md
from .base import Limits, Problem
from .config_files import check_config_location
from .control_chars import check_controls
from .secrets import scan_path, scan_secrets
from .skill import validate_skill
from .subagent import validate_subagent
from .text import check_encoding, check_size, utf8_size
from .tools_json import validate_tools_json

_PARSE_FACTOR = 4
# "*" in the prompt index's globs matches any run of non-"/" characters, the empty one too.
_SKILL_FILE = re.compile(r"/skills/([^/]*)\.md")
_SKILL_DIR = re.compile(r"/skills/([^/]*)/SKILL\.md")
_SKILL_DIR_MISCASED = re.compile(r"/skills/([^/]*)/(skill\.md)", re.IGNORECASE)
_SUBAGENT = re.compile(r"/subagents/([^/]*)\.md")


def kind_of(path: str) -> str:
    """The kind of memory file at ``path``: AGENTS.md, skill, subagent, tools.json or text."""
    if path == "/AGENTS.md":
        return "AGENTS.md"
    if path == "/tools.json":
        return "tools.json"
    if _SKILL_FILE.fullmatch(path) or _SKILL_DIR.fullmatch(path):
        return "skill"
    if _SUBAGENT.fullmatch(path):
        return "subagent"
    return "text"


def _skill_file_path(name: str) -> str:
    return f"/skills/{name}.md"


def _skill_dir_path(name: str) -> str:
    return f"/skills/{name}/SKILL.md"


def _subagent_path(name: str) -> str:
    return f"/subagents/{name}.md"


def _kind_problems(path: str, content: str) -> list[Problem]:
    if path == "/tools.json":
        return validate_tools_json(content)
    if m := _SKILL_FILE.fullmatch(path):
        return validate_skill(content, m.group(1), _skill_file_path)
    if m := _SKILL_DIR.fullmatch(path):
        return validate_skill(content, m.group(1), _skill_dir_path)
    if m := _SUBAGENT.fullmatch(path):
        return validate_subagent(content, m.group(1), _subagent_path)
    if m := _SKILL_DIR_MISCASED.fullmatch(path):
        # Only the exact name SKILL.md makes a folder a skill; a near miss would
        # be stored as a supporting file and silently never show up as a skill.
        return [
            Problem(
                "file",
                f"a skill's main file must be named SKILL.md in capitals: write "
                f"{_skill_dir_path(m.group(1))} instead of {path}.",
                "skill",
            )
        ]
    return []


def _guarded(stage: str, kind: str, check: Callable[[], list[Problem]]) -> list[Problem]:
    """``check()``, or one Problem if it raises: a validator bug must not end the session."""
    try:
        return check()
    except Exception as exc:  # noqa: BLE001 - the last resort; the real causes are bounded where they arise
        return [
            Problem(
                "file",
                f"could not be checked: the {stage} failed on this content ({type(exc).__name__}). Simplify "
                "the file (less nesting, shorter values) and try again; please report this as a bug.",
                kind,
            )
        ]


def validate(path: str, content: str, limits: Limits | None = None) -> list[Problem]:
    """All problems with writing ``content`` at ``path`` (relative to its scope root); never raises."""
    limits = limits or Limits()
    if path == "/AGENTS.md":
        problems = _guarded("AGENTS.md rules", "AGENTS.md", lambda: validate_agents_md(content, limits))
        cap = min(limits.agents_md_bytes, limits.file_bytes)
    else:
        cap = limits.file_bytes
        problems = _guarded("text rules", "text", lambda: check_encoding(content) + check_size(content, cap))
    # Every kind is text first: no control character a terminal would act on (U+001B ESC, U+009B CSI).
    problems += _guarded("text rules", "text", lambda: check_controls(content))
    in_path = check_config_location(path) + _guarded("secret scanner", "secret", lambda: scan_path(path))
    if utf8_size(content) > _PARSE_FACTOR * cap:
        return problems + in_path
    clean = content.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")
    kind = kind_of(path)
    problems += _guarded(f"{kind} validator", kind, lambda: _kind_problems(path, clean))
    problems += _guarded("secret scanner", "secret", lambda: scan_secrets(clean))
    return problems + in_path
