"""Export/import formats: lossless round trips, each target's documented shape, wild skills.

In-process tests of ``memagent.agent.formats`` (the CLI is exercised end to end in
``test_export_import_cli.py``). Generated agents cover skills in both layouts,
subagents, tools.json with stdio and remote servers and approval tools, and
knowledge files, in our canonical formatting and in hand-written variants.
"""

from __future__ import annotations

import json
import re
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import pytest
import skills_ref
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memagent.agent.cli import templates
from memagent.agent.formats import FORMATS, MANIFEST, ExportOptions, detect, export_agent, import_tree
from memagent.agent.formats.frontmatter import MARKER, export_skill, import_skill, scalar
from memagent.agent.formats.manifest import lost
from memagent.validators import read_frontmatter, validate
from memagent.vfs import SqlStore

NAMES = st.from_regex(r"[a-z]{1,8}(-[a-z0-9]{1,5})?", fullmatch=True)
WORDS = st.text(alphabet=st.sampled_from(list("abcdefghij klmnop,.()'XYZ0123é☕")), min_size=1, max_size=60).map(
    lambda s: s.strip() or "text")
BODY = st.text(alphabet=st.sampled_from(list("abc xyz\n#-*`@:{}[]\"'1\té")), max_size=200)
VAR = st.from_regex(r"[A-Z][A-Z0-9_]{0,10}", fullmatch=True)
FILE_TOOLS = ["ls", "read_file", "write_file", "edit_file", "delete_file", "glob", "grep"]


def skill_text(draw: st.DrawFn, name: str) -> str:
    lines = [f"name: {name}", f"description: {json.dumps(draw(WORDS), ensure_ascii=False)}"]
    if draw(st.booleans()):
        lines.append("license: MIT")
    if draw(st.booleans()):
        lines.append(f"metadata:\n  author: {json.dumps(draw(WORDS), ensure_ascii=False)}\n  version: \"1.0\"")
    return "---\n" + "\n".join(lines) + "\n---\n" + draw(BODY)


def subagent_text(draw: st.DrawFn, name: str, mcp_tools: list[str], canonical: bool) -> str:
    words = draw(WORDS)
    lines = [f"name: {name}", f"description: {scalar(words) if canonical else json.dumps(words, ensure_ascii=False)}"]
    tools = draw(st.none() | st.lists(st.sampled_from(FILE_TOOLS + mcp_tools), unique=True, max_size=4))
    if canonical and tools is not None:
        tools = [t for t in tools if t != "delete_file"] or None
        if tools is not None and sorted(tools) == sorted(["ls", "read_file", "glob", "grep"]):
            tools = None
    if tools is not None:
        if canonical or draw(st.booleans()):
            lines.append(f"tools: [{', '.join(tools)}]")
        else:
            lines.append("tools:\n" + "".join(f"  - {t}\n" for t in tools).rstrip("\n"))
    if draw(st.booleans()):
        lines.append("model: claude-sonnet-4-5")
    body = draw(BODY).strip() or "You help."
    return "---\n" + "\n".join(lines) + "\n---\n" + body + "\n"


def tools_json(draw: st.DrawFn, canonical: bool) -> tuple[str, list[str]]:
    servers: dict[str, Any] = {}
    tools: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 3))):
        name = f"s{i}"
        if draw(st.booleans()):
            entry: dict[str, Any] = {"command": "uvx", "args": [f"server-{i}"]}
            if draw(st.booleans()):
                var = draw(VAR)
                entry["env"] = {var: f"${{{var}}}" if canonical or draw(st.booleans()) else f"${{{var}:-x}}"}
        else:
            entry = {"type": draw(st.sampled_from(["http", "sse"])), "url": f"https://example.com/{i}/mcp"}
            if draw(st.booleans()):
                entry["headers"] = {"Authorization": f"Bearer ${{{draw(VAR)}}}"}
        servers[name] = entry
        for j in range(draw(st.integers(0, 2))):
            tool: dict[str, Any] = {"server": name, "name": f"tool_{i}_{j}"}
            if draw(st.booleans()):
                tool["approval"] = True
            tools.append(tool)
    doc = {"mcp_servers": servers, "tools": tools}
    text = json.dumps(doc, indent=2) + "\n" if canonical or draw(st.booleans()) else json.dumps(doc)
    return text, [f"mcp__{t['server']}__{t['name']}" for t in tools]


