"""``memagent export`` / ``import`` / ``templates`` end to end, through the installed command."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memagent.agent.cli import config, templates
from memagent.agent.formats import FORMATS
from memagent.vfs import SqlStore, open_store
from tests.cli_helpers import err, out, run

KNOWLEDGE = "# Ann\n\n- likes tea\n- café ☕\n"
FLAT_SKILL = "---\nname: quick\ndescription: A flat-layout skill. Use when testing.\n---\nDo it quickly.\n"


@pytest.fixture(autouse=True)
def home_database(isolated_home: Path, migrated_sqlite_template: Path) -> None:
    """The command's own database (``memagent.db`` in MEMAGENT_HOME) as memagent leaves it after
    its first start: a copy of conftest's migrated template, so neither this process nor each
    ``memagent`` it runs migrates a new file (0.4-0.6 s each). Every test still gets its own copy."""
    isolated_home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(migrated_sqlite_template, isolated_home / "memagent.db")


@contextmanager
def the_store() -> Iterator[SqlStore]:
    """The store the command uses (same MEMAGENT_HOME), opened in-process to check it quickly."""
    store = open_store(config.db_url())
    try:
        yield store
    finally:
        store.engine.dispose()


def files_of(agent: str) -> dict[str, bytes]:
    with the_store() as store:
        scope = f"agent:{agent}"
        return {i.path: store.read(scope, i.path).content.encode() for i in store.all_files(scope)}


def agent_names() -> list[str]:
    with the_store() as store:
        return store.list_agents()


def make_agent(name: str = "ra") -> dict[str, bytes]:
    with the_store() as store:
        store.create_agent(name, templates.files("research-assistant") | {"/knowledge/ann.md": KNOWLEDGE,
                                                                        "/skills/quick.md": FLAT_SKILL})
    return files_of(name)


def test_templates_lists_each_starter_with_one_line() -> None:
    p = run("templates")
    assert p.returncode == 0
    lines = out(p).splitlines()
    names = [line.split()[0] for line in lines]
    assert {"meeting-notes", "email-triage", "research-assistant", "empty"} <= set(names)
    assert all(len(line.split(None, 1)) == 2 for line in lines)
    assert run("init", "t", "--template", "research-assistant").returncode == 0
    p = run("validate", "t")
    assert p.returncode == 0, out(p) + err(p)


@pytest.mark.parametrize("as_zip", [False, True], ids=["folder", "zip"])
@pytest.mark.parametrize("name", list(FORMATS))
def test_export_then_import_gives_the_same_files(name: str, as_zip: bool, tmp_path: Path) -> None:
    original = make_agent()
    target = tmp_path / ("out.zip" if as_zip else "out")
    args = ["export", "ra", str(target), "--format", name] + (["--zip"] if as_zip else [])
    p = run(*args)
    assert p.returncode == 0, err(p)
    assert out(p).splitlines()[-1].startswith(f"exported agent 'ra' as {name} to {target} (")
    assert target.is_file() if as_zip else target.is_dir()
    p = run("import", str(target), "--as", "copy", "--yes")
    assert p.returncode == 0, err(p)
    assert f"({name})" in out(p).splitlines()[-1] and out(p).splitlines()[-1].startswith("imported ")
    assert files_of("copy") == original
    with the_store() as store:
        (revision,) = store.history("agent:copy", "/knowledge/ann.md")
    assert revision.author == "import" and revision.message == f"import from {target.name} ({name})"


SUBAGENT = ("---\nname: researcher\ndescription: Looks things up. Use for questions about notes.\n"
            "tools: [ls, read_file, grep]\n---\nAnswer in one sentence.\n")


@pytest.mark.parametrize("name", list(FORMATS))
def test_import_of_an_unchanged_export_notes_nothing_restored_exactly(name: str, tmp_path: Path) -> None:
    # OpenCode's ".opencode/agents/researcher.md: permission not carried over" was printed
    # although the manifest gave /subagents/researcher.md back byte for byte.
    with the_store() as store:
        store.create_agent("ra", {"/AGENTS.md": "- Be brief.\n", "/subagents/researcher.md": SUBAGENT})
    assert run("export", "ra", str(tmp_path / "out"), "--format", name).returncode == 0
    p = run("import", str(tmp_path / "out"), "--as", "copy", "--yes")
    assert p.returncode == 0, err(p)
    assert "not carried over" not in out(p) + err(p) and "notes (" not in out(p)
    assert files_of("copy") == files_of("ra")


def test_import_of_an_edited_opencode_subagent_keeps_its_note(tmp_path: Path) -> None:
    with the_store() as store:
        store.create_agent("ra", {"/AGENTS.md": "- Be brief.\n", "/subagents/researcher.md": SUBAGENT})
    assert run("export", "ra", str(tmp_path / "out"), "--format", "opencode").returncode == 0
    agent_file = tmp_path / "out" / ".opencode" / "agents" / "researcher.md"
    agent_file.write_text(agent_file.read_text().replace("one sentence", "two sentences"))
    p = run("import", str(tmp_path / "out"), "--as", "copy", "--yes")
    assert p.returncode == 0, err(p)
    assert ".opencode/agents/researcher.md: permission not carried over" in out(p)
    assert "two sentences" in files_of("copy")["/subagents/researcher.md"].decode()


def test_export_refuses_a_non_empty_folder_and_writes_nothing(tmp_path: Path) -> None:
    make_agent()
    target = tmp_path / "busy"
    target.mkdir()
    (target / "mine.txt").write_text("keep me")
    p = run("export", "ra", str(target), "--format", "claude-code")
    assert p.returncode == 1
    assert err(p).startswith("memagent: ") and "not empty" in err(p) and "--force" in err(p)
    assert sorted(x.name for x in target.iterdir()) == ["mine.txt"]
    assert sorted(x.name for x in tmp_path.iterdir()) == ["busy", "home"]


def test_export_force_writes_only_its_files(tmp_path: Path) -> None:
    make_agent()
    target = tmp_path / "project"
    target.mkdir()
    (target / "mine.txt").write_text("keep me")
    (target / "AGENTS.md").write_text("old")
    p = run("export", "ra", str(target), "--format", "claude-code", "--force")
    assert p.returncode == 0, err(p)
    assert (target / "mine.txt").read_text() == "keep me"
    assert (target / "AGENTS.md").read_bytes() == run("fs", "cat", "/AGENTS.md", "-a", "ra").stdout
    assert not [x for x in tmp_path.iterdir() if "memagent-tmp" in x.name]


def test_export_refuses_to_write_through_a_link(tmp_path: Path) -> None:
    make_agent()
    target, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    target.mkdir()
    elsewhere.mkdir()
    (target / ".claude").symlink_to(elsewhere)
    p = run("export", "ra", str(target), "--format", "claude-code", "--force")
    assert p.returncode == 1 and "link" in err(p)
    assert list(elsewhere.iterdir()) == []


def test_export_zip_refuses_an_existing_file(tmp_path: Path) -> None:
    make_agent()
    target = tmp_path / "a.zip"
    target.write_bytes(b"old")
    p = run("export", "ra", str(target), "--format", "codex", "--zip")
    assert p.returncode == 1 and "already exists" in err(p)
    assert target.read_bytes() == b"old"


def test_export_reports_what_the_target_cannot_hold(tmp_path: Path) -> None:
    make_agent()
    p = run("export", "ra", str(tmp_path / "d"), "--format", "deepagents")
    assert p.returncode == 0
    text = out(p)
    assert "what Deep Agents / Agent Builder will not pick up:" in text
    assert "stdio" in text and ".memagent-export.json" in text


def test_unknown_agent_and_format_are_one_line_errors(tmp_path: Path) -> None:
    p = run("export", "nobody", str(tmp_path / "x"), "--format", "folder")
    assert p.returncode == 1 and err(p).count("\n") == 1 and "no agent named 'nobody'" in err(p)
    p = run("export", "nobody", str(tmp_path / "x"), "--format", "cursor")
    assert p.returncode == 2
    p = run("import", str(tmp_path / "missing"), "--as", "x")
    assert p.returncode == 1 and "does not exist" in err(p)
    p = run("import", str(tmp_path), "--as", "Bad Name")
    assert p.returncode == 1 and "invalid agent name" in err(p)


def test_import_asks_first_and_stores_nothing_on_no(tmp_path: Path) -> None:
    make_agent()
    run("export", "ra", str(tmp_path / "o"), "--format", "opencode")
    p = run("import", str(tmp_path / "o"), "--as", "copy", stdin="n\n")
    assert p.returncode == 1 and "nothing was stored" in err(p)
    assert "create /AGENTS.md" in out(p) and "create /tools.json" in out(p)
    assert "copy" not in agent_names()
    p = run("import", str(tmp_path / "o"), "--as", "copy")  # no answer at all
    assert p.returncode == 1 and "copy" not in agent_names()
    p = run("import", str(tmp_path / "o"), "--as", "copy", stdin="y\n")
    assert p.returncode == 0 and "copy" in agent_names()


def test_import_into_an_existing_agent_shows_a_diff(tmp_path: Path) -> None:
    make_agent()
    run("export", "ra", str(tmp_path / "o"), "--format", "folder")
    (tmp_path / "o" / "AGENTS.md").write_text("# Research assistant\n\nNew rules.\n")
    p = run("import", str(tmp_path / "o"), "--as", "ra", "--yes")
    assert p.returncode == 0, err(p)
    text = out(p)
    assert "existing agent" in text and "change /AGENTS.md" in text
    assert "+New rules." in text and "same   /tools.json" in text
    assert text.splitlines()[-1].startswith("imported 1 files")
    with the_store() as store:
        latest = store.history("agent:ra", "/AGENTS.md")[0]
    assert latest.author == "import" and latest.message == "import from o (folder)"
    p = run("import", str(tmp_path / "o"), "--as", "ra", "--yes")
    assert p.returncode == 0 and "nothing to import" in out(p)


def test_import_validates_everything_first(tmp_path: Path) -> None:
    src = tmp_path / "bad"
    (src / "skills").mkdir(parents=True)
    (src / "AGENTS.md").write_text("fine\n")
    (src / "skills" / "oops.md").write_text("---\nname: other\ndescription: x\n---\nbody\n")
    (src / "tools.json").write_text('{"mcp_servers": {}, "tools": [{"server": "nope", "name": "t"}]}')
    p = run("import", str(src), "--as", "bad", "--yes")
    assert p.returncode == 1
    assert "2 of 3 files" in err(p) and "nothing was stored" in err(p)
    assert "/skills/oops.md" in err(p) and "/tools.json" in err(p)
    assert "bad" not in agent_names()


HANDMADE = {
    "CLAUDE.md": "# Team notes\n\nAlways answer in British English.\n\n@AGENTS.md\n",
    "AGENTS.md": "- Use bullet points.\n",
    ".claude/skills/pdf-forms/SKILL.md": "---\nname: pdf-forms\ndescription: Fill PDF forms.\nversion: 1.2\n"
                                         "when_to_use: When a form arrives\nargument-hint: \"[file]\"\n---\n# Steps\n",
    ".claude/skills/pdf-forms/reference.md": "Field list.\n",
    ".claude/agents/reviewer.md": "---\nname: reviewer\ndescription: Reviews changes.\ntools: Read, Grep, Bash, "
                                  "mcp__github__get_pr\nmodel: sonnet\ncolor: blue\n---\nYou review.\n",
    ".mcp.json": json.dumps({"mcpServers": {
        "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
                   "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}},
        "docs": {"type": "http", "url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${T}"}}}}),
    ".claude/settings.json": json.dumps({"permissions": {"allow": ["mcp__github__get_pr", "Bash(git diff:*)"],
                                                         "ask": ["mcp__docs__search"]}}),
    ".env": "GITHUB_TOKEN=ghp_xxx\n",
}


def write_tree(root: Path, tree: dict[str, str]) -> None:
    for rel, text in tree.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_import_a_hand_made_claude_code_project(tmp_path: Path) -> None:
    write_tree(tmp_path / "proj", HANDMADE)
    p = run("import", str(tmp_path / "proj"), "--as", "cc", "--yes")
    assert p.returncode == 0, err(p)
    text = out(p)
    assert "(Claude Code)" in text and ".env: hidden file not imported" in text
    assert "'Bash' has no memagent equivalent" in text and "color not carried over" in text
    got = files_of("cc")
    assert got["/AGENTS.md"] == b"# Team notes\n\nAlways answer in British English.\n\n- Use bullet points.\n"
    assert set(got) == {"/AGENTS.md", "/skills/pdf-forms/SKILL.md", "/skills/pdf-forms/reference.md",
                        "/subagents/reviewer.md", "/tools.json"}
    assert b"tools: [read_file, grep, mcp__github__get_pr]" in got["/subagents/reviewer.md"]
    tools = json.loads(got["/tools.json"])
    assert tools["tools"] == [{"server": "github", "name": "get_pr"},
                              {"server": "docs", "name": "search", "approval": True}]
    with the_store() as store:
        for path, content in got.items():
            store.validate(path, content.decode())
    # ... the skill goes back out valid for the Agent Skills spec, its extra keys under
    # metadata, and the manifest gives the stored file back on the way in again.
    p = run("export", "cc", str(tmp_path / "back"), "--format", "claude-code")
    assert p.returncode == 0, err(p)
    back = (tmp_path / "back/.claude/skills/pdf-forms/SKILL.md").read_text()
    assert "memagent-original-frontmatter" not in back and "\nmetadata:\n" in back
    p = run("import", str(tmp_path / "back"), "--as", "cc2", "--yes")
    assert p.returncode == 0, err(p)
    assert files_of("cc2")["/skills/pdf-forms/SKILL.md"] == got["/skills/pdf-forms/SKILL.md"]


def test_import_an_agent_builder_zip(tmp_path: Path) -> None:
    archive = tmp_path / "triage.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("email-triage/AGENTS.md", "You triage email.\n")
        z.writestr("email-triage/tools.json", json.dumps({
            "tools": [{"name": "gmail_search", "mcp_server_url": "https://mail.example/mcp",
                       "mcp_server_name": "gmail", "display_name": "Search mail"},
                      {"name": "gmail_send", "mcp_server_url": "https://mail.example/mcp",
                       "mcp_server_name": "gmail", "display_name": "Send"}],
            "interrupt_config": {"https://mail.example/mcp::gmail_send::gmail": True}}))
        z.writestr("email-triage/skills/reply/SKILL.md", "---\nname: reply\ndescription: Draft replies.\n---\nSteps\n")
        z.writestr("email-triage/subagents/summariser/AGENTS.md", "You summarise threads.\n")
        z.writestr("email-triage/subagents/summariser/agent.json", '{"description": "Summarises threads."}')
    p = run("import", str(archive), "--as", "triage", "--yes")
    assert p.returncode == 0, err(p)
    assert "(Deep Agents / Agent Builder)" in out(p)
    got = files_of("triage")
    assert set(got) == {"/AGENTS.md", "/tools.json", "/skills/reply/SKILL.md", "/subagents/summariser.md"}
    tools = json.loads(got["/tools.json"])
    assert tools["tools"][1] == {"server": "gmail", "name": "gmail_send", "approval": True}
    with the_store() as store:
        for path, content in got.items():
            store.validate(path, content.decode())


# -- unsafe sources: refused by name, nothing stored -------------------------------------------


def zip_with(path: Path, entries: list[tuple[zipfile.ZipInfo | str, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("AGENTS.md", "fine\n")
        for info, data in entries:
            z.writestr(info, data)
    return path


def symlink_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


@pytest.mark.parametrize(("entry", "data", "named", "why"), [
    ("../evil.md", b"x", "../evil.md", "'..'"),
    ("notes/../../evil.md", b"x", "notes/../../evil.md", "'..'"),
    ("/etc/evil.md", b"x", "/etc/evil.md", "absolute"),
    ("C:/evil.md", b"x", "C:/evil.md", "absolute"),
    ("dir\\..\\evil.md", b"x", "evil.md", "backslash"),
    (symlink_info("link.md"), b"/etc/passwd", "link.md", "symbolic link"),
    ("bomb.md", b"\0" * (20 * 1024 * 1024), "bomb.md", "zip bomb"),
], ids=["dotdot", "nested-dotdot", "absolute", "drive", "backslash", "symlink", "bomb"])
def test_unsafe_zip_is_refused_and_nothing_stored(tmp_path: Path, entry: zipfile.ZipInfo | str, data: bytes,
                                                  named: str, why: str) -> None:
    archive = zip_with(tmp_path / "bad.zip", [(entry, data)])
    p = run("import", str(archive), "--as", "victim", "--yes")
    assert p.returncode == 1
    assert err(p).startswith("memagent: refused to import") and "nothing was stored" in err(p)
    assert named in err(p) and why in err(p)
    assert "victim" not in agent_names()
    assert not (tmp_path / "evil.md").exists() and not (tmp_path.parent / "evil.md").exists()


def test_zip_whose_header_lies_about_its_size_is_refused(tmp_path: Path) -> None:
    archive = zip_with(tmp_path / "liar.zip", [("big.md", b"a" * 5000)])
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as z:
        info = z.getinfo("big.md")
    # Shrink the declared size in the central directory (the local header is ignored by readers).
    assert info.file_size == 5000
    offset = data.rfind(b"big.md") - 46 + 24
    data[offset: offset + 4] = (100).to_bytes(4, "little")
    archive.write_bytes(bytes(data))
    p = run("import", str(archive), "--as", "victim", "--yes")
    assert p.returncode == 1 and "'big.md'" in err(p) and "Traceback" not in err(p)
    assert "victim" not in agent_names()


def test_folder_with_a_symlink_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "AGENTS.md").write_text("fine\n")
    (tmp_path / "secret.txt").write_text("secret")
    (src / "notes.md").symlink_to(tmp_path / "secret.txt")
    (src / "linked-dir").symlink_to(tmp_path)
    p = run("import", str(src), "--as", "victim", "--yes")
    assert p.returncode == 1
    assert "'notes.md' is a symbolic link" in err(p) and "'linked-dir' is a symbolic link" in err(p)
    assert "victim" not in agent_names()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_folder_with_a_device_file_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "AGENTS.md").write_text("fine\n")
    os.mkfifo(src / "pipe")
    p = run("import", str(src), "--as", "victim", "--yes", timeout=30)
    assert p.returncode == 1 and "'pipe' is a device file, FIFO or socket" in err(p)
    assert "victim" not in agent_names()


def test_too_many_entries_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memagent.agent.formats import archive as archive_module

    monkeypatch.setattr(archive_module, "MAX_ENTRIES", 3)
    path = zip_with(tmp_path / "many.zip", [(f"k{i}.md", b"x") for i in range(5)])
    with pytest.raises(archive_module.UnsafeSource, match="over the cap of 3"):
        archive_module.read_source(path)


# -- --probe: deny what a server offers but tools.json does not list ---------------------------

FAKE_SERVER = r'''
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "fake", "version": "1"}}
    elif msg["method"] == "tools/list":
        result = {"tools": [{"name": n, "inputSchema": {"type": "object"}}
                            for n in ("get_current_time", "convert_time", "set_clock")]}
    else:
        result = {}
    print("log line, not JSON", flush=True)
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
'''


def test_probe_denies_offered_but_unlisted_tools(tmp_path: Path) -> None:
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)
    tools = {"mcp_servers": {"time": {"command": sys.executable, "args": [str(script)]},
                             "gone": {"command": str(tmp_path / "no-such-program")}},
             "tools": [{"server": "time", "name": "get_current_time"},
                       {"server": "time", "name": "convert_time", "approval": True}]}
    with the_store() as store:
        store.create_agent("probe", {"/tools.json": json.dumps(tools, indent=2)})
    p = run("export", "probe", str(tmp_path / "o"), "--format", "claude-code", "--probe")
    assert p.returncode == 0, err(p)
    permissions = json.loads((tmp_path / "o/.claude/settings.json").read_text())["permissions"]
    assert permissions["deny"] == ["mcp__time__set_clock"]
    assert permissions["ask"] == ["mcp__time__convert_time"]
    assert "gone: not probed" in out(p)
