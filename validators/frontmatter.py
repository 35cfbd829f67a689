"""The one reader of YAML frontmatter (skills, subagents, and the prompt index).

``read_frontmatter(content)`` is what the agent calls; the validators call
``parse_frontmatter``, which reads the same way and adds what they report
(key lines, flow style, tags, duplicate keys). See ARCHITECTURE.md: every
reader of memory files goes through here, so the prompt sees exactly the
frontmatter the validators checked.

Invariants:
- The block starts on line 1 with a line that is exactly ``---`` (trailing
  spaces, tabs or a CR allowed) and ends at the next such line; the body is
  the text after that closing line. No other boundary rule exists.
- Reported line numbers are lines of the *file* (the opening ``---`` is line 1).
- Reading is total and bounded: any string gives a result, never an exception.
  The block is at most ``MAX_FRONTMATTER_BYTES``; nesting deeper than
  ``MAX_DEPTH`` is refused before PyYAML composes anything (its composer is
  recursive); anchors and aliases are refused before any value is built, so an
  alias bomb costs one partial parse of a few hundred bytes; a value PyYAML
  cannot build (a 5,000-digit number) is an error, not a crash.
- Only plain YAML is accepted: no anchors or aliases (fatal: ``meta`` is None),
  no explicit tags and no duplicate keys (reported; ``meta`` is still read,
  with YAML's last-one-wins). Flow style is noted, since only skills forbid it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml

from .base import Problem, human_bytes
from .nesting import MAX_DEPTH, too_deep

MAX_FRONTMATTER_BYTES = 8 * 1024

_OPEN = re.compile(r"---[ \t\r]*(?:\n|\Z)")
_CLOSE = re.compile(r"^---[ \t\r]*$", re.MULTILINE)

# Why a block could not be read; the validators word some of these per kind.
Failure = Literal[
    "missing", "not-first-line", "unclosed", "too-large", "too-deep", "anchor", "yaml", "not-mapping", "unbuildable"
]


@dataclass(frozen=True)
class Frontmatter:
    """What a memory file's frontmatter says, for readers that only need the values."""

    meta: dict[str, Any] | None  # None: no frontmatter block, or it cannot be read
    body: str  # the text after the closing '---' line (the whole content when there is no block)
    error: str | None  # one line saying why meta is None


@dataclass
class FrontmatterDoc:
    """The validators' view of a block; ``data`` is only trusted when ``ok``."""

    data: dict[Any, Any] = field(default_factory=dict)
    key_lines: dict[str, int] = field(default_factory=dict)  # top-level key -> file line
    body: str = ""
    close_line: int = 0  # file line of the closing ---
    fm_lines: list[str] = field(default_factory=list)  # raw frontmatter lines (file line 2...)
    flow_lines: list[int] = field(default_factory=list)  # file lines where flow style starts
    ok: bool = False


@dataclass
class _Reading:
    doc: FrontmatterDoc
    failure: Failure | None = None
    where: str = "line 1"
    why: str = ""  # one line, no advice that depends on the kind
    notes: list[tuple[str, str]] = field(default_factory=list)  # (location, message): not fatal


def _line(item: yaml.Node | yaml.Event) -> int:
    # The fragment starts with the rest of file line 1 (just "\n"), so a 0-based
    # line of the fragment is the 1-based line of the file.
    mark = item.start_mark
    return mark.line + 1 if mark is not None else 1


def _yaml_error(exc: yaml.YAMLError) -> tuple[str, str]:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["unreadable YAML"])[0]
    if mark is None:
        return "line 1", f"the YAML frontmatter is invalid: {problem}."
    line, column = mark.line + 1, mark.column + 1
    hint = "Fix the YAML syntax on that line (keys are `key: value`, indented with spaces)."
    if "mapping values are not allowed" in str(problem):
        hint = (
            'A value that contains ": " must be quoted, e.g. description: "Use when: the user '
            'asks..." (escape any " inside it as \\").'
        )
    elif "\\t" in str(problem) or "'\\t'" in str(exc):
        hint = "YAML does not allow tab characters here: use spaces."
    return f"line {line}", f"the YAML frontmatter is invalid: {problem} (line {line}, column {column}). {hint}"


