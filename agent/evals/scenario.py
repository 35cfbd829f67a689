"""The scenario file: YAML, one scenario a file, loaded into plain dataclasses.

The shape is the issue's, extended only by optional keys::

    name, description                 required strings
    template: NAME, files: {PATH: TEXT}   the starting memory: a starter template, files (over the
                                      template's, when both are given), or neither (no files)
    knowledge: {count: N, folder: /knowledge/generated}   N generated filler files (search at scale)
    threads: [[{user: ..}, {assistant: ..}, ..], ..]      past conversations, under /conversations/
    context_budget: TOKENS            the context budget of every session (a thread that overflows)
    sessions: [STEP, ..]              a STEP is {turns: [{user, expect?}], approve?: all|none}
                                      or {command: /remember|/compact|reflect, hint?, approve?}
    expect: CHECKS                    checked after the last session

``CHECKS`` is a mapping of check kinds (or a list of such mappings, to repeat a kind);
``checks.KINDS`` says what each takes. In file contents ``{python}`` is this Python
interpreter (for a ``/tools.json`` that starts ``agent/evals/mcp_fixture.py``).

Invariants:
- Loading never runs anything and never raises anything but ``ScenarioError``, whose
  message is one line: ``FILE:LINE: what is wrong`` and how to fix it.
- Every key is known: a misspelt key is an error naming the keys allowed there.
- Loading is bounded: a file over ``MAX_SCENARIO_BYTES`` is refused before it is
  read; anchors and aliases (``&a``, ``*a``) are refused as the parser meets them, so
  an alias bomb or a recursive alias is never expanded; nesting deeper than
  ``MAX_DEPTH`` is refused before PyYAML's (recursive) composer descends into it.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from memagent.agent.evals.checks import KINDS, check_arg
from memagent.validators.nesting import MAX_DEPTH

Approve = Literal["all", "none"]
CommandName = Literal["/remember", "/compact", "reflect"]
COMMANDS: tuple[CommandName, ...] = ("/remember", "/compact", "reflect")
APPROVE: tuple[Approve, ...] = ("all", "none")
MAX_KNOWLEDGE = 20_000
# The built-in scenarios are a few KB; a megabyte is hundreds of turns and files.
MAX_SCENARIO_BYTES = 1 << 20


class ScenarioError(Exception):
    """A scenario file that cannot be used: ``FILE:LINE: what is wrong``."""


@dataclass(frozen=True)
class Check:
    """One check: its kind (``checks.KINDS``), its argument, and where it was written."""

    kind: str
    arg: Any
    line: int


@dataclass(frozen=True)
class Turn:
    user: str
    expect: tuple[Check, ...] = ()


@dataclass(frozen=True)
class Step:
    """A session of turns (a new thread), or a command run after the previous session."""

    approve: Approve
    turns: tuple[Turn, ...] = ()
    command: CommandName | None = None
    hint: str = ""


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    source: str
    template: str | None = None
    files: dict[str, str] = field(default_factory=dict)
    knowledge: int = 0
    knowledge_folder: str = "/knowledge/generated"
    threads: tuple[tuple[dict[str, Any], ...], ...] = ()
    context_budget: int | None = None
    steps: tuple[Step, ...] = ()
    expect: tuple[Check, ...] = ()

    @property
    def checks(self) -> int:
        return sum(len(t.expect) for s in self.steps for t in s.turns) + len(self.expect)


class _Doc:
    """A YAML node tree read as plain values, each error naming the node's line."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._scalars = SafeConstructor()

    def fail(self, node: Node | None, message: str) -> ScenarioError:
        line = node.start_mark.line + 1 if node is not None else 1
        return ScenarioError(f"{self.source}:{line}: {message}")

    def mapping(self, node: Node, what: str, allowed: tuple[str, ...],
                required: tuple[str, ...] = ()) -> dict[str, Node]:
        if not isinstance(node, MappingNode):
            raise self.fail(node, f"{what} must be a mapping (key: value lines)")
        out: dict[str, Node] = {}
        for key_node, value in node.value:
            key = self.scalar(key_node)
            if not isinstance(key, str) or key not in allowed:
                raise self.fail(key_node, f"unknown key {key!r} in {what}; allowed: {', '.join(allowed)}")
            if key in out:
                raise self.fail(key_node, f"{key!r} appears twice in {what}")
            out[key] = value
        for key in required:
            if key not in out:
                raise self.fail(node, f"{what} needs {key!r}")
        return out

    def scalar(self, node: Node) -> Any:
        if not isinstance(node, ScalarNode):
            return None
        return self._scalars.construct_object(node, deep=True)

    def text(self, node: Node, what: str, *, empty: bool = False) -> str:
        value = self.scalar(node)
        if not isinstance(value, str) or (not empty and not value.strip()):
            raise self.fail(node, f"{what} must be a non-empty string (quote it if it starts with a symbol)")
        return value

    def integer(self, node: Node, what: str, low: int, high: int) -> int:
        value = self.scalar(node)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.fail(node, f"{what} must be a whole number from {low} to {high}")
        return value

    def sequence(self, node: Node, what: str) -> list[Node]:
        if not isinstance(node, SequenceNode) or not node.value:
            raise self.fail(node, f"{what} must be a non-empty list (lines starting with '- ')")
        return list(node.value)

    def plain(self, node: Node) -> Any:
        if isinstance(node, MappingNode):
            return {self.scalar(k): self.plain(v) for k, v in node.value}
        if isinstance(node, SequenceNode):
            return [self.plain(v) for v in node.value]
        return self.scalar(node)