@st.composite
def agents(draw: st.DrawFn, canonical: bool = False) -> dict[str, str]:
    memory = {"/AGENTS.md": draw(BODY)}
    mcp_tools: list[str] = []
    if draw(st.booleans()):
        memory["/tools.json"], mcp_tools = tools_json(draw, canonical)
    for name in draw(st.lists(NAMES, unique=True, max_size=3)):
        if not canonical and draw(st.booleans()):
            memory[f"/skills/{name}.md"] = skill_text(draw, name)
        else:
            memory[f"/skills/{name}/SKILL.md"] = skill_text(draw, name)
            if draw(st.booleans()):
                memory[f"/skills/{name}/reference.md"] = draw(BODY)
    for name in draw(st.lists(NAMES, unique=True, max_size=2)):
        memory[f"/subagents/{name}.md"] = subagent_text(draw, name, mcp_tools, canonical)
    for name in draw(st.lists(NAMES, unique=True, max_size=2)):
        memory[f"/knowledge/{name}.md"] = draw(BODY)
    for path, content in memory.items():
        assume(not validate(path, content))
    return memory


def diff(a: dict[str, str], b: dict[str, str]) -> list[str]:
    return [p for p in sorted(set(a) | set(b)) if a.get(p) != b.get(p)]


@pytest.mark.parametrize("name", list(FORMATS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(memory=agents())
def test_export_then_import_gives_the_same_files(name: str, memory: dict[str, str]) -> None:
    fmt = FORMATS[name]
    exported = export_agent(fmt, memory, ExportOptions(agent="demo"))
    back = import_tree(fmt, exported.files)
    assert diff(memory, back.files) == []
    # Auto-detection finds the layout (or one that reads it the same, e.g. an agent
    # of only AGENTS.md looks alike in every format).
    assert diff(memory, import_tree(detect(exported.files), exported.files).files) == []


@pytest.mark.parametrize("name", ["folder", "claude-code"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(memory=agents(canonical=True))
def test_canonical_agents_need_no_manifest(name: str, memory: dict[str, str]) -> None:
    # The translation itself is lossless for agents in our canonical shape: the
    # manifest is only for what a layout cannot say.
    exported = export_agent(FORMATS[name], memory, ExportOptions())
    expected = claude_code_losses(memory) if name == "claude-code" else set()
    kept = set(lost(exported.files[MANIFEST])) if MANIFEST in exported.files else set()
    assert kept == expected
    back = FORMATS[name].import_(exported.files).files
    assert [p for p in diff(memory, back) if p not in expected] == []


def claude_code_losses(memory: dict[str, str]) -> set[str]:
    """What Claude Code's layout cannot say of a canonical agent: a subagent's ls, glob or
    grep (Claude Code 2.1 has no such tool; none listed means those four), and where an
    approval tool sits among the others in tools.json (its allow and ask lists are two)."""
    losses: set[str] = set()
    for path, content in memory.items():
        if path.startswith("/subagents/"):
            tools = (read_frontmatter(content).meta or {}).get("tools")
            if tools is None or {"ls", "glob", "grep"} & set(tools):
                losses.add(path)
    if "/tools.json" in memory:
        approval = [bool(t.get("approval")) for t in json.loads(memory["/tools.json"]).get("tools", [])]
        if approval != sorted(approval):
            losses.add("/tools.json")
    return losses


@pytest.mark.parametrize("name", ["opencode", "deepagents", "codex"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(memory=agents(canonical=True))
def test_without_the_manifest_the_rest_still_arrives(name: str, memory: dict[str, str]) -> None:
    fmt = FORMATS[name]
    exported = export_agent(fmt, memory, ExportOptions())
    plain = {p: d for p, d in exported.files.items() if p != MANIFEST}
    back = fmt.import_(plain).files
    # AGENTS.md, skills and knowledge files always arrive unchanged.
    for path, content in memory.items():
        if path == "/AGENTS.md" or path.startswith(("/skills/", "/knowledge/")):
            assert back.get(path) == content, path
    # What a layout cannot hold is named in the export's notes.
    if diff(memory, back):
        assert exported.notes


@pytest.mark.parametrize("name", list(FORMATS))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(memory=agents())
def test_exported_skills_pass_the_reference_validator(name: str, memory: dict[str, str]) -> None:
    exported = export_agent(FORMATS[name], memory, ExportOptions())
    skill_files = [p for p in exported.files if p.endswith("/SKILL.md")]
    with tempfile.TemporaryDirectory() as tmp:
        for path in skill_files:
            folder = Path(tmp) / path.rsplit("/", 1)[0]
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "SKILL.md").write_bytes(exported.files[path])
            assert skills_ref.validate(folder) == [], path


# -- skills from the wild ------------------------------------------------------------

WILD_VALUES = st.sampled_from(["1.2", "1.0.0", "true", "2025-01-01", '"[file]"', "'quoted'", "[a, b]",
                               "Use when: the user asks", '"Use when: asked"', "42", "{k: v}", "~"])


@st.composite
def wild_skills(draw: st.DrawFn) -> tuple[str, str]:
    name = draw(NAMES)
    lines = []
    keys = draw(st.permutations(["name", "description", "version", "when_to_use", "argument-hint",
                                 "user-invocable", "allowed-tools"]))
    for key in keys[: draw(st.integers(3, 7))]:
        if key == "name":
            lines.append(f"name: {name}")
        elif key == "description":
            lines.append(f"description: {json.dumps(draw(WORDS), ensure_ascii=False)}")
        elif key == "allowed-tools":
            lines.append(draw(st.sampled_from(["allowed-tools: Read Grep", "allowed-tools: [Read, Bash]",
                                               "allowed-tools:\n  - Read\n  - Grep"])))
        else:
            value = draw(WILD_VALUES)
            try:
                yaml.safe_load(f"k: {value}")
            except yaml.YAMLError:
                value = json.dumps(value)
            lines.append(f"{key}: {value}")
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    content = "---" + newline + newline.join("\n".join(lines).split("\n")) + newline + "---" + newline + \
        draw(BODY).replace("\n", newline)
    return name, content


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=wild_skills())
def test_wild_skill_imports_valid_and_exports_spec_valid(case: tuple[str, str]) -> None:
    name, original = case
    if read_frontmatter(original).meta is None:
        return  # YAML we cannot read stays as it is, and the validator says why
    stored, _ = import_skill(name, original, "x")
    assert validate(f"/skills/{name}/SKILL.md", stored) == [], stored
    meta = read_frontmatter(stored).meta or {}
    extra = {k for k in (read_frontmatter(original).meta or {}) if k not in
             ("name", "description", "license", "compatibility", "allowed-tools", "metadata")}
    assert extra <= set(meta.get("metadata", {}))
    assert all(isinstance(v, str) for v in meta.get("metadata", {}).values())
    # The original bytes are kept in memory; the export is spec-valid with the extras under
    # metadata and no marker.
    if stored != original:
        assert meta["metadata"][MARKER] + read_frontmatter(stored).body == original
    out = export_skill(stored)
    out_meta = read_frontmatter(out).meta or {}
    assert set(out_meta) <= {"name", "description", "license", "compatibility", "allowed-tools", "metadata"}
    assert MARKER not in out_meta.get("metadata", {})
    assert extra <= set(out_meta.get("metadata", {}))
    assert skills_ref.validator.validate_metadata(out_meta, None) == [], out


WILD_CLAUDE_SKILL = ("---\nname: pdf-forms\ndescription: Fill PDF forms.\nversion: 1.2\nwhen_to_use: When a form "
                     "arrives\nargument-hint: \"[file]\"\n---\n# Steps\n")


@pytest.mark.parametrize(("name", "skills_dir"), [("claude-code", ".claude/skills"), ("opencode", ".opencode/skills"),
                                                  ("codex", ".agents/skills"), ("deepagents", "skills")])
def test_wild_skill_round_trips_through_each_format(name: str, skills_dir: str, tmp_path: Path) -> None:
    # Issue 28, finding 3: the keys outside the spec stay under metadata in every format
    # (skills-ref accepts the export), and the import of the export gives memory back.
    fmt = FORMATS[name]
    tree = {f"{skills_dir}/pdf-forms/SKILL.md": WILD_CLAUDE_SKILL.encode(), "AGENTS.md": b"x\n"}
    imported = fmt.import_(tree)
    stored = imported.files["/skills/pdf-forms/SKILL.md"]
    meta = read_frontmatter(stored).meta or {}
    assert meta["metadata"]["version"] == "1.2"
    assert meta["metadata"]["when_to_use"] == "When a form arrives"
    assert meta["metadata"]["argument-hint"] == "[file]"
    assert MARKER in meta["metadata"]
    exported = export_agent(fmt, imported.files, ExportOptions())
    folder = tmp_path / "pdf-forms"
    folder.mkdir()
    (folder / "SKILL.md").write_bytes(exported.files[f"{skills_dir}/pdf-forms/SKILL.md"])
    assert skills_ref.validate(folder) == []
    out_meta = read_frontmatter(exported.files[f"{skills_dir}/pdf-forms/SKILL.md"].decode()).meta or {}
    assert out_meta["metadata"] == {"version": "1.2", "when_to_use": "When a form arrives", "argument-hint": "[file]"}
    assert import_tree(fmt, exported.files).files["/skills/pdf-forms/SKILL.md"] == stored


def test_an_edited_wild_skill_exports_spec_valid_without_the_marker() -> None:
    original = "---\nname: a\ndescription: d\nversion: 1.2\n---\nbody\n"
    stored, _ = import_skill("a", original, "x")
    edited = stored.replace("description: d\nmetadata", "description: better\nmetadata")
    out = export_skill(edited)
    meta = read_frontmatter(out).meta or {}
    assert meta == {"name": "a", "description": "better", "metadata": {"version": "1.2"}}
    assert out.endswith("\n---\nbody\n")


# -- each target's documented shape ------------------------------------------------------

RICH = {
    "/AGENTS.md": "# Rules\n- Use bullets.\n",
    "/skills/notes/SKILL.md": "---\nname: notes\ndescription: Summarise notes.\n---\nSteps.\n",
    "/subagents/checker.md": "---\nname: checker\ndescription: Checks facts.\ntools: [read_file, grep, "
                             "mcp__docs__get_page]\nmodel: claude-sonnet-4-5\n---\nYou check facts.\n",
    "/subagents/plain.md": "---\nname: plain\ndescription: Plain.\n---\nYou are plain.\n",
    "/tools.json": json.dumps({
        "mcp_servers": {
            "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "${TZ}"}},
            "docs": {"type": "http", "url": "https://example.com/mcp",
                     "headers": {"Authorization": "Bearer ${DOCS_TOKEN}", "X-Team": "${TEAM}"}},
        },
        "tools": [{"server": "time", "name": "get_current_time"},
                  {"server": "docs", "name": "get_page", "approval": True},
                  {"server": "docs", "name": "search"}],
    }, indent=2) + "\n",
    "/knowledge/people.md": "Ann likes tea.\n",
}


def exported(name: str, **options: Any) -> dict[str, bytes]:
    return export_agent(FORMATS[name], RICH, ExportOptions(agent="demo", **options)).files


def front(data: bytes) -> tuple[dict[str, Any], str]:
    doc = read_frontmatter(data.decode())
    return doc.meta or {}, doc.body


def test_claude_code_shape() -> None:
    files = exported("claude-code", offered={"docs": ["get_page", "search", "delete_page"]})
    assert files["CLAUDE.md"] == b"@AGENTS.md\n"
    assert files["AGENTS.md"].decode() == RICH["/AGENTS.md"]
    mcp = json.loads(files[".mcp.json"])
    assert set(mcp) == {"mcpServers"}
    assert mcp["mcpServers"]["time"] == {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "${TZ}"}}
    assert mcp["mcpServers"]["docs"] == {"type": "http", "url": "https://example.com/mcp",
                                         "headers": {"Authorization": "Bearer ${DOCS_TOKEN}", "X-Team": "${TEAM}"}}
    permissions = json.loads(files[".claude/settings.json"])["permissions"]
    # Each tool in one list (issue 29): an approval tool is in ask, not also in allow.
    assert permissions["allow"] == ["mcp__time__get_current_time", "mcp__docs__search"]
    assert permissions["ask"] == ["mcp__docs__get_page"]
    assert permissions["deny"] == ["mcp__docs__delete_page"]
    meta, body = front(files[".claude/agents/checker.md"])
    # Claude Code 2.1 has no LS, Glob or Grep tool (issue 28, finding 1): left out, with a note.
    assert meta == {"name": "checker", "description": "Checks facts.", "tools": "Read, mcp__docs__get_page",
                    "model": "claude-sonnet-4-5"}
    assert body == "You check facts.\n"
    assert front(files[".claude/agents/plain.md"])[0]["tools"] == "Read"
    assert files[".claude/skills/notes/SKILL.md"].decode() == RICH["/skills/notes/SKILL.md"]
    assert files["knowledge/people.md"] == b"Ann likes tea.\n"


def test_claude_code_without_probe_denies_nothing() -> None:
    assert "deny" not in json.loads(exported("claude-code")[".claude/settings.json"])["permissions"]


def test_opencode_shape() -> None:
    files = exported("opencode")
    doc = json.loads(files["opencode.json"])
    assert doc["$schema"] == "https://opencode.ai/config.json"
    assert doc["mcp"]["time"] == {"type": "local", "command": ["uvx", "mcp-server-time"],
                                  "environment": {"TZ": "{env:TZ}"}, "enabled": True}
    assert doc["mcp"]["docs"] == {"type": "remote", "url": "https://example.com/mcp",
                                  "headers": {"Authorization": "Bearer {env:DOCS_TOKEN}", "X-Team": "{env:TEAM}"},
                                  "enabled": True}
    assert doc["tools"] == {"time_*": False, "docs_*": False, "time_get_current_time": True,
                            "docs_get_page": True, "docs_search": True}
    assert doc["permission"] == {"docs_get_page": "ask"}
    meta, body = front(files[".opencode/agents/checker.md"])
    assert meta == {"description": "Checks facts.", "mode": "subagent", "model": "anthropic/claude-sonnet-4-5",
                    # permission, not tools: an agent-level allow would override the project's
                    # ask (issue 28, finding 2), so the approval tool is ask here too.
                    "permission": {"*": "deny", "grep": "allow", "docs_get_page": "ask",
                                   # OpenCode's own read rules, restated (issue #36): .env is asked about.
                                   "read": {"*": "allow", "*.env": "ask", "*.env.*": "ask",
                                            "*.env.example": "allow"}}}
    assert body == "You check facts.\n"
    assert ".opencode/skills/notes/SKILL.md" in files and files["AGENTS.md"] == RICH["/AGENTS.md"].encode()


def test_codex_shape() -> None:
    files = exported("codex")
    config = tomllib.loads(files[".codex/config.toml"].decode())
    assert config["mcp_servers"]["time"] == {"command": "uvx", "args": ["mcp-server-time"], "env_vars": ["TZ"],
                                             "enabled_tools": ["get_current_time"]}
    assert config["mcp_servers"]["docs"] == {
        "url": "https://example.com/mcp", "bearer_token_env_var": "DOCS_TOKEN",
        "enabled_tools": ["get_page", "search"], "env_http_headers": {"X-Team": "TEAM"},
        "tools": {"get_page": {"approval_mode": "prompt"}}}
    agent = tomllib.loads(files[".codex/agents/checker.toml"].decode())
    assert agent == {"name": "checker", "description": "Checks facts.", "developer_instructions": "You check facts.\n"}
    assert ".agents/skills/notes/SKILL.md" in files and "AGENTS.md" in files


def test_deepagents_shape() -> None:
    result = export_agent(FORMATS["deepagents"], RICH, ExportOptions(agent="demo"))
    files = result.files
    assert json.loads(files["agent.json"]) == {"name": "demo"}
    tools = json.loads(files["tools.json"])
    assert tools["tools"] == [
        {"name": "get_page", "mcp_server_url": "https://example.com/mcp", "mcp_server_name": "docs",
         "display_name": "get_page"},
        {"name": "search", "mcp_server_url": "https://example.com/mcp", "mcp_server_name": "docs",
         "display_name": "search"}]
    assert tools["interrupt_config"] == {"https://example.com/mcp::get_page": True}
    assert json.loads(files[".mcp.json"]) == {"mcpServers": {"time": RICH_TOOLS["mcp_servers"]["time"]}}
    assert json.loads(files["subagents/checker/agent.json"]) == {"description": "Checks facts.",
                                                                  "model": "anthropic:claude-sonnet-4-5"}
    assert files["subagents/checker/AGENTS.md"] == b"You check facts.\n"
    assert json.loads(files["subagents/checker/tools.json"])["tools"][0]["name"] == "get_page"
    assert files["skills/notes/SKILL.md"].decode() == RICH["/skills/notes/SKILL.md"]
    messages = " ".join(str(n) for n in result.notes)
    assert "stdio" in messages and "headers are not written" in messages


RICH_TOOLS = json.loads(RICH["/tools.json"])


def test_toml_strings_survive_any_text() -> None:
    from memagent.agent.formats.codex import toml_multiline, toml_str

    for text in ['a"""b', 'ends with "', 'ends with ""', "tab\tcr\r\nlf\n", "\x7fdel\x01", "back\\slash\\", ""]:
        assert tomllib.loads(f"a = {toml_str(text)}\nb = {toml_multiline(text)}\n") == {"a": text, "b": text}


# -- imports of hand-made projects -----------------------------------------------------


def test_claude_md_imports_are_resolved() -> None:
    tree = {"CLAUDE.md": b"# Notes\nSee @docs/style.md for style.\n\n@AGENTS.md\n",
            "AGENTS.md": b"- bullets\n", "docs/style.md": b"Short sentences.\n",
            "code.md": b"`@AGENTS.md` in code stays\n"}
    result = FORMATS["claude-code"].import_(tree)
    assert result.files["/AGENTS.md"] == ("# Notes\nSee @docs/style.md for style.\n\nShort sentences.\n\n"
                                          "- bullets\n")


def test_the_shim_claude_md_gives_back_agents_md_exactly() -> None:
    for agents in ("no newline at the end", "two\nlines\n", ""):
        tree = {"CLAUDE.md": b"@AGENTS.md\n", "AGENTS.md": agents.encode()}
        assert FORMATS["claude-code"].import_(tree).files["/AGENTS.md"] == agents


def test_literal_secrets_in_mcp_json_are_not_imported() -> None:
    tree = {".mcp.json": json.dumps({"mcpServers": {
        "gh": {"command": "npx", "env": {"GITHUB_TOKEN": "ghp_" + "a1B2" * 9, "DEBUG": "1"}}}}).encode()}
    result = FORMATS["claude-code"].import_(tree)
    doc = json.loads(result.files["/tools.json"])
    assert doc["mcp_servers"]["gh"]["env"] == {"GITHUB_TOKEN": "${GITHUB_TOKEN}", "DEBUG": "${DEBUG:-1}"}
    assert "a1B2" not in result.files["/tools.json"]
    assert any("GITHUB_TOKEN" in str(n) for n in result.notes)
    assert validate("/tools.json", result.files["/tools.json"]) == []


def test_agent_builder_tree_imports() -> None:
    tree = {
        "AGENTS.md": b"You triage email.\n",
        "agent.json": b'{"name": "triage", "model": "openai:gpt-5"}',
        "tools.json": json.dumps({"tools": [
            {"name": "gmail_search", "mcp_server_url": "https://mail.example/mcp", "mcp_server_name": "gmail",
             "display_name": "Search"},
            {"name": "gmail_send", "mcp_server_url": "https://mail.example/mcp"}],
            "interrupt_config": {"https://mail.example/mcp::gmail_send::gmail": True}}).encode(),
        "skills/reply/SKILL.md": b"---\nname: reply\ndescription: Draft replies.\n---\nSteps\n",
        "subagents/summariser/agent.json": b'{"description": "Summarises threads.", "model": "anthropic:claude-x"}',
        "subagents/summariser/AGENTS.md": b"You summarise.\n",
        "subagents/summariser/tools.json": json.dumps({"tools": [
            {"name": "gmail_search", "mcp_server_url": "https://mail.example/mcp"}], "interrupt_config": {}}).encode(),
    }
    assert detect(tree).name == "deepagents"
    result = import_tree(FORMATS["deepagents"], tree)
    for path, content in result.files.items():
        assert validate(path, content) == [], (path, content)
    tools = json.loads(result.files["/tools.json"])
    assert tools["mcp_servers"] == {"gmail": {"type": "http", "url": "https://mail.example/mcp"}}
    assert tools["tools"] == [{"server": "gmail", "name": "gmail_search"},
                              {"server": "gmail", "name": "gmail_send", "approval": True}]
    meta, body = read_frontmatter(result.files["/subagents/summariser.md"]).meta, \
        read_frontmatter(result.files["/subagents/summariser.md"]).body
    assert meta is not None and meta["description"] == "Summarises threads." and meta["model"] == "claude-x"
    assert "mcp__gmail__gmail_search" in meta["tools"] and body == "You summarise.\n"
    assert any("model" in str(n) for n in result.notes)


# -- templates -----------------------------------------------------------------------


@pytest.mark.parametrize("template", templates.names())
@pytest.mark.parametrize("name", list(FORMATS))
def test_every_template_is_valid_and_exports_to_every_format(template: str, name: str) -> None:
    memory = templates.files(template)
    for path, content in memory.items():
        assert validate(path, content) == [], path
    result = export_agent(FORMATS[name], memory, ExportOptions(agent=template))
    for path, data in result.files.items():
        if path.endswith(".json"):
            json.loads(data)
        elif path.endswith(".toml"):
            tomllib.loads(data.decode())
    assert import_tree(FORMATS[name], result.files).files == memory


def test_templates_have_one_line_descriptions() -> None:
    for name in templates.names():
        line = templates.describe(name)
        assert line and "\n" not in line and line != "(no description)"
    assert {"meeting-notes", "email-triage", "research-assistant"} <= set(templates.names())
    tools = json.loads(templates.files("research-assistant")["/tools.json"])
    assert tools["mcp_servers"]["time"] == {"command": "uvx", "args": ["mcp-server-time"]}
    assert re.search(r"^tools: \[.*mcp__fetch__fetch", templates.files("research-assistant")[
        "/subagents/fact-checker.md"], re.MULTILINE)


# -- through the store (SQLite and Postgres) ---------------------------------------------


@pytest.mark.parametrize("name", list(FORMATS))
def test_import_into_the_store_is_one_set_of_import_revisions(store: SqlStore, name: str) -> None:
    fmt = FORMATS[name]
    files = import_tree(fmt, export_agent(fmt, RICH, ExportOptions()).files).files
    store.create_agent("copy")
    changes = store.bulk_write("agent:copy", files, author="import", approval="cli", message=f"import ({name})")
    assert len(changes) == len(RICH)
    for path, content in RICH.items():
        assert store.read("agent:copy", path).content == content
        (revision,) = store.history("agent:copy", path)
        assert revision.author == "import" and revision.message == f"import ({name})"