def _too_deep(line: int) -> str:
    return (
        f"the frontmatter nests deeper than {MAX_DEPTH} levels (at line {line}). Flatten it: frontmatter "
        "holds a few short keys (name, description...), each a text value or a short list."
    )


class _Refused(Exception):
    """Stops composing at the first anchor, alias or too-deep collection (the reading says which)."""


class _Composer(yaml.SafeLoader):
    """PyYAML's safe loader, checking each node's event before composing it.

    One pass instead of a separate event scan: it refuses anchors and aliases
    before the composer resolves them and nesting deeper than ``MAX_DEPTH``
    before it recurses, and notes explicit tags and flow style on the way.
    """

    def __init__(self, fragment: str, reading: _Reading) -> None:
        super().__init__(fragment)
        self.reading = reading
        self.depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()
        line, reading = _line(event), self.reading
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            reading.failure, reading.where = "anchor", f"line {line}"
            reading.why = (
                "uses a YAML anchor or alias (& or *). Write each value out in full; frontmatter must be plain YAML."
            )
            raise _Refused
        # The parser sets a tag only when the source spells one out (!!str, !foo).
        if getattr(event, "tag", None) is not None:
            reading.notes.append(
                (
                    f"line {line}",
                    "uses an explicit YAML tag (such as !!str). Remove the tag and quote the "
                    'value instead, e.g. key: "value".',
                )
            )
        if not isinstance(event, yaml.CollectionStartEvent):
            return super().compose_node(parent, index)
        if self.depth >= MAX_DEPTH:
            reading.failure, reading.where, reading.why = "too-deep", f"line {line}", _too_deep(line)
            raise _Refused
        if event.flow_style:
            reading.doc.flow_lines.append(line)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _check_duplicates(node: yaml.MappingNode, prefix: str, reading: _Reading) -> None:
    seen: dict[str, int] = {}
    for key_node, value_node in node.value:
        key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
        line = _line(key_node)
        if key in seen:
            reading.notes.append(
                (
                    f"frontmatter key '{prefix}{key}' (line {line})",
                    f"is given twice (first on line {seen[key]}). YAML keeps only the last "
                    "value, so the first would be silently lost: keep one of them.",
                )
            )
        else:
            seen[key] = line
        if isinstance(value_node, yaml.MappingNode):
            _check_duplicates(value_node, f"{prefix}{key}.", reading)


def _build(fragment: str, reading: _Reading) -> None:
    """Compose (checking as it goes) and construct the fragment."""
    loader = _Composer(fragment, reading)
    try:
        node = loader.get_single_node()
        if isinstance(node, yaml.MappingNode):
            _check_duplicates(node, "", reading)
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    reading.doc.key_lines.setdefault(str(key_node.value), _line(key_node))
        data = loader.construct_document(node) if node is not None else None
    except _Refused:
        return
    finally:
        loader.dispose()
    if data is not None and not isinstance(data, dict):
        reading.failure, reading.where = "not-mapping", "line 2"
        reading.why = "the frontmatter must be a YAML mapping of `key: value` lines, not a list or a single value."
        return
    reading.doc.data = dict(data or {})
    reading.doc.ok = True


