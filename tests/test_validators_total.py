"""Validators are total and bounded (issue 9, items 3-5 and 9): any path and content give a
list of problems, never an exception; deep nesting, alias bombs and huge frontmatter are
refused quickly with one clear line; every file the prompt index can pick up is validated as
what the prompt takes it for; names, paths and revision messages are checked too.

Credential-shaped strings are built at run time, as in test_secrets.py.
"""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memagent import validators
from memagent.validators import (
    MAX_DEPTH,
    Frontmatter,
    Problem,
    check_name,
    kind_of,
    read_frontmatter,
    registry,
    scan_message,
    validate,
)
from tests.cli_helpers import err, run

ALNUM = string.ascii_letters + string.digits
OK_SKILL = "name: notes\ndescription: Summarise notes. Use when the user pastes notes.\n"
OK_SUB = "name: reviewer\ndescription: Reviews drafts. Use before sending.\n"

# Every kind of memory file, at a path of that kind (relative to the scope root).
KIND_PATHS = {
    "AGENTS.md": "/AGENTS.md",
    "tools.json": "/tools.json",
    "skill": "/skills/notes.md",
    "skill-dir": "/skills/notes/SKILL.md",
    "subagent": "/subagents/reviewer.md",
    "text": "/notes/x.md",
}


def front(yaml_text: str, body: str = "# Steps\n1. Do it.\n") -> str:
    return f"---\n{yaml_text}---\n{body}"


def deep_json(depth: int, kind: str = "[") -> str:
    if kind == "[":
        return "[" * depth + "]" * depth
    return '{"a": ' * depth + "1" + "}" * depth


def alias_bomb(levels: int = 8) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "name: notes\ndescription: *a" + str(levels) + "\n" + "\n".join(lines) + "\n"


DEEP_FRONTMATTER = {
    "flow-list": "name: notes\ndescription: x\nmetadata: " + "[" * 1000 + "]" * 1000 + "\n",
    "flow-map": "name: notes\ndescription: x\nmetadata: " + "{a: " * 1000 + "b" + "}" * 1000 + "\n",
    "block-seq": "name: notes\ndescription: x\nmetadata:\n  " + "- " * 1000 + "x\n",
    "block-map": "name: notes\ndescription: x\n" + "".join(" " * i + f"k{i}:\n" for i in range(100)),
}


# --- deep nesting: a problem, never a RecursionError --------------------------------


@pytest.mark.parametrize("shape", ["[", "{"])
def test_deep_tools_json_is_one_clear_problem(shape: str) -> None:
    problems = validate("/tools.json", deep_json(1000, shape))
    assert len(problems) == 1, problems
    p = problems[0]
    assert p.kind == "tools.json" and p.location.startswith("line 1, column ")
    assert f"deeper than {MAX_DEPTH}" in p.message and "flatten" in p.message.lower()
    assert "\n" not in str(p)


def test_tools_json_at_the_depth_limit_is_parsed_normally() -> None:
    # 64 levels is allowed (the schema then says what is wrong); 65 is not.
    ok = json.dumps({"mcp_servers": {}, "tools": [], "x": json.loads(deep_json(MAX_DEPTH - 1))})
    assert all("deeper" not in p.message for p in validate("/tools.json", ok))
    too = json.dumps({"mcp_servers": {}, "tools": [], "x": json.loads(deep_json(MAX_DEPTH))})
    assert any("deeper" in p.message for p in validate("/tools.json", too))


def test_brackets_inside_json_strings_do_not_count_as_nesting() -> None:
    doc = {"mcp_servers": {"s": {"command": "x", "args": ["[" * 500, "{" * 500, '\\"[[[' * 100]}}, "tools": []}
    assert validate("/tools.json", json.dumps(doc)) == []


def test_a_5000_digit_number_in_tools_json_is_a_problem() -> None:
    problems = validate("/tools.json", '{"mcp_servers": {}, "tools": [], "n": ' + "7" * 5000 + "}")
    assert [p.kind for p in problems] == ["tools.json"]
    assert "quotes" in problems[0].message


