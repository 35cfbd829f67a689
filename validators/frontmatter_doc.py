"""Reading Markdown files with YAML frontmatter (skills and subagents).

Invariants:
- The frontmatter starts on line 1 with a line that is exactly ``---`` and ends
  at the next such line; anything else is reported with an example of how the
  file must begin.
- Every reported line number is a line of the *file* (the opening ``---`` is
  line 1), never a line of the YAML fragment.
- Only plain YAML is accepted: no anchors, aliases or explicit tags (they make
  memory hard to read and edit, and other Agent Skills tools refuse them), no
  duplicate keys (YAML would silently keep the last one). Flow style
  (``{...}``, ``[...]``) is reported separately because only skills forbid it.
- Values are never constructed from a document that uses aliases, so a
  "billion laughs" document cannot make us walk a huge graph.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import frontmatter
import yaml

from .base import Problem

_DELIMITER = re.compile(r"---[ \t\r]*")


@dataclass
class FrontmatterDoc:
    """A parsed frontmatter document; ``data`` is only trusted when ``ok``."""

    data: dict[Any, Any] = field(default_factory=dict)
    key_lines: dict[str, int] = field(default_factory=dict)  # top-level key -> file line
    body: str = ""
    close_line: int = 0  # file line of the closing ---
    fm_lines: list[str] = field(default_factory=list)  # raw frontmatter lines (file line 2...)
    flow_lines: list[int] = field(default_factory=list)  # file lines where flow style starts
    ok: bool = False


def _line(item: yaml.Node | yaml.Event) -> int:
    # The fragment starts with the rest of file line 1 (usually just "\n"), so a
    # 0-based line of the fragment is the 1-based line of the file.
    mark = item.start_mark
    return mark.line + 1 if mark is not None else 1


class _Handler(frontmatter.YAMLHandler):
    """python-frontmatter handler with a strict boundary and a node-level YAML pass.

    The stock boundary ``^-{3,}\\s*$`` lets ``\\s*`` swallow blank lines after the
    opening delimiter, which would shift every line number we report.
    """

    FM_BOUNDARY = re.compile(r"^---[ \t\r]*$", re.MULTILINE)

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.problems: list[Problem] = []
        self.key_lines: dict[str, int] = {}
        self.flow_lines: list[int] = []
        self.ok = True
        self.raw: Any = None

    def load(self, fm: str, **kwargs: object) -> Any:
        self._check_events(fm)
        if not self.ok:
            return {}
        node = yaml.compose(fm, Loader=yaml.SafeLoader)
        if isinstance(node, yaml.MappingNode):
            self._check_duplicates(node, "")
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    self.key_lines.setdefault(str(key_node.value), _line(key_node))
        self.raw = yaml.safe_load(fm)
        return self.raw

    def _check_events(self, fm: str) -> None:
        for event in yaml.parse(fm, Loader=yaml.SafeLoader):
            line = _line(event)
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                self.ok = False
                self._add(
                    f"line {line}",
                    "uses a YAML anchor or alias (& or *). Write each value out in full; "
                    "frontmatter must be plain YAML.",
                )
            # The parser sets a tag only when the source spells one out (!!str, !foo).
            if getattr(event, "tag", None) is not None:
                self._add(
                    f"line {line}",
                    "uses an explicit YAML tag (such as !!str). Remove the tag and quote the "
                    'value instead, e.g. key: "value".',
                )
            if isinstance(event, yaml.CollectionStartEvent) and event.flow_style:
                self.flow_lines.append(line)

    def _check_duplicates(self, node: yaml.MappingNode, prefix: str) -> None:
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
            line = _line(key_node)
            if key in seen:
                self._add(
                    f"frontmatter key '{prefix}{key}' (line {line})",
                    f"is given twice (first on line {seen[key]}). YAML keeps only the last "
                    "value, so the first would be silently lost: keep one of them.",
                )
            else:
                seen[key] = line
            if isinstance(value_node, yaml.MappingNode):
                self._check_duplicates(value_node, f"{prefix}{key}.")

    def _add(self, location: str, message: str) -> None:
        self.problems.append(Problem(location, message, self.kind))


def _yaml_error(exc: yaml.YAMLError, kind: str) -> Problem:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return Problem("line 1", f"the YAML frontmatter is invalid: {problem}.", kind)
    line, column = mark.line + 1, mark.column + 1
    hint = "Fix the YAML syntax on that line (keys are `key: value`, indented with spaces)."
    if "mapping values are not allowed" in str(problem):
        hint = (
            'A value that contains ": " must be quoted, e.g. description: "Use when: the user '
            'asks..." (escape any " inside it as \\").'
        )
    elif "\\t" in str(problem) or "'\\t'" in str(exc):
        hint = "YAML does not allow tab characters here: use spaces."
    return Problem(
        f"line {line}",
        f"the YAML frontmatter is invalid: {problem} (line {line}, column {column}). {hint}",
        kind,
    )


def parse_frontmatter(content: str, kind: str, example: str) -> tuple[FrontmatterDoc, list[Problem]]:
    """Split and parse the frontmatter; problems cover structure and YAML syntax.

    ``example`` is a tiny valid file shown when the frontmatter is missing.
    """
    doc = FrontmatterDoc()
    lines = content.split("\n")
    if not _DELIMITER.fullmatch(lines[0]):
        if content.lstrip(" \t\r\n\ufeff").startswith("---"):
            msg = (
                "the frontmatter must start on the very first line: remove the blank lines, "
                "spaces or byte-order mark before the opening ---."
            )
        else:
            msg = (
                "the file must begin with YAML frontmatter: a line containing only ---, "
                "the keys, then another --- line, then the Markdown body. For example:\n"
                f"{example}"
            )
        return doc, [Problem("line 1", msg, kind)]
    close = next((i for i in range(1, len(lines)) if _DELIMITER.fullmatch(lines[i])), None)
    if close is None:
        return doc, [
            Problem(
                "line 1",
                "the frontmatter opened by --- on line 1 is never closed: add a line "
                "containing only --- after the last frontmatter key, before the body.",
                kind,
            )
        ]
    doc.close_line = close + 1
    doc.fm_lines = lines[1:close]
    handler = _Handler(kind)
    try:
        data, body = frontmatter.parse(content, handler=handler)
    except yaml.YAMLError as exc:
        return doc, [_yaml_error(exc, kind)]
    doc.body, doc.key_lines, doc.flow_lines = body, handler.key_lines, handler.flow_lines
    problems = list(handler.problems)
    if not handler.ok:
        return doc, problems
    if handler.raw is not None and not isinstance(handler.raw, dict):
        problems.append(
            Problem(
                "line 2",
                "the frontmatter must be a YAML mapping of `key: value` lines, not a list "
                "or a single value. For example:\n" + example,
                kind,
            )
        )
        return doc, problems
    doc.data = dict(data)
    doc.ok = True
    return doc, problems
