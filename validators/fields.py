"""Frontmatter field rules shared by skills and subagents (Agent Skills spec).

Invariants:
- ``description`` is text of 1-1024 characters, not only whitespace: it enters
  the system prompt index, so it must say what the file is for and when to use it.
- A valid name is 1-64 characters of ``a-z``, ``0-9`` and ``-``, with no
  leading, trailing or doubled hyphen; it equals the file stem (or, for
  ``/skills/<name>/SKILL.md``, the folder name).
- Every message suggests a concrete valid name, so the writer can fix the file
  in one step.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Any

from .base import Problem
from .frontmatter import FrontmatterDoc

MAX_NAME = 64
MAX_DESCRIPTION = 1024
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
RULE = (
    "A name is 1-64 characters of lowercase letters a-z, digits and hyphens, "
    "with no hyphen at the start or end and no two hyphens in a row"
)


def is_valid_name(name: str) -> bool:
    return len(name) <= MAX_NAME and _NAME.fullmatch(name) is not None


def suggest_name(text: str) -> str:
    """The nearest valid name: lowercase, other characters become single hyphens."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:MAX_NAME].strip("-")
    return slug or "my-name"


def short(value: Any, limit: int = 80) -> str:
    """A value for a message, cut so a long paste is not echoed back whole."""
    text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def key_location(doc: FrontmatterDoc, key: str) -> str:
    line = doc.key_lines.get(key)
    return f"frontmatter key '{key}'" + (f" (line {line})" if line else "")


def describe(value: Any) -> str:
    """What a YAML value turned out to be, in words ("a number", "a list")."""
    if value is None or value == "":
        return "empty"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, datetime.date):
        return "a date"
    if isinstance(value, str):
        return "only whitespace"
    return f"a {type(value).__name__}"


def _reasons(name: str) -> list[str]:
    reasons = []
    if not name:
        reasons.append("it is empty")
    if len(name) > MAX_NAME:
        reasons.append(f"it is {len(name)} characters long, over the maximum of {MAX_NAME}")
    if re.search(r"[^a-z0-9-]", name):
        reasons.append("it has characters other than lowercase a-z, digits and hyphens")
    if name.startswith("-") or name.endswith("-"):
        reasons.append("it starts or ends with a hyphen")
    if "--" in name:
        reasons.append("it has two hyphens in a row")
    return reasons


def check_name(name: str) -> str | None:
    """Why ``name`` cannot name a skill or subagent (one line), or None when it can.

    The agent checks a name the model gives (``task(subagent=...)``) with this
    before it turns the name into a path, so "../notes/evil" never reaches one.
    """
    if is_valid_name(name):
        return None
    return f"{short(name)!r} is not a valid name ({'; '.join(_reasons(name))}). {RULE}, e.g. '{suggest_name(name)}'."


def check_name_key(
    doc: FrontmatterDoc,
    expected: str,
    kind: str,
    path_for: Callable[[str], str],
) -> list[Problem]:
    """Problems with the ``name`` key, given the name the file's path implies.

    ``path_for(name)`` renders where a file with that name belongs, for advice.
    """
    problems: list[Problem] = []
    stem_ok = is_valid_name(expected)
    given = doc.data.get("name")
    # An invalid stem (even an empty one, /skills/.md) is renamed to the name the
    # frontmatter gives when that one is valid, else to the nearest valid name.
    target = (
        expected if stem_ok else given if isinstance(given, str) and is_valid_name(given) else suggest_name(expected)
    )
    if not stem_ok:
        problems.append(
            Problem(
                "file",
                f"the file name gives the {kind} name '{short(expected)}', which is not valid "
                f"({'; '.join(_reasons(expected))}). {RULE}. Write the file to "
                f"{path_for(target)} instead, with name: {target}.",
                kind,
            )
        )
    loc = key_location(doc, "name")
    if "name" not in doc.data:
        problems.append(
            Problem(
                loc,
                f"is missing. Add the line `name: {target}` to the frontmatter; "
                "it must equal the file name without .md.",
                kind,
            )
        )
        return problems
    value = doc.data["name"]
    if not isinstance(value, str):
        problems.append(Problem(loc, f"must be text, but it is {describe(value)}. Write `name: {target}`.", kind))
        return problems
    if not is_valid_name(value):
        problems.append(
            Problem(
                loc,
                f"'{short(value)}' is not a valid {kind} name "
                f"({'; '.join(_reasons(value))}). {RULE}: write `name: {target}`.",
                kind,
            )
        )
    elif stem_ok and value != expected:
        problems.append(
            Problem(
                loc,
                f"'{value}' does not match the file name: it must be '{expected}' "
                f"because the file is {path_for(expected)}. Either set `name: {expected}` "
                f"or move the file to {path_for(value)}.",
                kind,
            )
        )
    return problems


def check_description(doc: FrontmatterDoc, kind: str) -> list[Problem]:
    loc = key_location(doc, "description")
    what = f"what this {kind} does and when to use it"
    if "description" not in doc.data:
        return [
            Problem(
                loc,
                f"is missing. Add `description: <one or two sentences: {what}>` to the frontmatter.",
                kind,
            )
        ]
    value = doc.data["description"]
    if not isinstance(value, str):
        return [
            Problem(
                loc,
                f"must be text, but it is {describe(value)}. Write one or two "
                f'sentences saying {what}, quoted if they contain ": ".',
                kind,
            )
        ]
    if not value.strip():
        return [Problem(loc, f"is empty. Write one or two sentences saying {what}.", kind)]
    if len(value) > MAX_DESCRIPTION:
        return [
            Problem(
                loc,
                f"is {len(value)} characters long; the maximum is {MAX_DESCRIPTION}. "
                "Shorten it to a sentence or two and move the detail into the body.",
                kind,
            )
        ]
    return []


def check_text_value(
    doc: FrontmatterDoc, key: str, kind: str, example: str, max_len: int | None = None
) -> list[Problem]:
    """An optional key that, when present, must be non-empty text."""
    if key not in doc.data:
        return []
    loc, value = key_location(doc, key), doc.data[key]
    if not isinstance(value, str) or not value.strip():
        return [
            Problem(
                loc,
                f"must be non-empty text, but it is {describe(value)}. Write it "
                f"as text, e.g. `{example}` (in quotes if YAML would read it as "
                "something else), or remove the key.",
                kind,
            )
        ]
    if max_len is not None and len(value) > max_len:
        return [Problem(loc, f"is {len(value)} characters long; the maximum is {max_len}. Shorten it.", kind)]
    return []


def check_unknown_keys(doc: FrontmatterDoc, allowed: tuple[str, ...], kind: str, advice: str) -> list[Problem]:
    problems = []
    for key in doc.data:
        if key not in allowed:
            problems.append(
                Problem(
                    key_location(doc, str(key)),
                    f"is not allowed in {kind} frontmatter. The allowed keys are: {', '.join(allowed)}. {advice}",
                    kind,
                )
            )
    return problems