@pytest.mark.parametrize("path", ["/skills/notes.md", "/skills/notes/SKILL.md"])
@pytest.mark.parametrize("shape", sorted(DEEP_FRONTMATTER))
def test_deep_frontmatter_is_one_clear_problem(path: str, shape: str) -> None:
    problems = validate(path, front(DEEP_FRONTMATTER[shape]))
    deep = [p for p in problems if "deeper than" in p.message]
    assert len(deep) == 1, problems
    assert deep[0].location.startswith("line ") and "flatten" in deep[0].message.lower()
    assert "\n" not in str(deep[0])


@pytest.mark.parametrize("shape", sorted(DEEP_FRONTMATTER))
def test_deep_subagent_frontmatter_is_refused(shape: str) -> None:
    text = DEEP_FRONTMATTER[shape].replace("name: notes", "name: reviewer")
    assert any("deeper than" in p.message for p in validate("/subagents/reviewer.md", front(text, "Be brief.\n")))


def test_a_5000_digit_number_in_frontmatter_is_a_problem() -> None:
    problems = validate("/skills/notes.md", front(OK_SKILL + "license: " + "9" * 5000 + "\n"))
    assert any(p.kind == "skill" and "cannot be read" in p.message for p in problems), problems


# --- alias bombs and oversized frontmatter --------------------------------------------


def test_alias_bomb_is_refused_quickly_in_a_subprocess() -> None:
    # In a subprocess, so a regression that expands the bomb fails this test, not the run.
    code = (
        "import time; from memagent.validators import validate, read_frontmatter\n"
        "from tests.test_validators_total import alias_bomb, front\n"
        "t = time.perf_counter(); ps = validate('/skills/.md', front(alias_bomb()))\n"
        "fm = read_frontmatter(front(alias_bomb()))\n"
        "print(time.perf_counter() - t); print(fm.meta is None, fm.error)\n"
        "print('\\n'.join(str(p) for p in ps))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    seconds, meta_none, *problems = proc.stdout.splitlines()
    assert float(seconds) < 5, seconds  # generous; it takes milliseconds
    assert meta_none.startswith("True ") and "anchor or alias" in meta_none
    assert any("anchor or alias" in p for p in problems)


def test_frontmatter_block_size_is_bounded() -> None:
    problems = validate("/skills/notes.md", front("name: notes\ndescription: " + "d" * 200_000 + "\n"))
    assert len(problems) == 1, problems
    assert "frontmatter is" in problems[0].message and "8 KiB" in problems[0].message
    fm = read_frontmatter(front("name: notes\ndescription: " + "d" * 200_000 + "\n"))
    assert fm.meta is None and fm.error is not None and "8 KiB" in fm.error


@pytest.mark.parametrize(("path", "head"), [("/skills/notes.md", OK_SKILL), ("/subagents/reviewer.md", OK_SUB)])
def test_description_over_1024_characters_is_refused(path: str, head: str) -> None:
    text = head.split("description:")[0] + "description: " + "word " * 400 + "\n"
    problems = validate(path, front(text, "Be brief.\n"))
    assert any("description" in p.location and "1024" in p.message for p in problems), problems


# --- every file the prompt index can pick up is validated as what it is ----------------


@pytest.mark.parametrize("path", ["/skills/.md", "/subagents/.md", "/skills/.x/SKILL.md"])
def test_empty_or_hidden_stem_is_refused_by_the_name_rules(path: str) -> None:
    head = OK_SUB if "subagents" in path else OK_SKILL
    problems = validate(path, front(head, "Be brief.\n"))
    assert problems and problems[0].location == "file", problems
    assert "not valid" in problems[0].message
    # The advice names a valid place, taken from the frontmatter's own name.
    assert any(place in problems[0].message for place in ("/notes.md", "/reviewer.md", "/notes/SKILL.md"))


def test_alias_bomb_at_the_empty_stem_is_refused() -> None:
    assert any("anchor or alias" in p.message for p in validate("/skills/.md", front(alias_bomb())))


# --- the frontmatter reader --------------------------------------------------------------


def test_read_frontmatter_reads_values_and_body() -> None:
    fm = read_frontmatter("---\nname: notes\ndescription: Hi.\n---\n# Body\ntext\n")
    assert fm == Frontmatter({"name": "notes", "description": "Hi."}, "# Body\ntext\n", None)
    assert read_frontmatter("---  \r\nname: a\r\n---\r\nbody").body == "body"
    assert read_frontmatter("---\nname: a\n---").body == ""
    # The block ends at the first --- line; a later one belongs to the body.
    assert read_frontmatter("---\nname: a\n---\nx\n---\ny\n").body == "x\n---\ny\n"


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("# No block\n", "does not begin with yaml frontmatter"),
        ("\n---\nname: a\n---\n", "very first line"),
        ("---\nname: a\n", "never closed"),
        ("---\nname: a: b\n---\n", "line 2"),
        ("---\n- a\n- b\n---\n", "mapping"),
        ("---\na: &x 1\nb: *x\n---\n", "anchor or alias"),
        ("---\nm: " + "[" * 100 + "]" * 100 + "\n---\n", "deeper than 64"),
    ],
)
def test_read_frontmatter_says_why_there_are_no_values(content: str, words: str) -> None:
    fm = read_frontmatter(content)
    assert fm.meta is None and fm.error is not None
    assert words in fm.error.lower(), fm.error
    assert "\n" not in fm.error


