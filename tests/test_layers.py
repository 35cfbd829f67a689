"""The layering of ARCHITECTURE.md, enforced: who may import whom, and no cycles.

Imports are read from the source (every ``import`` statement, including those
inside functions, but not those under ``if TYPE_CHECKING:``, which never run), so
a lazy import cannot hide a forbidden edge. A second check imports each layer in
a fresh interpreter and looks at what ``sys.modules`` then holds.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Repository folder -> import package (pyproject's package-dir).
FOLDERS = {"vfs": "memagent.vfs", "validators": "memagent.validators", "agent": "memagent.agent",
           "integrations": "memagent.integrations"}
UI_LIBS = ("click", "rich", "prompt_toolkit")


def _modules() -> Iterator[tuple[str, Path]]:
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if "migrations" in parts:
                continue  # Alembic scripts: frozen schema, loaded by Alembic
            yield ".".join([package, *parts]), path


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(module: str, path: Path) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"))
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            # ``from memagent.agent import loop`` imports the submodule loop.
            found.update(f"{target}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


MODULES = dict(_modules())
GRAPH = {m: {i for i in _imports(m, p) if i in MODULES} for m, p in MODULES.items()}
EXTERNAL = {m: {i.split(".")[0] for i in _imports(m, p) if not i.startswith("memagent")}
            for m, p in MODULES.items()}

# The layers, bottom first. A module belongs to the longest prefix that names it.
LAYERS = {
    "memagent.validators": "validators",
    "memagent.vfs": "vfs",
    "memagent.agent.model": "model",
    "memagent.agent.mcp": "mcp",
    "memagent.agent.tools": "tools",
    "memagent.agent": "core",
    "memagent.agent.formats": "formats",
    "memagent.agent.chat.ui": "chat",
    "memagent.agent.chat": "chat",
    "memagent.agent.serve": "serve",
    "memagent.agent.cli": "cli",
    "memagent.integrations": "integrations",
}
MAY_IMPORT = {
    "validators": set(),
    "vfs": {"validators"},
    "model": set(),
    "mcp": {"vfs", "validators"},
    "tools": {"mcp", "vfs", "validators"},
    "core": {"model", "mcp", "tools", "vfs", "validators"},
    "formats": {"vfs", "validators"},
    # Adapters for other programs (Anthropic memory tool, deepagents): the store and its
    # validators only. No layer lists them, so nothing in memagent imports an adapter.
    "integrations": {"vfs", "validators"},
    "chat": {"core", "mcp", "model", "tools", "vfs", "validators"},
    # The MCP server is a front end beside the chat; neither imports the other.
    "serve": {"core", "mcp", "tools", "vfs", "validators"},
    "cli": {"chat", "core", "formats", "mcp", "model", "serve", "tools", "vfs", "validators"},
}
# Where click, rich and prompt_toolkit may appear (the front ends only).
UI_ALLOWED = {"chat": {"rich", "prompt_toolkit"}, "cli": {"click", "rich"}}


def layer(module: str) -> str:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


def test_the_layers_cover_every_module() -> None:
    assert len(MODULES) > 40
    # Every layer but the optional ones holds modules.
    assert {layer(m) for m in MODULES} >= set(MAY_IMPORT) - {"formats"}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_the_layers(module: str) -> None:
    mine = layer(module)
    bad = sorted(i for i in GRAPH[module] if layer(i) != mine and layer(i) not in MAY_IMPORT[mine])
    assert not bad, f"{module} ({mine}) may not import {bad} ({[layer(b) for b in bad]})"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_ui_libraries_stay_in_the_front_ends(module: str) -> None:
    allowed = UI_ALLOWED.get(layer(module), set())
    used = sorted(lib for lib in UI_LIBS if lib in EXTERNAL[module] and lib not in allowed)
    assert not used, f"{module} ({layer(module)}) imports {used}"


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (as a path that returns to its start), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _ancestor(package: str, module: str) -> bool:
    """Importing a parent package of ``module`` happens anyway before ``module`` runs."""
    return module.startswith(package + ".")


def test_no_import_cycle_among_modules() -> None:
    graph = {m: {t for t in ts if not _ancestor(t, m)} for m, ts in GRAPH.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def _package(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rsplit(".", 1)[0]


def test_no_import_cycle_among_packages() -> None:
    packages: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        src = _package(module)
        edges = packages.setdefault(src, set())
        edges.update(dst for dst in map(_package, targets) if dst != src and not _ancestor(dst, src))
    assert {"memagent.agent", "memagent.agent.tools", "memagent.vfs"} <= set(packages)
    cycle = _cycle(packages)
    assert cycle is None, " -> ".join(cycle or [])


def test_the_detector_finds_cycles() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


PROBE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))
"""


@pytest.mark.parametrize("module,forbidden", [
    ("memagent.vfs", {"click", "rich", "prompt_toolkit", "anthropic"}),
    ("memagent.validators", {"click", "rich", "prompt_toolkit", "anthropic"}),
    ("memagent.agent.loop", {"click", "rich", "prompt_toolkit", "anthropic"}),
    ("memagent.agent.builder", {"click", "rich", "prompt_toolkit", "anthropic"}),
    ("memagent.agent.tools", {"click", "rich", "prompt_toolkit", "anthropic"}),
    ("memagent.agent.mcp", {"click", "rich", "prompt_toolkit", "anthropic", "mcp"}),
    ("memagent.agent.model", {"click", "rich", "prompt_toolkit", "anthropic"}),
    ("memagent.agent.chat.session", {"click", "anthropic"}),
    # The adapters' package loads no third-party harness until a submodule is imported.
    ("memagent.integrations", {"click", "rich", "prompt_toolkit", "anthropic", "deepagents", "langchain_core",
                               "langgraph"}),
    ("memagent.agent.serve", {"click", "rich", "prompt_toolkit", "anthropic", "mcp"}),
])
def test_importing_a_layer_loads_nothing_above_it(module: str, forbidden: set[str]) -> None:
    out = subprocess.run([sys.executable, "-c", PROBE, module], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    loaded = set(json.loads(out.stdout))
    assert not loaded & forbidden, f"importing {module} loaded {sorted(loaded & forbidden)}"
    below = {"memagent.vfs": "memagent.agent", "memagent.validators": "memagent.agent"}
    if module in below:
        check = subprocess.run(
            [sys.executable, "-c", f"import importlib, sys; importlib.import_module({module!r}); "
             f"print(any(m.startswith({below[module]!r}) for m in sys.modules))"],
            capture_output=True, text=True, check=True, cwd=ROOT)
        assert check.stdout.strip() == "False"