def _checks(doc: _Doc, node: Node, what: str) -> tuple[Check, ...]:
    groups = doc.sequence(node, what) if isinstance(node, SequenceNode) else [node]
    found: list[Check] = []
    for group in groups:
        for key, value in doc.mapping(group, what, tuple(KINDS)).items():
            problem = check_arg(key, doc.plain(value))
            if problem is not None:
                raise doc.fail(value, f"{key}: {problem}")
            found.append(Check(key, doc.plain(value), value.start_mark.line + 1))
    return tuple(found)


def _step(doc: _Doc, node: Node, n: int) -> Step:
    what = f"session {n}"
    keys = doc.mapping(node, what, ("turns", "approve", "command", "hint"))
    approve: Approve = "all"
    if "approve" in keys:
        value = doc.scalar(keys["approve"])
        if value not in APPROVE:
            raise doc.fail(keys["approve"], f"approve must be one of: {', '.join(APPROVE)}")
        approve = value
    if ("turns" in keys) == ("command" in keys):
        raise doc.fail(node, f"{what} needs either turns (a new thread) or command "
                             f"({', '.join(COMMANDS)}), not both")
    if "command" in keys:
        command = doc.scalar(keys["command"])
        if command not in COMMANDS:
            raise doc.fail(keys["command"], f"command must be one of: {', '.join(COMMANDS)}")
        hint = doc.text(keys["hint"], "hint") if "hint" in keys else ""
        return Step(approve, command=command, hint=hint)
    if "hint" in keys:
        raise doc.fail(keys["hint"], "hint goes with a command (/remember)")
    turns: list[Turn] = []
    for t, turn_node in enumerate(doc.sequence(keys["turns"], f"{what}'s turns"), 1):
        turn = doc.mapping(turn_node, f"turn {t} of {what}", ("user", "expect"), ("user",))
        expect = _checks(doc, turn["expect"], f"the expect of turn {t}") if "expect" in turn else ()
        turns.append(Turn(doc.text(turn["user"], "user"), expect))
    return Step(approve, turns=tuple(turns))


def _thread(doc: _Doc, node: Node, n: int) -> tuple[dict[str, Any], ...]:
    messages: list[dict[str, Any]] = []
    for item in doc.sequence(node, f"thread {n}"):
        entry = doc.mapping(item, f"a message of thread {n}", ("user", "assistant"))
        if len(entry) != 1:
            raise doc.fail(item, "each message is one 'user: TEXT' or 'assistant: TEXT'")
        role, value = next(iter(entry.items()))
        want = "user" if not messages or messages[-1]["role"] == "assistant" else "assistant"
        if role != want:
            raise doc.fail(item, f"thread {n} must alternate user and assistant, starting with user")
        messages.append({"role": role, "content": [{"type": "text", "text": doc.text(value, role)}]})
    return tuple(messages)


class _Refused(Exception):
    """Stops composing: an anchor, an alias or too deep a collection, at ``line``."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


class _Composer(yaml.SafeLoader):
    """PyYAML's safe loader, checking each node's event before composing it."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event = self.peek_event()
        line = event.start_mark.line + 1 if event.start_mark is not None else 1
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise _Refused(line, "uses a YAML anchor or alias (& or *); write each value out in full")
        if not isinstance(event, yaml.CollectionStartEvent):
            return super().compose_node(parent, index)
        if self.depth >= MAX_DEPTH:
            raise _Refused(line, f"nests deeper than {MAX_DEPTH} levels; a scenario needs a handful")
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _compose(text: str, source: str) -> Node | None:
    if len(text) > MAX_SCENARIO_BYTES:
        raise ScenarioError(f"{source}:1: {_too_large(f'{len(text):,} characters')}")
    loader = _Composer(text)
    try:
        return loader.get_single_node()
    except _Refused as err:
        raise ScenarioError(f"{source}:{err.line}: {err}") from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise ScenarioError(f"{source}:{line}: not valid YAML: {err.problem or err.context}") from None
    except yaml.YAMLError as err:
        raise ScenarioError(f"{source}:1: not valid YAML: {err}") from None
    finally:
        loader.dispose()