def test_read_frontmatter_without_a_block_keeps_the_whole_content_as_body() -> None:
    assert read_frontmatter("just text\n").body == "just text\n"


def test_validators_and_reader_agree_on_every_sample() -> None:
    # One reader: a file the validator accepts has readable frontmatter with its name.
    for path, content in [
        ("/skills/notes.md", front(OK_SKILL)),
        ("/subagents/reviewer.md", front(OK_SUB + "tools: [read_file]\n", "Be brief.\n")),
    ]:
        assert validate(path, content) == []
        meta = read_frontmatter(content).meta
        assert meta is not None and meta["name"] in path


# --- names -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["notes", "a", "meeting-notes-2", "x" * 64])
def test_check_name_accepts_valid_names(name: str) -> None:
    assert check_name(name) is None


@pytest.mark.parametrize("name", ["", "../notes/evil", "Notes", "-a", "a--b", "x" * 65, "a b", "a\nb", "notes.md"])
def test_check_name_refuses_with_one_line(name: str) -> None:
    problem = check_name(name)
    assert problem is not None and "\n" not in problem and "not a valid name" in problem


# --- secrets in the path and in revision messages ---------------------------------------


def _github_token() -> str:
    rng = random.Random(5)
    return "gh" + "p_" + "".join(rng.choice(ALNUM) for _ in range(36))


def test_a_secret_in_the_path_is_reported_without_echo() -> None:
    token = _github_token()
    problems = validate(f"/notes/{token}.md", "harmless\n")
    assert [(p.location, p.kind) for p in problems] == [("path", "secret")]
    assert "GitHub token" in problems[0].message and token[4:12] not in problems[0].message


def test_scan_message_reports_the_message_line_without_echo() -> None:
    token = _github_token()
    problems = scan_message(f"Add deploy notes\n\nused {token} to test\n")
    assert [p.location for p in problems] == ["message line 3"]
    assert token[4:12] not in str(problems[0])
    assert scan_message("Add deploy notes; rotate the token monthly") == []


# --- the last-resort guard --------------------------------------------------------------


def test_an_exception_in_a_kind_validator_becomes_a_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(path: str, content: str) -> list[Problem]:
        raise RuntimeError("bug")

    monkeypatch.setattr(registry, "_kind_problems", boom)
    problems = validate("/skills/notes.md", front(OK_SKILL))
    assert [p.location for p in problems] == ["file"]
    assert "could not be checked" in problems[0].message and "RuntimeError" in problems[0].message


# --- property: every validator returns for any nesting and size ------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6),
    max_leaves=60,
)


