"""Issue 23, parts 1 and 3: no code execution through export, and export is atomic even with --force.

- Memory holds no file that git, a tool or a harness reads as configuration: every
  writer (``fs write``, the chat's ``write_file``, an MCP client's ``write_file``,
  ``fs mv``) is refused with one line saying why; hidden files deeper down stay.
- A database written before that rule may still hold such files: no export, in any
  of the five formats, writes them; the export is refused by name and the output
  folder is left as it was (a planted ``core.fsmonitor`` never runs on ``git status``).
- Import takes no such entry into memory: plain files there are left behind with a
  note, a crafted manifest naming them refuses the import, naming each.
- ``memagent validate`` reports an existing one.
- A refused ``export --force`` (a link, a folder where a file goes...) leaves the
  output folder byte-identical: every destination is checked before the first move.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memagent.agent.cli import config, templates
from memagent.agent.formats import FORMATS, ExportOptions, FormatError, export_agent, get_format, import_tree
from memagent.agent.gate import Gate
from memagent.agent.serve.server import Session
from memagent.agent.tools.memory import MemoryTools
from memagent.agent.tools.toolbox import ToolBox
from memagent.validators import CONFIG_NAMES, config_location, validate
from memagent.vfs import SqlStore, open_store
from memagent.vfs.errors import ValidationFailed
from memagent.vfs.scopes import AgentView
from tests.cli_helpers import err, out, run

# What the issue planted, and the same through the aliases a case-insensitive or
# Windows file system opens as the same file.
PLANTED = {
    "/.git/config": '[core]\n\tfsmonitor = "touch PWNED"\n',
    "/.git/hooks/post-checkout": "#!/bin/sh\ntouch PWNED\n",
    "/.envrc": "touch PWNED\n",
    "/.vscode/tasks.json": '{"version": "2.0.0", "tasks": [{"label": "x", "command": "touch PWNED", '
                           '"runOptions": {"runOn": "folderOpen"}}]}\n',
}
ALIASES = ["/.GIT/config", "/.Git./config", "/git~1/config", "/.env", "/.env.local", "/.claude/settings.json",
           "/CLAUDE.md", "/claude.local.md", "/.mcp.json", "/.codex/config.toml", "/.agents/skills/x/SKILL.md",
           "/.opencode/agents/x.md", "/opencode.json", "/.cursor/rules/x.mdc", "/.github/workflows/ci.yml",
           "/.gitlab-ci.yml", "/.husky/pre-commit", "/.pre-commit-config.yaml", "/.gitattributes",
           "/.gitmodules", "/.hg/hgrc", "/.svn/entries", "/.npmrc", "/.devcontainer/devcontainer.json",
           "/.idea/workspace.xml", "/AGENTS.override.md", "/.memagent-export.json"]
# (/knowledge/.git/config is refused too since issue 36: tests/test_config_paths_depth.py.)
ALLOWED = ["/knowledge/.notes.md", "/AGENTS.md", "/tools.json", "/.gitx/notes.md",
           "/environment.md", "/github/notes.md"]
KNOWLEDGE = "# Ann\n\n- likes tea\n"


# -- the rule -------------------------------------------------------------------------


@pytest.mark.parametrize("path", [*PLANTED, *ALIASES])
def test_a_configuration_location_is_refused_with_a_reason(path: str) -> None:
    problems = validate(path, "x\n")
    assert [p.kind for p in problems] == ["config"], problems
    message = problems[0].message
    assert "configuration" in message and "\n" not in message
    assert path.lstrip("/").split("/")[0] in message


@pytest.mark.parametrize("path", ALLOWED)
def test_hidden_files_elsewhere_and_memagent_own_files_stay_allowed(path: str) -> None:
    assert config_location(path) is None
    assert [p for p in validate(path, "# x\n") if p.kind == "config"] == []


def test_the_list_is_the_one_place() -> None:
    # Every format's own reserved folder is in it, so no format can be told apart.
    for name in (".git", ".claude", "claude.md", ".mcp.json", ".codex", ".agents", ".opencode", "opencode.json",
                 ".vscode", ".envrc", ".github"):
        assert name in CONFIG_NAMES


# -- every writer ---------------------------------------------------------------------


def test_the_store_refuses_a_write_and_a_move_there(store: SqlStore) -> None:
    for path, content in PLANTED.items():
        with pytest.raises(ValidationFailed, match="configuration"):
            store.write("agent:a", path, content)
    store.write("agent:a", "/knowledge/git-config.md", "notes\n")
    with pytest.raises(ValidationFailed, match="configuration"):
        store.move("agent:a", "/knowledge/git-config.md", "/.git/config")
    assert [i.path for i in store.all_files("agent:a")] == ["/knowledge/git-config.md"]


def test_fs_write_refuses_each_planted_file() -> None:
    assert run("init", "ra", "--template", "empty").returncode == 0
    for path, content in PLANTED.items():
        p = run("fs", "write", path, "-a", "ra", stdin=content)
        assert p.returncode == 1, path
        assert err(p).startswith("memagent: ") and "configuration" in err(p) and "Traceback" not in err(p)
    assert run("fs", "cat", "/.git/config", "-a", "ra").returncode == 1


def test_chat_write_file_is_refused(store: SqlStore) -> None:
    # As the chat runs it: the toolbox turns a refusal into an error result for the model.
    tools = ToolBox([MemoryTools(AgentView(store, "a"), Gate(yolo=True))])
    for path, content in PLANTED.items():
        result = tools.run("write_file", {"file_path": path, "content": content})
        assert result.is_error and "configuration" in result.content, result.content
    assert store.all_files("agent:a") == []


def test_an_mcp_client_write_file_is_refused(store: SqlStore) -> None:
    session = Session(AgentView(store, "a"), "yolo", "evil-client 1.0", None)
    for path, content in PLANTED.items():
        result = session.run("write_file", {"file_path": path, "content": content, "reason": "plant"})
        assert result.is_error and "configuration" in result.content, result.content
    assert store.all_files("agent:a") == []


# -- a database from before the rule ---------------------------------------------------


@contextmanager
def cli_store() -> Iterator[SqlStore]:
    store = open_store(config.db_url())
    try:
        yield store
    finally:
        store.engine.dispose()


def plant_old(agent: str = "ra", planted: dict[str, str] | None = None) -> None:
    """An agent whose database was written before the rule: the planted files stored without it."""
    with cli_store() as store:
        store.create_agent(agent, templates.files("research-assistant") | {"/knowledge/ann.md": KNOWLEDGE})
        old = SqlStore(store.engine, validator=lambda _path, _content: [])  # the rules of an older release
        for path, content in (planted or PLANTED).items():
            old.write(f"agent:{agent}", path, content)


def snapshot(root: Path) -> dict[str, tuple[str, bytes | str | None]]:
    """Every entry under ``root``: its type and content (a link's target), links not followed."""
    found: dict[str, tuple[str, bytes | str | None]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(mode):
                found[rel] = ("dir", None)
            elif stat.S_ISREG(mode):
                found[rel] = ("file", path.read_bytes())
            else:
                found[rel] = ("special", None)  # a FIFO: reading it would wait for a writer
    return found


def memory_with_planted() -> dict[str, str]:
    return {"/AGENTS.md": "# Agent\n\nBe brief.\n", "/knowledge/ann.md": KNOWLEDGE, **PLANTED}


@pytest.mark.parametrize("name", list(FORMATS))
def test_no_format_exports_a_planted_file(name: str) -> None:
    with pytest.raises(FormatError) as caught:
        export_agent(get_format(name), memory_with_planted(), ExportOptions(agent="ra"))
    message = str(caught.value)
    assert "\n" not in message
    for path in PLANTED:
        assert path in message


@pytest.mark.parametrize("path", ALIASES)
def test_the_folder_format_exports_no_alias_either(path: str) -> None:
    memory = {"/AGENTS.md": "# Agent\n", path: "x\n"}
    with pytest.raises(FormatError, match="refusing to export"):
        export_agent(get_format("folder"), memory, ExportOptions())


def git_repo(root: Path) -> Path:
    repo = root / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, capture_output=True)
    (repo / "README.md").write_text("hello\n")
    return repo


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize("name", list(FORMATS))
def test_a_planted_git_config_never_reaches_a_repository(name: str, tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    planted = dict(PLANTED) | {"/.git/config": f'[core]\n\tfsmonitor = "touch {marker}"\n'}
    plant_old(planted=planted)
    repo = git_repo(tmp_path)
    before = snapshot(repo)
    for args in ((), ("--zip",)):
        target = repo if not args else tmp_path / "out.zip"
        p = run("export", "ra", str(target), "--format", name, "--force", *args)
        assert p.returncode == 1, out(p)
        assert "/.git/config" in err(p) and "/.envrc" in err(p) and "Traceback" not in err(p)
        assert not (tmp_path / "out.zip").exists()
    assert snapshot(repo) == before
    subprocess.run(["git", "status"], cwd=repo, check=True, capture_output=True)
    assert not marker.exists()


def test_validate_reports_an_existing_planted_file() -> None:
    plant_old()
    p = run("validate", "ra")
    assert p.returncode == 1
    text = out(p) + err(p)
    for path in PLANTED:
        assert path in text
    assert "configuration" in text


def test_after_moving_the_planted_files_away_the_export_works(tmp_path: Path) -> None:
    plant_old()
    for path in PLANTED:
        assert run("fs", "rm", path, "-a", "ra").returncode == 0, path
    p = run("export", "ra", str(tmp_path / "out"))
    assert p.returncode == 0, err(p)
    assert not (tmp_path / "out" / ".git").exists() and (tmp_path / "out" / "AGENTS.md").exists()


# -- import -----------------------------------------------------------------------------


def test_import_leaves_plain_configuration_files_behind_naming_each() -> None:
    tree = {"AGENTS.md": b"# A\n", "CLAUDE.md": b"@AGENTS.md\n", "GEMINI.md": b"# g\n", "opencode.json": b"{}",
            ".envrc": b"touch x\n", "knowledge/a.md": b"a\n"}
    result = import_tree(get_format("folder"), tree)
    assert sorted(result.files) == ["/AGENTS.md", "/knowledge/a.md"]
    noted = {n.path for n in result.notes}
    assert {"CLAUDE.md", "GEMINI.md", "opencode.json", ".envrc"} <= noted


def crafted_export(path: Path) -> Path:
    """A zip looking like our own export whose manifest 'restores' planted files."""
    restore = [{"path": p, "content": c, "from": {}} for p, c in PLANTED.items()]
    manifest = {"memagent_export": 1, "format": "folder", "restore": restore}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("AGENTS.md", "# Agent\n")
        archive.writestr(".memagent-export.json", json.dumps(manifest))
    path.write_bytes(buffer.getvalue())
    return path


def test_import_of_a_crafted_manifest_is_refused_naming_each(tmp_path: Path) -> None:
    source = crafted_export(tmp_path / "evil.zip")
    with zipfile.ZipFile(source) as archive:
        tree = {name: archive.read(name) for name in archive.namelist()}
    with pytest.raises(FormatError) as caught:
        import_tree(get_format("folder"), tree)
    for path in PLANTED:
        assert path in str(caught.value)
    p = run("import", str(source), "--as", "evil", "--yes")
    assert p.returncode == 1 and "Traceback" not in err(p)
    for path in PLANTED:
        assert path in err(p)
    with cli_store() as store:
        assert "evil" not in store.list_agents()


# -- export --force is atomic ------------------------------------------------------------


def claude_project(tmp_path: Path) -> tuple[Path, Path]:
    """A Claude Code project whose AGENTS.md is a link to a file outside it, plus its own settings."""
    target, outside = tmp_path / "project", tmp_path / "outside.md"
    outside.write_text("the user's file outside the project\n")
    (target / ".claude" / "agents").mkdir(parents=True)
    (target / ".claude" / "settings.json").write_text('{"permissions": {"allow": ["Read"]}}\n')
    (target / ".claude" / "agents" / "helper.md").write_text("old helper\n")
    (target / ".mcp.json").write_text('{"mcpServers": {}}\n')
    (target / "mine.txt").write_text("keep me\n")
    (target / "AGENTS.md").symlink_to(outside)
    return target, outside


def rich_agent() -> None:
    with cli_store() as store:
        store.create_agent("ra", templates.files("research-assistant") | {"/knowledge/ann.md": KNOWLEDGE})


def test_a_refused_force_export_through_a_link_changes_nothing(tmp_path: Path) -> None:
    rich_agent()
    target, outside = claude_project(tmp_path)
    before, outside_before = snapshot(target), outside.read_bytes()
    p = run("export", "ra", str(target), "--format", "claude-code", "--force")
    assert p.returncode == 1
    assert "refusing to write through the link" in err(p) and "nothing was written" in err(p)
    assert len(err(p).strip().splitlines()) == 1
    assert snapshot(target) == before
    assert outside.read_bytes() == outside_before
    assert not [x for x in tmp_path.iterdir() if "memagent-tmp" in x.name]


@pytest.mark.parametrize("blocker", ["folder-for-file", "file-for-folder", "fifo", "link-in-the-middle"])
def test_every_kind_of_bad_destination_is_found_before_anything_moves(blocker: str, tmp_path: Path) -> None:
    rich_agent()
    target = tmp_path / "project"
    (target / ".claude" / "agents").mkdir(parents=True)
    (target / ".claude" / "settings.json").write_text("{}\n")
    (target / "AGENTS.md").write_text("old\n")
    # The blocker sorts after files that would otherwise be replaced first.
    if blocker == "folder-for-file":
        (target / "CLAUDE.md").mkdir()
    elif blocker == "file-for-folder":
        (target / "knowledge").write_text("a file where the export needs a folder\n")
    elif blocker == "fifo":
        os.mkfifo(target / "CLAUDE.md")
    else:
        (tmp_path / "elsewhere").mkdir()
        (target / "knowledge").symlink_to(tmp_path / "elsewhere")
    before = snapshot(target)
    p = run("export", "ra", str(target), "--format", "claude-code", "--force")
    assert p.returncode == 1 and "nothing was written" in err(p), err(p)
    assert snapshot(target) == before
    assert not (tmp_path / "elsewhere").exists() or list((tmp_path / "elsewhere").iterdir()) == []


@contextmanager
def unmovable(path: Path) -> Iterator[None]:
    """``path`` cannot be renamed away: immutable (works for root too) or, failing that, in a read-only folder."""
    if shutil.which("chattr") and subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0:
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        return
    if os.geteuid() == 0:
        pytest.skip("needs chattr +i, or a user that folder permissions stop")
    path.parent.chmod(0o555)
    try:
        yield
    finally:
        path.parent.chmod(0o755)


def test_a_move_that_fails_puts_back_what_it_replaced(tmp_path: Path) -> None:
    rich_agent()
    target = tmp_path / "project"
    (target / ".claude").mkdir(parents=True)
    (target / ".claude" / "settings.json").write_text("{}\n")
    (target / "AGENTS.md").write_text("old agents\n")
    (target / "knowledge").mkdir()
    (target / "knowledge" / "ann.md").write_text("old ann\n")
    before = snapshot(target)
    # knowledge/ann.md sorts after .claude/..., .mcp.json, AGENTS.md and CLAUDE.md: those are
    # replaced or created first, then its move fails and all of them must be put back.
    with unmovable(target / "knowledge" / "ann.md"):
        p = run("export", "ra", str(target), "--format", "claude-code", "--force")
    assert p.returncode == 1 and "nothing was changed" in err(p), err(p)
    assert snapshot(target) == before
    assert not [x for x in tmp_path.iterdir() if "memagent-tmp" in x.name]


def test_a_force_export_still_replaces_only_its_files(tmp_path: Path) -> None:
    rich_agent()
    target = tmp_path / "project"
    target.mkdir()
    (target / "mine.txt").write_text("keep me\n")
    (target / "AGENTS.md").write_text("old\n")
    p = run("export", "ra", str(target), "--format", "claude-code", "--force")
    assert p.returncode == 0, err(p)
    assert (target / "mine.txt").read_text() == "keep me\n"
    assert (target / "AGENTS.md").read_bytes() == run("fs", "cat", "/AGENTS.md", "-a", "ra").stdout
    assert not [x for x in tmp_path.iterdir() if "memagent-tmp" in x.name]
