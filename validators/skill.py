"""Validator for skills: ``/skills/<name>.md`` and ``/skills/<name>/SKILL.md``.

Invariants (README "What memory looks like" and the Agent Skills spec):
- YAML frontmatter with only the spec's keys: ``name`` and ``description``
  required; ``license``, ``compatibility`` (at most 500 characters),
  ``metadata`` (mapping of text to text) and ``allowed-tools`` (one string of
  space-separated tool names) optional.
- ``name`` follows the shared name rule and equals the file stem or folder name.
- A skill that passes here also passes the Agent Skills reference validator
  (skills-ref), which parses with strictyaml and splits the file on the first
  two ``---``: so flow style (``{}``/``[]``) and a ``---`` inside the
  frontmatter are refused here too, with advice, rather than exported broken.
"""

from __future__ import annotations

from collections.abc import Callable

from .base import Problem
from .fields import (
    check_description,
    check_name_key,
    check_text_value,
    check_unknown_keys,
    describe,
    key_location,
    short,
)
from .frontmatter import FrontmatterDoc, parse_frontmatter

KIND = "skill"
ALLOWED_KEYS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
MAX_COMPATIBILITY = 500

EXAMPLE = (
    "---\n"
    "name: {name}\n"
    "description: Summarise meeting notes into bullets. Use when the user pastes notes.\n"
    "---\n"
    "# Title\n"
    "Steps to follow...\n"
)


def _portability(doc: FrontmatterDoc) -> list[Problem]:
    problems = [
        Problem(
            f"line {line}",
            "uses YAML flow style ({...} or [...]), which Agent Skills tools refuse. Write it "
            "in block style, one entry per indented line, for example:\n"
            'metadata:\n  version: "1.0"',
            KIND,
        )
        for line in doc.flow_lines
    ]
    for offset, text in enumerate(doc.fm_lines):
        if "---" in text:
            problems.append(
                Problem(
                    f"line {offset + 2}",
                    "contains '---' inside the frontmatter. Agent Skills tools end the "
                    "frontmatter at the first '---', so reword it (for example use 'to' or a "
                    "single dash).",
                    KIND,
                )
            )
    return problems


def _check_metadata(doc: FrontmatterDoc) -> list[Problem]:
    if "metadata" not in doc.data:
        return []
    value = doc.data["metadata"]
    if not isinstance(value, dict):
        return [
            Problem(
                key_location(doc, "metadata"),
                "must be a mapping of text keys to text values, indented under it, e.g.\n"
                'metadata:\n  author: team-docs\n  version: "1.0"\nor remove the key.',
                KIND,
            )
        ]
    problems = []
    for key, item in value.items():
        loc = f"frontmatter key 'metadata.{short(key, 40)}'"
        if not isinstance(key, str):
            problems.append(
                Problem(
                    loc,
                    f"has a key that is {describe(key)}; metadata keys "
                    f'must be text. Quote it, e.g. "{short(key, 40)}": ...',
                    KIND,
                )
            )
        elif isinstance(item, dict | list):
            problems.append(
                Problem(
                    loc,
                    f"must be text, but it is {describe(item)}: metadata "
                    "maps text keys to text values only. Flatten it into "
                    "separate keys or one quoted string.",
                    KIND,
                )
            )
        elif not isinstance(item, str):
            # Numbers, dates and true/false: quoting keeps the exact text the writer meant.
            text = "" if item is None else short(item, 40)
            problems.append(
                Problem(
                    loc,
                    f'must be text, but it is {describe(item)}. Quote it, e.g. {short(key, 40)}: "{text}".',
                    KIND,
                )
            )
    return problems


def validate_skill(content: str, expected_name: str, path_for: Callable[[str], str]) -> list[Problem]:
    """``expected_name`` is the file stem or folder; ``path_for`` renders a skill's path."""
    doc, problems = parse_frontmatter(content, KIND, EXAMPLE.format(name=expected_name))
    if not doc.ok:
        return problems
    problems += _portability(doc)
    problems += check_unknown_keys(
        doc,
        ALLOWED_KEYS,
        KIND,
        'Remove it, or put extra information under metadata as text, e.g. metadata:\n  version: "1.0"',
    )
    problems += check_name_key(doc, expected_name, KIND, path_for)
    problems += check_description(doc, KIND)
    problems += check_text_value(doc, "license", KIND, "license: MIT")
    problems += check_text_value(
        doc,
        "compatibility",
        KIND,
        "compatibility: Needs git and network access",
        MAX_COMPATIBILITY,
    )
    problems += _check_metadata(doc)
    # The spec makes allowed-tools one space-separated string, not a YAML list.
    problems += check_text_value(doc, "allowed-tools", KIND, "allowed-tools: read_file grep")
    return problems
