"""Validator for ``/tools.json``: JSON syntax, then the JSON Schema, then cross-field rules.

Invariants:
- Locations are JSON pointers (RFC 6901, e.g. ``/tools/1/server``); syntax
  errors are located as "line L, column C".
- Duplicate object keys are refused (``json`` would silently keep the last).
- Total and bounded: nesting deeper than ``MAX_DEPTH`` is refused before
  ``json`` (which raises RecursionError around 1,000 levels) or ``jsonschema``
  sees the text, and a value ``json`` cannot build (an integer of more than
  4,300 digits raises ValueError) is a problem, not a crash.
- Every problem is reported in one pass: schema errors and cross-field errors
  are collected together; cross-field rules skip parts whose shape is already
  reported as wrong, so one fault gives one problem.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

from .base import Problem
from .fields import short
from .nesting import MAX_DEPTH, line_and_column, too_deep
from .tools_rules import KIND, cross_field_problems, pointer
from .tools_schema import ALLOWED_KEYS, REQUIRED_HINTS, SCHEMA, SERVER_NAME, TOOL_NAME

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError


@functools.cache
def _validator() -> Draft202012Validator:
    # jsonschema takes ~0.1 s to import: only a tools.json write pays for it, not
    # every command that imports the validators (chat, fs).
    from jsonschema import Draft202012Validator

    return Draft202012Validator(SCHEMA)

_JSON_TYPES = {
    "object": "an object {...}",
    "array": "a list [...]",
    "string": "a string in quotes",
    "boolean": "true or false (without quotes)",
}


class _Object(dict[str, Any]):
    """A JSON object that remembers keys given more than once."""

    duplicates: list[str]


def _pairs(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object()
    obj.duplicates = []
    for key, value in pairs:
        if key in obj:
            obj.duplicates.append(key)
        obj[key] = value
    return obj


def _json_type(value: Any) -> str:
    for name, typ in (
        ("null", type(None)),
        ("true/false", bool),
        ("a number", (int, float)),
        ("a string", str),
        ("a list", list),
        ("an object", dict),
    ):
        if isinstance(value, typ):
            return name
    return type(value).__name__


def _syntax_problem(exc: json.JSONDecodeError, content: str) -> Problem:
    if not content.strip():
        return Problem("file", 'is empty. Write a JSON object such as {"mcp_servers": {}, "tools": []}.', KIND)
    hint = "Fix the JSON syntax there."
    if exc.msg.startswith("Expecting property name"):
        hint = (
            "JSON needs double quotes around every key, allows no comma before a closing } or ], and has no comments."
        )
    elif exc.msg.startswith("Expecting ',' delimiter"):
        hint = "A comma is missing between two items, or a bracket is not closed."
    elif exc.msg.startswith("Expecting value"):
        hint = (
            "A value is missing or malformed: strings need double quotes, and JSON "
            "allows no comments and no trailing commas."
        )
    elif exc.msg.startswith("Extra data"):
        hint = "The file must hold exactly one JSON object: remove what follows it."
    elif exc.msg.startswith("Invalid control character"):
        hint = "Write a line break inside a string as \\n."
    return Problem(f"line {exc.lineno}, column {exc.colno}", f"is not valid JSON: {exc.msg}. {hint}", KIND)


def _duplicates(value: Any, path: list[str | int]) -> list[Problem]:
    problems: list[Problem] = []
    if isinstance(value, _Object):
        for key in value.duplicates:
            problems.append(
                Problem(
                    pointer([*path, key]),
                    f"the key '{short(key, 60)}' is given "
                    "more than once in the same object; JSON keeps only the "
                    "last one. Keep a single entry.",
                    KIND,
                )
            )
        for key, item in value.items():
            problems += _duplicates(item, [*path, key])
    elif isinstance(value, list):
        for i, item in enumerate(value):
            problems += _duplicates(item, [*path, i])
    return problems


def _place(path: list[str | int]) -> str:
    """What sort of object a schema path points at, to list its allowed keys."""
    if not path:
        return "top"
    if path[0] == "mcp_servers" and len(path) == 2:
        return "server"
    if path[0] == "tools" and len(path) == 2:
        return "tool"
    return ""


def _schema_problem(error: ValidationError) -> list[Problem]:
    path = list(error.absolute_path)
    # jsonschema types these as "Any | Unset"; they are always set on a real error.
    inst: Any = error.instance
    spec: Any = error.validator_value
    where, kw = pointer(path), error.validator
    if kw == "required":
        missing = [k for k in spec if k not in inst]
        return [
            Problem(
                where,
                f"is missing the required key '{k}'. {REQUIRED_HINTS.get(k, '')}".strip(),
                KIND,
            )
            for k in missing
        ]
    if kw == "additionalProperties":
        allowed = ALLOWED_KEYS.get(_place(path), ())
        extra = [k for k in inst if k not in allowed]
        return [
            Problem(
                pointer([*path, k]),
                f"'{short(k, 60)}' is not an allowed key here: remove it "
                f"or fix its spelling. Allowed keys: {', '.join(allowed)}.",
                KIND,
            )
            for k in extra
        ]
    if kw == "pattern" and "propertyNames" in error.relative_schema_path:
        return [_bad_name(path, str(inst), str(spec))]
    if kw == "type":
        want = _JSON_TYPES.get(str(spec), str(spec))
        return [Problem(where, f"must be {want}, but it is {_json_type(inst)}: write it as {want}.", KIND)]
    if kw == "enum":
        options = ", ".join(json.dumps(o) for o in spec)
        return [
            Problem(
                where,
                f'must be one of {options}: set "stdio" (the default) to '
                'run a local command, "http" or "sse" to connect to a url.',
                KIND,
            )
        ]
    if kw == "minLength":
        return [Problem(where, "must not be empty: give a value or remove the key.", KIND)]
    if kw == "pattern" and spec == TOOL_NAME:
        return [
            Problem(
                where,
                f"'{short(inst, 60)}' is not a valid tool name: use the name the "
                "server declares (1-128 letters, digits, '_', '-' or '.').",
                KIND,
            )
        ]
    return [Problem(where, f"{error.message}. Fix the value to match the tools.json format.", KIND)]


def _bad_name(path: list[str | int], name: str, pattern: str) -> Problem:
    where = pointer([*path, name])
    if pattern == SERVER_NAME:
        what = "a server name must be 1-64 letters, digits, '_' or '-', starting with a letter or digit"
    elif path and path[-1] == "env":
        what = "an environment variable name must be letters, digits and '_', not starting with a digit"
    else:
        what = "a header name must be letters, digits and '-' (no spaces or ':')"
    return Problem(where, f"'{short(name, 60)}' is not a valid name: {what}. Rename it.", KIND)


def _path_order(error: ValidationError) -> list[tuple[int, int, str]]:
    # Document order: list indexes numerically, keys alphabetically.
    return [(0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in error.absolute_path]


def validate_tools_json(content: str) -> list[Problem]:
    if (offset := too_deep(content, "json")) is not None:
        line, column = line_and_column(content, offset)
        return [
            Problem(
                f"line {line}, column {column}",
                f"nests deeper than {MAX_DEPTH} levels of [ ] and {{ }}. Flatten it: tools.json needs only "
                'a few levels ({"mcp_servers": {name: {...}}, "tools": [{...}]}).',
                KIND,
            )
        ]
    try:
        data = json.loads(content, object_pairs_hook=_pairs)
    except json.JSONDecodeError as exc:
        return [_syntax_problem(exc, content)]
    except ValueError as exc:  # int() refuses more than 4,300 digits; not a JSONDecodeError
        return [
            Problem(
                "file",
                f"holds a value JSON cannot read ({(str(exc).splitlines() or [''])[0][:100]}). "
                "Write long numbers as strings in quotes; tools.json needs no numbers at all.",
                KIND,
            )
        ]
    problems = _duplicates(data, [])
    for error in sorted(_validator().iter_errors(data), key=_path_order):
        problems += _schema_problem(error)
    problems += cross_field_problems(data)
    return problems