def _too_large(size: str) -> str:
    return (f"the file is larger than {MAX_SCENARIO_BYTES >> 20} MiB ({size}); a scenario is a few "
            "sessions and files: split it, or generate filler with knowledge: {count: N}")


_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,79}$")


def parse(text: str, source: str) -> Scenario:
    """The scenario in ``text`` (``source`` names it in errors)."""
    doc = _Doc(source)
    root = _compose(text, source)
    if root is None:
        raise ScenarioError(f"{source}:1: the file is empty; a scenario needs name, description and sessions")
    keys = doc.mapping(root, "the scenario", ("name", "description", "template", "files", "knowledge", "threads",
                                              "context_budget", "sessions", "expect"),
                       ("name", "description", "sessions"))
    name = doc.text(keys["name"], "name")
    if not _NAME.match(name):
        raise doc.fail(keys["name"], "name must be lowercase letters, digits, '.', '_' or '-' (at most 80)")
    files: dict[str, str] = {}
    if "files" in keys:
        fnode = doc.mapping(keys["files"], "files", tuple(str(doc.scalar(k)) for k, _ in
                                                          getattr(keys["files"], "value", [])))
        for path, value in fnode.items():
            if not path.startswith("/"):
                raise doc.fail(value, f"file path {path!r} must start with /")
            files[path] = doc.text(value, f"the content of {path}", empty=True).replace("{python}", sys.executable)
    count, folder = 0, "/knowledge/generated"
    if "knowledge" in keys:
        k = doc.mapping(keys["knowledge"], "knowledge", ("count", "folder"), ("count",))
        count = doc.integer(k["count"], "knowledge count", 1, MAX_KNOWLEDGE)
        if "folder" in k:
            folder = doc.text(k["folder"], "knowledge folder").rstrip("/")
            if not folder.startswith("/"):
                raise doc.fail(k["folder"], "knowledge folder must start with /")
    threads = tuple(_thread(doc, t, n) for n, t in enumerate(doc.sequence(keys["threads"], "threads"), 1)) \
        if "threads" in keys else ()
    budget = doc.integer(keys["context_budget"], "context_budget", 1000, 10_000_000) \
        if "context_budget" in keys else None
    steps = tuple(_step(doc, s, n) for n, s in enumerate(doc.sequence(keys["sessions"], "sessions"), 1))
    if steps[0].command is not None and steps[0].command != "reflect" and not threads:
        raise doc.fail(keys["sessions"], f"the first session is a command ({steps[0].command}) with no "
                                         "conversation before it; start with turns")
    expect = _checks(doc, keys["expect"], "expect") if "expect" in keys else ()
    scenario = Scenario(name=name, description=doc.text(keys["description"], "description"), source=source,
                        template=doc.text(keys["template"], "template") if "template" in keys else None,
                        files=files, knowledge=count, knowledge_folder=folder, threads=threads,
                        context_budget=budget, steps=steps, expect=expect)
    if scenario.checks == 0:
        raise doc.fail(root, "the scenario checks nothing; add expect under a turn or at the end")
    return scenario


def load(path: Path) -> Scenario:
    """The scenario in file ``path``."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_SCENARIO_BYTES + 1)  # never more than the limit into memory
        if len(data) > MAX_SCENARIO_BYTES:
            raise ScenarioError(f"{path}:1: {_too_large(f'{path.stat().st_size:,} bytes')}")
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ScenarioError(f"{path}: cannot read it: {err}") from None
    return parse(text, str(path))


def builtin_names() -> list[str]:
    """The built-in suite's scenario files, by name (``suite/<name>.yaml``)."""
    root = resources.files("memagent.agent.evals").joinpath("suite")
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))


def builtin() -> list[Scenario]:
    """Every built-in scenario."""
    root = resources.files("memagent.agent.evals").joinpath("suite")
    return [parse(root.joinpath(f"{n}.yaml").read_text("utf-8"), f"suite/{n}.yaml") for n in builtin_names()]