@st.composite
def _nested_text(draw: Callable[..., object]) -> str:
    """JSON- or YAML-shaped text of any depth, built as text (json.dumps would recurse)."""
    depth = draw(st.integers(0, 3000))
    style = draw(st.sampled_from(["[", "{", "- ", "? ", "indent", "mixed", "unclosed"]))
    if style == "[":
        return "[" * depth + "1" + "]" * depth
    if style == "{":
        return '{"a": ' * depth + "1" + "}" * depth
    if style in ("- ", "? "):
        return style * depth + "x"
    if style == "indent":
        return "".join(" " * i + f"k{i}:\n" for i in range(min(depth, 200)))
    if style == "unclosed":
        return "[" * depth + '"' + "{" * depth
    rng = random.Random(depth)
    pieces = ["[", "{", "a: ", "- ", "]", "}", ", ", "\n  ", '"', "'", "&a ", "*a "]
    return "".join(rng.choice(pieces) for _ in range(depth))


def _documents() -> st.SearchStrategy[str]:
    return st.one_of(
        _JSON.map(json.dumps),
        _nested_text(),
        st.text(max_size=300),
        st.binary(max_size=200).map(lambda b: b.decode("utf-8", "surrogateescape")),
    )


def _check_total(path: str, content: str) -> None:
    start = time.perf_counter()
    problems = validate(path, content)
    assert isinstance(problems, list) and all(isinstance(p, Problem) for p in problems)
    assert time.perf_counter() - start < 10  # a loose bound against hangs, not a speed goal
    if path != "/tools.json" and kind_of(path) in ("skill", "subagent"):
        fm = read_frontmatter(content)
        assert (fm.meta is None) == (fm.error is not None)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(sorted(KIND_PATHS)), doc=_documents(), as_frontmatter=st.booleans())
def test_every_validator_returns_for_any_nesting_and_size(kind: str, doc: str, as_frontmatter: bool) -> None:
    path = KIND_PATHS[kind]
    content = front(doc if doc.endswith("\n") else doc + "\n") if as_frontmatter else doc
    _check_total(path, content)


@pytest.mark.parametrize("kind", sorted(KIND_PATHS))
@pytest.mark.parametrize("depth", [65, 1000, 50_000])
def test_every_validator_returns_for_very_deep_documents(kind: str, depth: int) -> None:
    for doc in (deep_json(depth), deep_json(depth, "{"), "- " * depth + "x"):
        _check_total(KIND_PATHS[kind], doc)
        _check_total(KIND_PATHS[kind], front(doc + "\n"))


def test_public_api_names() -> None:
    for name in ("read_frontmatter", "Frontmatter", "check_name", "scan_message", "scan_secrets", "validate"):
        assert name in validators.__all__


# --- the real command: exit 1, a summary and problem lines, no traceback, nothing stored ---


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("/tools.json", deep_json(1000)),
        ("/skills/notes.md", front(DEEP_FRONTMATTER["flow-list"])),
        ("/skills/notes.md", front(DEEP_FRONTMATTER["block-seq"])),
        ("/skills/.md", front(OK_SKILL)),
        ("/user/skills/.md", front(OK_SKILL)),
        ("/skills/notes.md", front(alias_bomb())),
    ],
    ids=["deep-tools-json", "deep-flow-frontmatter", "deep-block-frontmatter", "empty-stem", "user-empty-stem", "bomb"],
)
def test_fs_write_refuses_with_problem_lines_and_stores_nothing(path: str, content: str) -> None:
    assert run("init", "t").returncode == 0
    p = run("fs", "write", path, "-a", "t", stdin=content)
    assert p.returncode == 1, (p.returncode, err(p))
    text = err(p)
    assert "Traceback" not in text and "RecursionError" not in text
    lines = text.splitlines()
    assert lines[0].startswith("memagent: ") and " was not saved: " in lines[0], lines
    assert len(lines) >= 2 and all(line.startswith("- ") for line in lines[1:]), lines
    assert run("fs", "cat", path, "-a", "t").returncode == 1
