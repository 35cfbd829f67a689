"""Issue 36: no configuration location at any depth (code execution through a nested repository).

The first pass refused ``/.git/...`` but only looked at a path's first segment, so
``/knowledge/.git/config`` (with ``core.fsmonitor`` planted), ``/knowledge/.git/HEAD``,
``objects/`` and ``refs/`` made a nested repository that every export wrote out and
``git status`` inside it ran. Here, from the attack:

- every writer refuses it: ``fs write``, an MCP client's ``write_file`` through the
  real server, a model under an ``allow`` rule (nobody asked, nothing stored);
- a database written before the rule: ``memagent validate`` reports each file, and
  the export in all five formats (folder and ``--zip``) is refused naming it, the
  destination unchanged; a real ``git status`` in the destination and in the folder
  that would have held the nested repository does not run the planted command;
- import and export decide by the same rule (``validators.config_location``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import Implementation

from memagent.agent.cli import templates
from memagent.agent.formats import FORMATS, ExportOptions, FormatError, export_agent, get_format, import_tree
from memagent.validators import config_location, validate
from memagent.vfs import SqlStore, open_store
from memagent.vfs.errors import ValidationFailed
from memagent.vfs.records.rules import RuleBook
from tests.agent_helpers import last_tool_result, make_agent
from tests.cli_helpers import MEMAGENT, err, out, run

S = "agent:a"
SKILL = "---\nname: notes\ndescription: Summarise meeting notes. Use when the user pastes notes.\n---\n# Steps\n- a\n"


def nested_repo(prefix: str, marker: Path | str = "PWNED") -> dict[str, str]:
    """A git repository git finds from inside ``prefix``, its ``core.fsmonitor`` running ``touch marker``."""
    return {
        f"{prefix}/.git/HEAD": "ref: refs/heads/main\n",
        f"{prefix}/.git/config": f'[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch {marker}"\n',
        f"{prefix}/.git/objects/info/packs": "\n",
        f"{prefix}/.git/refs/heads/README": "refs live here\n",
    }


PLANTED = nested_repo("/knowledge")

# Names a tool acts on wherever they sit, and the aliases a case-insensitive or
# Windows file system opens as the same name.
DEEP = [*PLANTED, "/skills/notes/.git/config", "/knowledge/a/b/.git", "/knowledge/.GIT/config",
        "/knowledge/.Git. /config", "/knowledge/.git:stream/config", "/knowledge/git~1/config",
        "/knowledge/x/HEAD", "/knowledge/x/head", "/knowledge/.envrc", "/knowledge/sub/.env.local",
        "/knowledge/.hg/hgrc", "/knowledge/.svn/entries", "/knowledge/.bzr/branch.conf", "/knowledge/_darcs/prefs",
        "/knowledge/.jj/repo", "/knowledge/.gitattributes", "/knowledge/.gitmodules", "/knowledge/.gitignore",
        "/knowledge/.direnv/x", "/knowledge/.mise.toml", "/knowledge/mise.toml", "/knowledge/.tool-versions",
        "/knowledge/.dir-locals.el", "/knowledge/.exrc", "/knowledge/.nvimrc", "/knowledge/.npmrc",
        "/knowledge/.yarnrc.yml", "/knowledge/.cargo/config.toml", "/knowledge/.vscode/tasks.json",
        "/knowledge/.claude/settings.json", "/skills/notes/.claude/settings.json", "/knowledge/.mcp.json",
        "/knowledge/.codex/config.toml", "/knowledge/.memagent-export.json"]
# Still ordinary memory: hidden notes, look-alike names, and names read only at the
# top of a repository or as instructions (what memory's own AGENTS.md already says).
STILL_ALLOWED = ["/knowledge/.notes.md", "/knowledge/git/config", "/knowledge/refs/paper.md",
                 "/knowledge/objects/list.md", "/knowledge/head/of-sales.md", "/knowledge/HEAD.md",
                 "/knowledge/CLAUDE.md", "/knowledge/gemini.md", "/knowledge/AGENTS.md",
                 "/knowledge/.github/workflows/ci.yml", "/knowledge/.pre-commit-config.yaml",
                 "/skills/notes/SKILL.md", "/skills/notes/reference.md", "/knowledge/.gitx/notes.md"]


# -- the rule ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", DEEP)
def test_a_configuration_name_is_refused_in_any_segment(path: str) -> None:
    assert config_location(path) is not None
    problems = validate(path, "x\n")
    assert [p.kind for p in problems] == ["config"], problems
    assert "\n" not in problems[0].message and "configuration" in problems[0].message


@pytest.mark.parametrize("path", STILL_ALLOWED)
def test_ordinary_names_deeper_down_stay_allowed(path: str) -> None:
    assert config_location(path) is None
    content = SKILL if path == "/skills/notes/SKILL.md" else "# x\n"
    assert validate(path, content) == []


# -- every writer -----------------------------------------------------------------------------


def test_the_store_refuses_the_nested_repository_and_a_move_into_it(store: SqlStore) -> None:
    for path, content in PLANTED.items():
        with pytest.raises(ValidationFailed, match="configuration"):
            store.write(S, path, content)
    store.write(S, "/knowledge/git-config.md", "notes\n")
    with pytest.raises(ValidationFailed, match="configuration"):
        store.move(S, "/knowledge/git-config.md", "/knowledge/.git/config")
    assert [i.path for i in store.all_files(S)] == ["/knowledge/git-config.md"]


def test_fs_write_refuses_the_nested_repository(backend_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMAGENT_DB", backend_url)
    # The agent is set-up (what `memagent init ra --template empty` stores), made in-process:
    # the commands under test are the writes.
    with contextlib.closing(open_store(backend_url)) as store:
        store.create_agent("ra", templates.files("empty"))
        before = {i.path for i in store.all_files("agent:ra")}
    for path, content in PLANTED.items():
        p = run("fs", "write", path, "-a", "ra", stdin=content)
        assert p.returncode == 1, path
        assert err(p).startswith("memagent: ") and "configuration" in err(p) and "Traceback" not in err(p)
        assert "named .git in any folder" in err(p)
    # Nothing of the repository was stored (the whole agent, not only what `fs ls /knowledge` lists).
    with contextlib.closing(open_store(backend_url)) as store:
        stored = {i.path for i in store.all_files("agent:ra")}
    assert stored == before and not any(".git" in path for path in stored), stored


@contextlib.asynccontextmanager
async def mcp_stdio(agent: str) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=MEMAGENT, args=["mcp", "serve", agent], env=dict(os.environ))
    async with Client(stdio_client(params), client_info=Implementation(name="evil", version="1")) as c:
        yield c


def test_mcp_write_file_refuses_the_nested_repository(backend_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMAGENT_DB", backend_url)
    store = open_store(backend_url)
    store.create_agent("demo", {"/AGENTS.md": "# A\n"})
    store.close()
    results: list[tuple[bool, str]] = []

    async def body() -> None:
        with anyio.fail_after(90):
            async with mcp_stdio("demo") as c:
                for path, content in PLANTED.items():
                    r = await c.call_tool("write_file", {"file_path": path, "content": content, "reason": "plant"})
                    results.append((bool(r.is_error), "".join(getattr(b, "text", "") for b in r.content)))

    anyio.run(body)
    assert len(results) == len(PLANTED)
    for is_error, text in results:
        assert is_error and "configuration" in text, text
    store = open_store(backend_url)
    try:
        assert [i.path for i in store.all_files("agent:demo")] == ["/AGENTS.md"]
    finally:
        store.close()


def test_a_model_under_an_allow_rule_is_refused(store: SqlStore) -> None:
    RuleBook(store, "a").add("write_file(/knowledge/**)", "allow")
    agent, model, approver = make_agent(store)
    for path, content in PLANTED.items():
        model.enqueue_tool_use("write_file", {"file_path": path, "content": content})
    model.enqueue_tool_use("write_file", {"file_path": "/knowledge/ok.md", "content": "ok\n"})
    model.enqueue_text("done")
    agent.turn("plant a repository")
    for index in range(1, len(PLANTED) + 1):
        result = last_tool_result(model, index)
        assert result["is_error"] and "configuration" in str(result["content"]), result
    assert not last_tool_result(model, len(PLANTED) + 1).get("is_error")
    assert approver.asked == []
    # The rule is in force (the ordinary note went in by it); the repository did not.
    assert [i.path for i in store.all_files(S)] == ["/knowledge/ok.md"]
    assert store.history(S, "/knowledge/ok.md")[-1].approval == "rule"


# -- a database from before the rule ------------------------------------------------------------


def plant_old(url: str, planted: dict[str, str], agent: str = "ra") -> None:
    """An agent written before the rule: the planted files stored through the trusted path, unvalidated."""
    store = open_store(url)
    try:
        store.create_agent(agent, {"/AGENTS.md": "# Agent\n\nBe brief.\n", "/knowledge/ann.md": "# Ann\n",
                                   "/skills/notes/SKILL.md": SKILL})
        old = SqlStore(store.engine, validator=lambda _path, _content: [])  # the rules of an older release
        for path, content in planted.items():
            old.write(f"agent:{agent}", path, content)
    finally:
        store.close()


def test_validate_reports_an_old_nested_repository(backend_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMAGENT_DB", backend_url)
    planted = PLANTED | {"/skills/notes/.git/config": PLANTED["/knowledge/.git/config"]}
    plant_old(backend_url, planted)
    p = run("validate", "ra", env={"COLUMNS": "250"})
    assert p.returncode == 1
    text = out(p) + err(p)
    for path in planted:
        assert path in text, path
    assert "configuration" in text and "Traceback" not in text


def memory_with(planted: dict[str, str]) -> dict[str, str]:
    return {"/AGENTS.md": "# Agent\n", "/knowledge/ann.md": "# Ann\n", "/skills/notes/SKILL.md": SKILL, **planted}


@pytest.mark.parametrize("name", list(FORMATS))
def test_no_format_exports_a_nested_repository(name: str) -> None:
    planted = PLANTED | {"/skills/notes/.git/config": PLANTED["/knowledge/.git/config"]}
    with pytest.raises(FormatError) as caught:
        export_agent(get_format(name), memory_with(planted), ExportOptions(agent="ra"))
    message = str(caught.value)
    assert "\n" not in message
    for path in planted:
        assert path in message, path


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))
            if ".git" not in p.relative_to(root).parts[:1]}


def git_status(folder: Path) -> None:
    subprocess.run(["git", "status", "--short"], cwd=folder, capture_output=True, timeout=60)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize("name", list(FORMATS))
def test_an_old_nested_repository_never_reaches_a_checkout(name: str, tmp_path: Path, migrated_sqlite_template: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # A new database as memagent leaves it after its first start (conftest's migrated template).
    shutil.copyfile(migrated_sqlite_template, tmp_path / "old.db")
    url = f"sqlite:///{tmp_path / 'old.db'}"
    monkeypatch.setenv("MEMAGENT_DB", url)
    marker = tmp_path / "PWNED"
    planted = nested_repo("/knowledge", marker) | nested_repo("/skills/notes", marker)
    plant_old(url, planted)
    # A person's repository that already has a knowledge/ folder: the export goes in with --force.
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, capture_output=True)
    (repo / "knowledge").mkdir()
    (repo / "knowledge" / "mine.md").write_text("mine\n")
    before = snapshot(repo)
    for args in ((), ("--zip",)):
        target = repo if not args else tmp_path / "out.zip"
        p = run("export", "ra", str(target), "--format", name, "--force", *args)
        assert p.returncode == 1, out(p)
        assert "/knowledge/.git/config" in err(p) and "/skills/notes/.git/config" in err(p), err(p)
        assert len(err(p).strip().splitlines()) == 1 and "Traceback" not in err(p)
    assert not (tmp_path / "out.zip").exists()
    assert snapshot(repo) == before
    # Where a shell prompt runs it: the checkout, and every folder that would have held the repository.
    folders = [repo, repo / "knowledge"] + [d.parent for d in repo.rglob(".git") if d.parent != repo]
    for folder in folders:
        git_status(folder)
    assert not marker.exists()


# -- import agrees --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["knowledge/mise.toml", "knowledge/.envrc", "skills/notes/.gitattributes",
                                  "skills/notes/opencode.json"])
def test_import_leaves_nested_configuration_behind_naming_it(path: str) -> None:
    tree = {"AGENTS.md": b"# A\n", "knowledge/a.md": b"a\n", "skills/notes/SKILL.md": SKILL.encode(),
            path: b"x\n"}
    for name in ("folder", "deepagents"):
        result = import_tree(get_format(name), tree)
        assert "/" + path not in result.files
        assert path in {n.path for n in result.notes}, (name, result.notes)
        assert "/knowledge/a.md" in result.files


def crafted_export(path: Path, restore: dict[str, str]) -> Path:
    """A zip that looks like our own export, whose manifest 'restores' the planted files."""
    manifest = {"memagent_export": 1, "format": "folder",
                "restore": [{"path": p, "content": c, "from": {}} for p, c in restore.items()]}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("AGENTS.md", "# Agent\n")
        archive.writestr(".memagent-export.json", json.dumps(manifest))
    path.write_bytes(buffer.getvalue())
    return path


def test_import_of_a_crafted_manifest_restoring_a_nested_repository_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMAGENT_DB", f"sqlite:///{tmp_path / 'm.db'}")
    source = crafted_export(tmp_path / "evil.zip", PLANTED)
    p = run("import", str(source), "--as", "evil", "--yes")
    assert p.returncode == 1 and "Traceback" not in err(p)
    for path in PLANTED:
        assert path in err(p), path
    store = open_store(f"sqlite:///{tmp_path / 'm.db'}")
    try:
        assert "evil" not in store.list_agents()
    finally:
        store.close()