def _read(content: str) -> _Reading:
    reading = _Reading(FrontmatterDoc(body=content))
    opening = _OPEN.match(content)
    if opening is None:
        if content.lstrip(" \t\r\n\ufeff").startswith("---"):
            reading.failure = "not-first-line"
            reading.why = (
                "the frontmatter must start on the very first line: remove the blank lines, "
                "spaces or byte-order mark before the opening ---."
            )
        else:
            reading.failure = "missing"
            reading.why = "the file does not begin with YAML frontmatter (a line containing only ---)."
        return reading
    start = opening.end() - (1 if content[opening.end() - 1 : opening.end()] == "\n" else 0)
    close = _CLOSE.search(content, opening.end())
    if close is None:
        reading.failure = "unclosed"
        reading.why = (
            "the frontmatter opened by --- on line 1 is never closed: add a line "
            "containing only --- after the last frontmatter key, before the body."
        )
        return reading
    fragment = content[start : close.start()]
    doc = reading.doc
    doc.close_line = content.count("\n", 0, close.start()) + 1
    newline = content.find("\n", close.end())
    doc.body = "" if newline == -1 else content[newline + 1 :]
    size = len(fragment.encode("utf-8", "surrogatepass"))
    if size > MAX_FRONTMATTER_BYTES:
        reading.failure = "too-large"
        reading.why = (
            f"the frontmatter is {size} bytes, over the limit of {human_bytes(MAX_FRONTMATTER_BYTES)}. Keep it "
            "to a few short keys (a description is at most 1024 characters) and move the detail into the body."
        )
        return reading
    # The fragment is "\n" (the rest of line 1), then every frontmatter line with its "\n".
    doc.fm_lines = fragment[1:].split("\n")[:-1]
    # Cheap early refusal of deep flow nesting ([[[[...): PyYAML's scanner looks
    # ahead up to 1024 characters per level before the composer could stop it.
    if (offset := too_deep(fragment, "yaml")) is not None:
        line = fragment.count("\n", 0, offset) + 1
        reading.failure, reading.where, reading.why = "too-deep", f"line {line}", _too_deep(line)
        return reading
    try:
        _build(fragment, reading)
    except yaml.YAMLError as exc:
        reading.failure = "yaml"
        reading.where, reading.why = _yaml_error(exc)
    except Exception as exc:  # noqa: BLE001 - reading is total; the cause is named in the message
        # PyYAML builds ints with int(), which refuses more than 4300 digits, and
        # may meet values it cannot convert; none of that is a YAMLError.
        reading.failure = "unbuildable"
        reading.why = (
            f"the YAML frontmatter holds a value that cannot be read ({type(exc).__name__}: "
            f"{(str(exc).splitlines() or [''])[0][:120]}). Quote long numbers and unusual values as text."
        )
    if reading.failure is not None:
        reading.doc.ok = False
    return reading


def read_frontmatter(content: str) -> Frontmatter:
    """The frontmatter of ``content``: values, body, or one line saying why there are no values."""
    reading = _read(content)
    if reading.failure is not None:
        where = "" if reading.where == "line 1" and reading.failure in ("missing", "unclosed") else f"{reading.where}: "
        return Frontmatter(None, reading.doc.body, where + reading.why)
    meta = {str(k): v for k, v in reading.doc.data.items()}
    return Frontmatter(meta, reading.doc.body, None)


def _indented(example: str) -> str:
    """The example file set off by four spaces, so that on screen it reads as a quoted
    file and not as the start of the next message (or as the file itself)."""
    return "\n".join("    " + line if line else line for line in example.splitlines())


def parse_frontmatter(content: str, kind: str, example: str) -> tuple[FrontmatterDoc, list[Problem]]:
    """Read the frontmatter for a validator: the document and the problems found reading it.

    ``example`` is a tiny valid file shown when the frontmatter is missing or not a mapping.
    """
    reading = _read(content)
    problems = [Problem(where, message, kind) for where, message in reading.notes]
    if reading.failure == "missing":
        message = (
            "the file must begin with YAML frontmatter: a line containing only ---, the keys, then another "
            f"--- line, then the Markdown body. For example:\n{_indented(example)}"
        )
        problems.append(Problem("line 1", message, kind))
    elif reading.failure == "not-mapping":
        problems.append(Problem(reading.where, f"{reading.why[:-1]}. For example:\n{_indented(example)}", kind))
    elif reading.failure is not None:
        problems.append(Problem(reading.where, reading.why, kind))
    return reading.doc, problems
