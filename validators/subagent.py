"""Validator for subagents: ``/subagents/<name>.md``.

Invariants (README "What memory looks like"):
- Frontmatter keys are exactly ``name``, ``description`` (both required),
  ``tools`` (optional list of tool names) and ``model`` (optional text).
  Unknown keys are refused, listing the allowed ones: a misspelt ``tool:``
  would otherwise silently give the subagent the default tools.
- ``name`` follows the shared name rule and equals the file stem;
  ``description`` is 1-1024 characters (it enters the subagents index).
- The Markdown body is the subagent's system prompt and is not empty.
"""

from __future__ import annotations

from collections.abc import Callable

from .base import Problem
from .fields import (
    check_description,
    check_name_key,
    check_text_value,
    check_unknown_keys,
    key_location,
    short,
)
from .frontmatter import FrontmatterDoc, parse_frontmatter

KIND = "subagent"
ALLOWED_KEYS = ("name", "description", "tools", "model")
# The tools a subagent gets when its file lists none: reading and searching, never a
# change to memory. The agent's tool set and every export format read this one list.
DEFAULT_TOOLS = ("ls", "read_file", "glob", "grep")

EXAMPLE = (
    "---\n"
    "name: {name}\n"
    "description: Reviews a draft for factual errors. Use before publishing.\n"
    "tools: [read_file, grep]\n"
    "---\n"
    "You are a careful reviewer. ...\n"
)


def _check_tools(doc: FrontmatterDoc) -> list[Problem]:
    if "tools" not in doc.data:
        return []
    loc, value = key_location(doc, "tools"), doc.data["tools"]
    if not isinstance(value, list):
        return [
            Problem(
                loc,
                "must be a YAML list of tool names, e.g. tools: [read_file, grep] (or one "
                "'- name' per indented line). Remove the key to give the subagent the default "
                "read-only file tools.",
                KIND,
            )
        ]
    problems: list[Problem] = []
    seen: set[str] = set()
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            problems.append(
                Problem(
                    f"frontmatter key 'tools' item {i + 1}",
                    f"must be a tool name as text, but it is {short(item, 40)!r}. "
                    "Write tool names such as read_file or grep.",
                    KIND,
                )
            )
        elif item in seen:
            problems.append(
                Problem(
                    f"frontmatter key 'tools' item {i + 1}",
                    f"repeats the tool '{short(item, 40)}'. List each tool once.",
                    KIND,
                )
            )
        else:
            seen.add(item)
    return problems


def validate_subagent(content: str, expected_name: str, path_for: Callable[[str], str]) -> list[Problem]:
    doc, problems = parse_frontmatter(content, KIND, EXAMPLE.format(name=expected_name))
    if not doc.ok:
        return problems
    problems += check_unknown_keys(doc, ALLOWED_KEYS, KIND, "Remove it (or fix its spelling).")
    problems += check_name_key(doc, expected_name, KIND, path_for)
    problems += check_description(doc, KIND)
    problems += _check_tools(doc)
    problems += check_text_value(doc, "model", KIND, "model: claude-sonnet-4-5")
    if not doc.body.strip():
        problems.append(
            Problem(
                f"line {doc.close_line + 1}",
                f"the body after the closing --- (line {doc.close_line}) is empty. The body is "
                "the subagent's system prompt: write instructions saying who it is, what it "
                "does and how it should answer.",
                KIND,
            )
        )
    return problems
