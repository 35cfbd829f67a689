"""What a command imports before it does its work (issue 44).

``memagent fs cat`` and ``memagent --help`` sit at the floor of start-up: the store
(sqlalchemy) and nothing only a search needs. numpy and the embedders load with the
first semantic or hybrid search (``vfs/embeddings/base.py``, ``index.py``), and the
model SDKs, the MCP SDK and the terminal libraries with the commands that use them.
Each command runs in a fresh interpreter that prints the top-level modules it
imported when the command ends; the time itself is ``bench/startup.py``'s.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import err, run

# Modules only a search or another command needs: never imported by ``fs cat`` or ``--help``.
SEARCH_ONLY = ("numpy", "wordllama", "fastembed")
OTHER_COMMANDS = ("anthropic", "openai", "httpx", "mcp", "rich", "prompt_toolkit", "re2", "jsonschema")
EMBEDDER_MODULES = ("memagent.vfs.embeddings.registry", "memagent.agent.model.embedders")
# The write entrance and the agent records (review queue, threads): a read needs none of them.
WRITE_ONLY = ("memagent.vfs.entrance", "memagent.vfs.records.queue", "memagent.vfs.records.threads",
              "memagent.vfs.records.conversation_files")

# Runs ``memagent ARGS...`` in this interpreter and, however it ends, writes the names
# of the modules it imported (top-level ones, then memagent's own) to the file argv[1].
PROBE = """
import sys
out, argv = sys.argv[1], sys.argv[2:]
try:
    from memagent.agent.cli.main import main
    main(argv, prog_name="memagent")
finally:
    names = sorted({m.partition(".")[0] for m in sys.modules} | {m for m in sys.modules if m.startswith("memagent.")})
    with open(out, "w") as f:
        f.write("\\n".join(names))
"""


def imported(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run the command; its result and the modules it imported."""
    out = tmp_path / "modules.txt"
    proc = subprocess.run([sys.executable, "-c", PROBE, str(out), *args], capture_output=True, text=True,
                          timeout=120)
    return proc, set(out.read_text().split())


@pytest.fixture(autouse=True)
def default_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMAGENT_EMBEDDER", raising=False)


def test_help_imports_nothing_only_a_search_or_another_command_needs(tmp_path: Path) -> None:
    proc, modules = imported(tmp_path, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "fs" in proc.stdout
    assert modules.isdisjoint(SEARCH_ONLY + OTHER_COMMANDS + EMBEDDER_MODULES), \
        sorted(modules & {*SEARCH_ONLY, *OTHER_COMMANDS, *EMBEDDER_MODULES})
    # The listing comes from the command table: no command module, no store, no validators.
    assert "sqlalchemy" not in modules and "yaml" not in modules
    assert {m for m in modules if m.startswith("memagent.")} <= {
        "memagent.agent", "memagent.agent.cli", "memagent.agent.cli.main", "memagent.agent.cli.lazy"}


def test_fs_cat_imports_the_store_and_nothing_only_a_search_needs(tmp_path: Path) -> None:
    assert run("init", "demo").returncode == 0
    assert run("fs", "write", "/notes.md", "-a", "demo", stdin="Flat white with oat milk.\n").returncode == 0
    proc, modules = imported(tmp_path, "fs", "cat", "/notes.md", "-a", "demo")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Flat white with oat milk.\n"
    assert "sqlalchemy" in modules and "memagent.vfs.files.store" in modules
    assert modules.isdisjoint(SEARCH_ONLY + OTHER_COMMANDS + EMBEDDER_MODULES), \
        sorted(modules & {*SEARCH_ONLY, *OTHER_COMMANDS, *EMBEDDER_MODULES})
    # Nor the export formats, the chat or the validators' YAML: cat only reads.
    assert "yaml" not in modules and "memagent.agent.chat" not in modules
    # Nor the write entrance and the agent records behind it.
    assert modules.isdisjoint(WRITE_ONLY), sorted(modules & set(WRITE_ONLY))


def test_a_hybrid_search_loads_numpy_and_the_embedder_on_demand(tmp_path: Path) -> None:
    assert run("init", "demo").returncode == 0
    run("fs", "write", "/preferences/coffee.md", "-a", "demo", stdin="Flat white with oat milk, never sugar.\n")
    run("fs", "write", "/home/garden.md", "-a", "demo", stdin="Water the tomatoes every morning.\n")
    proc, modules = imported(tmp_path, "fs", "search", "which espresso drink should I order", "-a", "demo")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("1. /preferences/coffee.md")  # found by meaning only
    assert {"numpy", "wordllama", "memagent.vfs.embeddings.registry"} <= modules
    # The installed command answers the same.
    p = run("fs", "search", "which espresso drink should I order", "-a", "demo")
    assert p.returncode == 0 and p.stdout.decode().startswith("1. /preferences/coffee.md"), err(p)
