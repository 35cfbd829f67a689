"""Validators: every bad write is refused with where and how to fix; good files pass.

The table ``BAD`` holds one bad write per row: the memory path, the content, the
text the problem's location must contain (a line, a frontmatter key or a JSON
pointer), and words the message must contain so that it says how to fix it.
The same table is pushed through the real store to show nothing gets stored.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memagent.validators import Limits, Problem, format_problems, kind_of, validate
from memagent.vfs import SqlStore, open_store
from memagent.vfs.errors import NotFound, ValidationFailed

VALID_DIR = Path(__file__).parent / "fixtures" / "validators" / "valid"

# Every message must tell the writer what to do, not only what is wrong.
ACTION_WORDS = (
    "add",
    "remove",
    "write",
    "quote",
    "rename",
    "move",
    "use",
    "keep",
    "fix",
    "shorten",
    "declare",
    "give",
    "set",
    "split",
    "reword",
    "list",
    "flatten",
)


def _fake(prefix: str, alphabet: str, n: int, seed: int) -> str:
    """A credential-shaped string built at run time (nothing real-looking in the source)."""
    rng = random.Random(seed)
    return prefix + "".join(rng.choice(alphabet) for _ in range(n))


ALNUM = string.ascii_letters + string.digits
FAKE_AWS_ID = _fake("AK" + "IA", string.ascii_uppercase + string.digits, 16, 1)
FAKE_GITHUB = _fake("gh" + "p_", ALNUM, 36, 2)
FAKE_ANTHROPIC = _fake("sk-" + "ant-api03-", ALNUM + "_-", 93, 3) + "AA"


def skill(front: str, body: str = "# Steps\n1. Do it.\n") -> str:
    return f"---\n{front}---\n{body}"


def sub(front: str, body: str = "You are a reviewer.\n") -> str:
    return f"---\n{front}---\n{body}"


OK_FRONT = "name: notes\ndescription: Summarise notes. Use when the user pastes notes.\n"
SUB_FRONT = "name: reviewer\ndescription: Reviews drafts. Use before sending.\n"


def tools(servers: dict[str, object] | None = None, tool_list: list[object] | None = None, **extra: object) -> str:
    doc: dict[str, object] = {
        "mcp_servers": servers if servers is not None else {"s": {"command": "uvx"}},
        "tools": tool_list if tool_list is not None else [{"server": "s", "name": "t"}],
    }
    doc.update(extra)
    return json.dumps(doc, indent=2)


@dataclass(frozen=True)
class Bad:
    id: str
    path: str
    content: str
    location: str  # must appear in the problem's location
    words: tuple[str, ...]  # must all appear (case-insensitive) in the message
    kind: str


BAD: list[Bad] = [
    # --- skills ---------------------------------------------------------------
    Bad(
        "skill-no-frontmatter",
        "/skills/notes.md",
        "# Notes\njust text\n",
        "line 1",
        ("must begin with yaml frontmatter", "name: notes", "---"),
        "skill",
    ),
    Bad(
        "skill-blank-before-frontmatter",
        "/skills/notes.md",
        "\n" + skill(OK_FRONT),
        "line 1",
        ("very first line", "remove"),
        "skill",
    ),
    Bad(
        "skill-unclosed",
        "/skills/notes.md",
        "---\n" + OK_FRONT + "# Body\n",
        "line 1",
        ("never closed", "add a line"),
        "skill",
    ),
    Bad(
        "skill-unquoted-colon",
        "/skills/notes.md",
        skill("name: notes\ndescription: Use when: the user asks\n"),
        "line 3",
        ("invalid", "must be quoted"),
        "skill",
    ),
    Bad(
        "skill-tab",
        "/skills/notes.md",
        skill("name: notes\ndescription:\tSummarise\n"),
        "line 3",
        ("tab", "use spaces"),
        "skill",
    ),
    Bad(
        "skill-bad-indent",
        "/skills/notes.md",
        skill(OK_FRONT + "metadata:\n    a: b\n  c: d\n"),
        "line 6",
        ("invalid", "fix"),
        "skill",
    ),
    Bad(
        "skill-missing-name",
        "/skills/notes.md",
        skill("description: Summarise notes.\n"),
        "frontmatter key 'name'",
        ("missing", "add", "name: notes"),
        "skill",
    ),
    Bad(
        "skill-name-uppercase",
        "/skills/notes.md",
        skill(OK_FRONT.replace("notes\n", "Notes\n", 1)),
        "frontmatter key 'name' (line 2)",
        ("lowercase", "name: notes"),
        "skill",
    ),
    Bad(
        "skill-name-leading-hyphen",
        "/skills/notes.md",
        skill(OK_FRONT.replace("name: notes", "name: -notes")),
        "frontmatter key 'name'",
        ("starts or ends with a hyphen", "name: notes"),
        "skill",
    ),
    Bad(
        "skill-name-double-hyphen",
        "/skills/team-notes.md",
        skill(OK_FRONT.replace("name: notes", "name: team--notes")),
        "frontmatter key 'name'",
        ("two hyphens in a row", "name: team-notes"),
        "skill",
    ),
    Bad(
        "skill-name-too-long",
        "/skills/" + "a" * 65 + ".md",
        skill(OK_FRONT.replace("name: notes", "name: " + "a" * 65)),
        "file",
        ("65 characters", "write the file to /skills/" + "a" * 64 + ".md"),
        "skill",
    ),
    Bad(
        "skill-name-mismatch",
        "/skills/alpha.md",
        skill(OK_FRONT.replace("name: notes", "name: beta")),
        "frontmatter key 'name'",
        ("must be 'alpha'", "move the file to /skills/beta.md"),
        "skill",
    ),
    Bad(
        "skill-dir-name-mismatch",
        "/skills/alpha/SKILL.md",
        skill(OK_FRONT.replace("name: notes", "name: beta")),
        "frontmatter key 'name'",
        ("/skills/alpha/skill.md", "name: alpha"),
        "skill",
    ),
    Bad(
        "skill-name-number",
        "/skills/notes.md",
        skill(OK_FRONT.replace("name: notes", "name: 123")),
        "frontmatter key 'name'",
        ("must be text", "a number", "name: notes"),
        "skill",
    ),
    Bad(
        "skill-missing-description",
        "/skills/notes.md",
        skill("name: notes\n"),
        "frontmatter key 'description'",
        ("missing", "add `description:"),
        "skill",
    ),
    Bad(
        "skill-empty-description",
        "/skills/notes.md",
        skill('name: notes\ndescription: ""\n'),
        "frontmatter key 'description' (line 3)",
        ("empty", "write one or two sentences"),
        "skill",
    ),
    Bad(
        "skill-long-description",
        "/skills/notes.md",
        skill("name: notes\ndescription: " + "x" * 1025 + "\n"),
        "frontmatter key 'description'",
        ("1025 characters", "shorten"),
        "skill",
    ),
    Bad(
        "skill-description-list",
        "/skills/notes.md",
        skill("name: notes\ndescription:\n  - one\n"),
        "frontmatter key 'description'",
        ("must be text", "a list"),
        "skill",
    ),
    Bad(
        "skill-unknown-key",
        "/skills/notes.md",
        skill(OK_FRONT + "version: 2\n"),
        "frontmatter key 'version' (line 4)",
        ("not allowed", "allowed keys", "metadata"),
        "skill",
    ),
    Bad(
        "skill-metadata-not-mapping",
        "/skills/notes.md",
        skill(OK_FRONT + "metadata: hello\n"),
        "frontmatter key 'metadata'",
        ("mapping", "remove the key"),
        "skill",
    ),
    Bad(
        "skill-metadata-number",
        "/skills/notes.md",
        skill(OK_FRONT + "metadata:\n  version: 1.0\n"),
        "frontmatter key 'metadata.version'",
        ("a number", 'quote it, e.g. version: "1.0"'),
        "skill",
    ),
    Bad(
        "skill-flow-style",
        "/skills/notes.md",
        skill(OK_FRONT + "metadata: {a: b}\n"),
        "line 4",
        ("flow style", "block style"),
        "skill",
    ),
    Bad(
        "skill-allowed-tools-list",
        "/skills/notes.md",
        skill(OK_FRONT + "allowed-tools:\n  - read_file\n"),
        "frontmatter key 'allowed-tools'",
        ("a list", "allowed-tools: read_file grep"),
        "skill",
    ),
    Bad(
        "skill-license-empty",
        "/skills/notes.md",
        skill(OK_FRONT + "license:\n"),
        "frontmatter key 'license' (line 4)",
        ("empty", "license: mit"),
        "skill",
    ),
    Bad(
        "skill-compatibility-long",
        "/skills/notes.md",
        skill(OK_FRONT + "compatibility: " + "y" * 501 + "\n"),
        "frontmatter key 'compatibility'",
        ("501 characters", "shorten"),
        "skill",
    ),
    Bad(
        "skill-dashes-in-frontmatter",
        "/skills/notes.md",
        skill("name: notes\ndescription: Summarise notes --- fast.\n"),
        "line 3",
        ("'---'", "reword"),
        "skill",
    ),
    Bad(
        "skill-duplicate-key",
        "/skills/notes.md",
        skill("name: notes\n" + OK_FRONT),
        "line 3",
        ("given twice", "line 2", "keep one"),
        "skill",
    ),
    Bad(
        "skill-alias",
        "/skills/notes.md",
        skill("name: &n notes\ndescription: *n\n"),
        "line 2",
        ("anchor or alias", "write"),
        "skill",
    ),
    Bad(
        "skill-explicit-tag",
        "/skills/notes.md",
        skill("name: !!str notes\ndescription: Summarise notes.\n"),
        "line 2",
        ("tag", "remove"),
        "skill",
    ),
    Bad(
        "skill-frontmatter-list",
        "/skills/notes.md",
        skill("- notes\n- more\n"),
        "line 2",
        ("yaml mapping", "key: value"),
        "skill",
    ),
    Bad(
        "skill-invalid-file-name",
        "/skills/My Notes.md",
        skill(OK_FRONT.replace("name: notes", "name: my-notes")),
        "file",
        ("not valid", "/skills/my-notes.md"),
        "skill",
    ),
    Bad(
        "skill-miscased-main-file",
        "/skills/notes/skill.md",
        skill(OK_FRONT),
        "file",
        ("skill.md in capitals", "/skills/notes/skill.md"),
        "skill",
    ),
    # --- subagents ------------------------------------------------------------
    Bad(
        "subagent-no-frontmatter",
        "/subagents/reviewer.md",
        "You review drafts.\n",
        "line 1",
        ("must begin with yaml frontmatter", "name: reviewer"),
        "subagent",
    ),
    Bad(
        "subagent-missing-description",
        "/subagents/reviewer.md",
        sub("name: reviewer\n"),
        "frontmatter key 'description'",
        ("missing", "add"),
        "subagent",
    ),
    Bad(
        "subagent-tools-string",
        "/subagents/reviewer.md",
        sub(SUB_FRONT + "tools: Read, Grep\n"),
        "frontmatter key 'tools' (line 4)",
        ("yaml list", "tools: [read_file, grep]"),
        "subagent",
    ),
    Bad(
        "subagent-tools-item-number",
        "/subagents/reviewer.md",
        sub(SUB_FRONT + "tools:\n  - read_file\n  - 7\n"),
        "frontmatter key 'tools' item 2",
        ("tool name",),
        "subagent",
    ),
    Bad(
        "subagent-tools-duplicate",
        "/subagents/reviewer.md",
        sub(SUB_FRONT + "tools: [grep, grep]\n"),
        "frontmatter key 'tools' item 2",
        ("list each tool once",),
        "subagent",
    ),
    Bad(
        "subagent-unknown-key",
        "/subagents/reviewer.md",
        sub(SUB_FRONT + "color: blue\n"),
        "frontmatter key 'color' (line 4)",
        ("name, description, tools, model", "remove"),
        "subagent",
    ),
    Bad(
        "subagent-empty-body",
        "/subagents/reviewer.md",
        sub(SUB_FRONT, "\n   \n"),
        "line 5",
        ("empty", "system prompt"),
        "subagent",
    ),
    Bad(
        "subagent-model-number",
        "/subagents/reviewer.md",
        sub(SUB_FRONT + "model: 5\n"),
        "frontmatter key 'model'",
        ("non-empty text", "model: claude"),
        "subagent",
    ),
    Bad(
        "subagent-name-mismatch",
        "/subagents/reviewer.md",
        sub(SUB_FRONT.replace("name: reviewer", "name: editor")),
        "frontmatter key 'name'",
        ("must be 'reviewer'", "/subagents/editor.md"),
        "subagent",
    ),
    # --- tools.json -----------------------------------------------------------
    Bad(
        "tools-trailing-comma",
        "/tools.json",
        '{\n  "mcp_servers": {},\n  "tools": [],\n}\n',
        "line 4, column 1",
        ("not valid json", "no comma"),
        "tools.json",
    ),
    Bad(
        "tools-comment",
        "/tools.json",
        '{\n  // servers\n  "mcp_servers": {}\n}\n',
        "line 2, column 3",
        ("not valid json", "double quotes"),
        "tools.json",
    ),
    Bad("tools-empty", "/tools.json", "  \n", "file", ("is empty", '"tools": []'), "tools.json"),
    Bad("tools-top-level-list", "/tools.json", "[]", "/", ("must be an object",), "tools.json"),
    Bad(
        "tools-missing-tools",
        "/tools.json",
        '{"mcp_servers": {}}',
        "/",
        ("required key 'tools'", 'add "tools": []'),
        "tools.json",
    ),
    Bad(
        "tools-unknown-top-key",
        "/tools.json",
        tools(servers_extra=1),
        "/servers_extra",
        ("not an allowed key", "mcp_servers, tools"),
        "tools.json",
    ),
    Bad(
        "tools-undeclared-server",
        "/tools.json",
        tools(tool_list=[{"server": "s", "name": "a"}, {"server": "nope", "name": "b"}]),
        "/tools/1/server",
        ("'nope'", "not declared", "declared: 's'"),
        "tools.json",
    ),
    Bad(
        "tools-duplicate-name",
        "/tools.json",
        tools(
            {"s": {"command": "x"}, "r": {"type": "http", "url": "https://r.example/mcp"}},
            [
                {"server": "s", "name": "find"},
                {"server": "s", "name": "other"},
                {"server": "r", "name": "find"},
            ],
        ),
        "/tools/2/name",
        ("unique", "/tools/0", "remove one entry"),
        "tools.json",
    ),
    Bad(
        "tools-stdio-no-command",
        "/tools.json",
        tools({"s": {"args": ["x"]}}),
        "/mcp_servers/s",
        ('add "command"',),
        "tools.json",
    ),
    Bad(
        "tools-stdio-with-url",
        "/tools.json",
        tools({"s": {"command": "x", "url": "https://e.example/mcp"}}),
        "/mcp_servers/s/url",
        ("stdio server", "remove it"),
        "tools.json",
    ),
    Bad(
        "tools-http-no-url",
        "/tools.json",
        tools({"s": {"type": "http"}}),
        "/mcp_servers/s",
        ('add "url"',),
        "tools.json",
    ),
    Bad(
        "tools-http-with-command",
        "/tools.json",
        tools({"s": {"type": "sse", "url": "https://e.example/sse", "command": "x"}}),
        "/mcp_servers/s/command",
        ("remote (sse) server", "remove it"),
        "tools.json",
    ),
    Bad(
        "tools-bad-type",
        "/tools.json",
        tools({"s": {"type": "websocket", "url": "wss://x"}}),
        "/mcp_servers/s/type",
        ("one of", '"http"'),
        "tools.json",
    ),
    Bad(
        "tools-env-literal",
        "/tools.json",
        tools({"s": {"command": "x", "env": {"API_KEY": "hunter2"}}}),
        "/mcp_servers/s/env/API_KEY",
        ("secrets never live in memory", "${var}", "environment"),
        "tools.json",
    ),
    Bad(
        "tools-header-literal",
        "/tools.json",
        tools(
            {
                "s": {
                    "type": "http",
                    "url": "https://e.example/mcp",
                    "headers": {"Authorization": "Bearer abc"},
                }
            }
        ),
        "/mcp_servers/s/headers/Authorization",
        ("literal value", "${var}"),
        "tools.json",
    ),
    Bad(
        "tools-env-malformed-ref",
        "/tools.json",
        tools({"s": {"command": "x", "env": {"API_KEY": "$API_KEY"}}}),
        "/mcp_servers/s/env/API_KEY",
        ("malformed", "${name}"),
        "tools.json",
    ),
    Bad(
        "tools-env-secret-default",
        "/tools.json",
        tools({"s": {"command": "x", "env": {"K": "${K:-" + _fake("Ab3", ALNUM, 30, 9) + "}"}}}),
        "/mcp_servers/s/env/K",
        ("credential", "${var}"),
        "tools.json",
    ),
    Bad(
        "tools-approval-string",
        "/tools.json",
        tools(tool_list=[{"server": "s", "name": "t", "approval": "yes"}]),
        "/tools/0/approval",
        ("true or false",),
        "tools.json",
    ),
    Bad(
        "tools-tool-missing-name",
        "/tools.json",
        tools(tool_list=[{"server": "s"}]),
        "/tools/0",
        ("required key 'name'", "add"),
        "tools.json",
    ),
    Bad(
        "tools-tool-extra-key",
        "/tools.json",
        tools(tool_list=[{"server": "s", "name": "t", "descr": "x"}]),
        "/tools/0/descr",
        ("not an allowed key", "server, name, approval"),
        "tools.json",
    ),
    Bad(
        "tools-url-not-http",
        "/tools.json",
        tools({"s": {"type": "http", "url": "ftp://x/y"}}),
        "/mcp_servers/s/url",
        ("https://",),
        "tools.json",
    ),
    Bad(
        "tools-url-password",
        "/tools.json",
        tools({"s": {"type": "http", "url": "https://bob:pa55w0rd@e.example/mcp"}}),
        "/mcp_servers/s/url",
        ("password", "headers"),
        "tools.json",
    ),
    Bad(
        "tools-url-token-query",
        "/tools.json",
        tools({"s": {"type": "http", "url": "https://e.example/mcp?api_key=abc123"}}),
        "/mcp_servers/s/url",
        ("query parameter", "${var}"),
        "tools.json",
    ),
    Bad(
        "tools-duplicate-json-key",
        "/tools.json",
        '{"mcp_servers": {"s": {"command": "a"}, "s": {"command": "b"}}, "tools": []}',
        "/mcp_servers/s",
        ("more than once", "keep a single entry"),
        "tools.json",
    ),
    Bad(
        "tools-env-number",
        "/tools.json",
        tools({"s": {"command": "x", "env": {"PORT": 80}}}),
        "/mcp_servers/s/env/PORT",
        ("must be a string",),
        "tools.json",
    ),
    Bad(
        "tools-bad-server-name",
        "/tools.json",
        tools({"my server": {"command": "x"}}, []),
        "/mcp_servers/my server",
        ("not a valid name", "rename"),
        "tools.json",
    ),
    Bad(
        "tools-args-not-list",
        "/tools.json",
        tools({"s": {"command": "x", "args": "--fast"}}),
        "/mcp_servers/s/args",
        ("must be a list",),
        "tools.json",
    ),
    Bad(
        "tools-bad-tool-name",
        "/tools.json",
        tools(tool_list=[{"server": "s", "name": "web search"}]),
        "/tools/0/name",
        ("not a valid tool name", "use the name"),
        "tools.json",
    ),
    # --- AGENTS.md and other text ----------------------------------------------
    Bad(
        "agents-md-too-big",
        "/AGENTS.md",
        "- rule\n" * 5000,
        "file",
        ("32768 bytes", "32 kib", "/skills/"),
        "AGENTS.md",
    ),
    Bad(
        "agents-md-nul",
        "/AGENTS.md",
        "# Rules\nbad\x00byte\n",
        "line 2",
        ("nul", "remove"),
        "AGENTS.md",
    ),
    Bad("text-nul", "/knowledge/a.md", "one\ntwo\nthr\x00ee\n", "line 3", ("nul", "remove"), "text"),
    Bad(
        "text-too-big",
        "/knowledge/big.md",
        "z" * (1024 * 1024 + 1),
        "file",
        ("1 mib", "split"),
        "text",
    ),
    Bad(
        "text-surrogate",
        "/people/ana.md",
        "Ana\nbad \udcff here\n",
        "line 2",
        ("utf-8", "remove"),
        "text",
    ),
    # --- secrets, on every kind ---------------------------------------------------
    Bad(
        "secret-in-knowledge",
        "/knowledge/aws.md",
        f"# AWS\nkey: {FAKE_AWS_ID}\n",
        "line 2",
        ("an aws access key id", "environment variable"),
        "secret",
    ),
    Bad(
        "secret-in-skill-body",
        "/skills/notes.md",
        skill(OK_FRONT, f"# Steps\nUse token {FAKE_GITHUB} to push.\n"),
        "line 6",
        ("a github token", "remove it"),
        "secret",
    ),
    Bad(
        "secret-in-tools-args",
        "/tools.json",
        tools({"s": {"command": "x", "args": ["--key", FAKE_ANTHROPIC]}}),
        "line 7",
        ("an anthropic api key",),
        "secret",
    ),
    Bad(
        "secret-in-agents-md",
        "/AGENTS.md",
        f"Rules\n\nMy key is {FAKE_ANTHROPIC}\n",
        "line 3",
        ("an anthropic api key",),
        "secret",
    ),
]


def test_table_is_big_and_covers_every_kind() -> None:
    assert len(BAD) >= 40
    assert {b.kind for b in BAD} == {
        "skill",
        "subagent",
        "tools.json",
        "AGENTS.md",
        "text",
        "secret",
    }
    assert len({b.id for b in BAD}) == len(BAD)


def _matching(case: Bad, problems: list[Problem]) -> list[Problem]:
    return [
        p
        for p in problems
        if p.kind == case.kind
        and case.location in p.location
        and all(w.lower() in p.message.lower() for w in case.words)
    ]


@pytest.mark.parametrize("case", BAD, ids=[b.id for b in BAD])
def test_bad_input_is_refused_with_location_and_fix(case: Bad) -> None:
    problems = validate(case.path, case.content)
    assert problems, "expected the write to be refused"
    shown = "\n".join(f"{p.kind} | {p}" for p in problems)
    assert _matching(case, problems), f"no problem matched {case.location!r} {case.words}:\n{shown}"
    for p in problems:
        assert any(w in p.message.lower() for w in ACTION_WORDS), f"not actionable: {p}"


# --- valid files -------------------------------------------------------------------

VALID_FILES = sorted(p for p in VALID_DIR.rglob("*") if p.is_file())


@pytest.mark.parametrize("file", VALID_FILES, ids=[p.name for p in VALID_FILES])
def test_valid_fixture_passes(file: Path) -> None:
    path = "/" + file.relative_to(VALID_DIR).as_posix()
    assert validate(path, file.read_text(encoding="utf-8")) == []


def test_valid_fixtures_cover_every_kind() -> None:
    kinds = {kind_of("/" + p.relative_to(VALID_DIR).as_posix()) for p in VALID_FILES}
    assert kinds == {"AGENTS.md", "skill", "subagent", "tools.json", "text"}


@pytest.mark.parametrize(
    "content",
    [
        skill(OK_FRONT, ""),  # a skill body may be empty; only subagents need one
        skill(OK_FRONT.replace("\n", "\r\n")).replace("\n", "\r\n"),  # Windows line endings
        skill("name: notes\ndescription: 'Summarise: notes, fast.'\n"),
        skill('name: notes  # the stem\ndescription: "Use when: notes arrive"\n'),
        skill(OK_FRONT + "metadata:\n  released: '2025-01-01'\n  empty: ''\n"),
        skill("name: notes\ndescription: |\n  Line one.\n  Line two.\n"),
    ],
)
def test_valid_skill_variants(content: str) -> None:
    assert validate("/skills/notes.md", content) == []


def test_supporting_file_beside_skill_is_plain_text() -> None:
    assert validate("/skills/notes/reference.md", "no frontmatter needed\n") == []
    assert kind_of("/skills/notes/reference.md") == "text"
    assert kind_of("/skills/notes/SKILL.md") == "skill"


def test_empty_knowledge_file_and_agents_md_are_valid() -> None:
    assert validate("/knowledge/empty.md", "") == []
    assert validate("/AGENTS.md", "") == []


# --- several problems at once ------------------------------------------------------


def test_three_faults_in_a_skill_give_three_problems() -> None:
    content = skill("name: Report\nversion: 2\n")  # bad name, unknown key, no description
    problems = validate("/skills/report.md", content)
    assert len(problems) == 3, problems
    locations = [p.location for p in problems]
    assert any("'name'" in loc for loc in locations)
    assert any("'version'" in loc for loc in locations)
    assert any("'description'" in loc for loc in locations)


def test_three_faults_in_tools_json_give_three_problems() -> None:
    content = tools(
        {"s": {"command": "x", "env": {"TOKEN": "plain"}}},
        [
            {"server": "s", "name": "a"},
            {"server": "ghost", "name": "b"},
            {"server": "s", "name": "a"},
        ],
    )
    problems = validate("/tools.json", content)
    assert sorted(p.location for p in problems) == [
        "/mcp_servers/s/env/TOKEN",
        "/tools/1/server",
        "/tools/2/name",
    ]


def test_problems_of_different_validators_are_combined() -> None:
    content = skill("name: notes\n", f"\x00 {FAKE_AWS_ID}\n")
    kinds = [p.kind for p in validate("/skills/notes.md", content)]
    assert kinds == ["text", "skill", "secret"]


def test_nul_is_reported_once_not_again_as_a_parse_error() -> None:
    problems = validate("/tools.json", tools().replace('"uvx"', '"uv\x00x"'))
    assert [p.kind for p in problems] == ["text"]


# --- limits, formatting, registry ------------------------------------------------------


def test_limits_are_configurable_and_measured_in_utf8_bytes() -> None:
    limits = Limits(agents_md_bytes=10, file_bytes=20)
    assert validate("/AGENTS.md", "é" * 5, limits) == []  # 10 bytes
    assert validate("/AGENTS.md", "é" * 6, limits)[0].location == "file"  # 12 bytes
    assert validate("/knowledge/x.md", "€" * 6, limits) == []  # 18 bytes
    big = validate("/knowledge/x.md", "€" * 7, limits)
    assert "21 bytes" in big[0].message and "20 bytes" in big[0].message


def test_far_oversized_content_is_only_reported_as_too_large() -> None:
    problems = validate("/skills/notes.md", "no frontmatter " * 100, Limits(file_bytes=100))
    assert [p.location for p in problems] == ["file"]


def test_format_problems_has_summary_then_one_line_each() -> None:
    problems = validate("/tools.json", tools(tool_list=[{"server": "x", "name": "a"}, {"server": "y", "name": "b"}]))
    text = format_problems("/tools.json", problems)
    lines = text.splitlines()
    assert lines[0] == "/tools.json was not saved: 2 problems."
    assert lines[1].startswith("- /tools/0/server: names the server 'x'")
    assert lines[2].startswith("- /tools/1/server: ")
    one = format_problems("/a.md", [Problem("line 1", "remove it.", "text")])
    assert one == "/a.md was not saved: 1 problem.\n- line 1: remove it."


def test_problem_str_and_immutability() -> None:
    p = Problem("line 3", "add a name.", "skill")
    assert str(p) == "line 3: add a name."
    with pytest.raises(AttributeError):
        p.location = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/AGENTS.md", "AGENTS.md"),
        ("/tools.json", "tools.json"),
        ("/skills/a.md", "skill"),
        ("/skills/a/SKILL.md", "skill"),
        ("/skills/a/b/SKILL.md", "text"),
        ("/skills/a/notes.md", "text"),
        ("/subagents/r.md", "subagent"),
        ("/subagents/r/notes.md", "text"),
        ("/knowledge/AGENTS.md", "text"),
        ("/docs/tools.json", "text"),
        ("/people/ana.md", "text"),
        # Whatever the prompt index's globs (skills/*.md, skills/*/SKILL.md, subagents/*.md)
        # pick up is validated as that kind, empty and hidden stems too (issue 9).
        ("/skills/.md", "skill"),
        ("/skills/.hidden.md", "skill"),
        ("/skills/Bad Name.md", "skill"),
        ("/skills/.x/SKILL.md", "skill"),
        ("/subagents/.md", "subagent"),
    ],
)
def test_kind_of_path(path: str, kind: str) -> None:
    assert kind_of(path) == kind


# --- no write path skips validation: the store refuses every bad input -----------------


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlStore]:
    # One store for the whole table: every write is refused, so it stays empty.
    store = open_store("sqlite:///" + str(tmp_path_factory.mktemp("db") / "m.db"))
    store.create_agent("a")
    yield store
    store.close()


@pytest.mark.parametrize("case", BAD, ids=[b.id for b in BAD])
def test_store_refuses_bad_input_and_stores_nothing(case: Bad, sqlite_store: SqlStore) -> None:
    with pytest.raises(ValidationFailed) as info:
        sqlite_store.write("agent:a", case.path, case.content, author="cli", approval="cli")
    assert _matching(case, info.value.problems)
    assert str(info.value).splitlines()[0].startswith(f"{case.path} was not saved: ")
    assert not sqlite_store.exists("agent:a", case.path)
    with pytest.raises(NotFound):
        sqlite_store.read("agent:a", case.path)
    assert sqlite_store.all_files("agent:a") == []
