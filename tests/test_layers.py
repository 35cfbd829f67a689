"""The layering of ARCHITECTURE.md, enforced: who may import whom, and no cycles.

The packages are discovered, not listed: every package of pyproject's
``package-dir`` (``memagent`` and the folders mapped under it) and every other
top-level folder with an ``__init__.py`` (``bench``, ``tests``, any new one), with
every folder of Python files below them. Each discovered package must be named in
``LAYERS``, so a new package fails here, by name, until it is given a layer.

Imports are read from the source (every ``import`` statement, including those
inside functions, but not those under ``if TYPE_CHECKING:``, which never run), so
a lazy import cannot hide a forbidden edge. A second check imports each layer in
a fresh interpreter and looks at what ``sys.modules`` then holds.

Outside ``vfs`` the product sees one package: the agent, the front ends and the
integrations import from ``memagent.vfs`` (its ``__all__``) and never from a
``memagent.vfs.<module>``, not even under ``TYPE_CHECKING``; a failure names the file
and line.

Model providers stay in the model layer: outside ``agent/model/`` no product module
imports a provider SDK (``anthropic``, ``openai``; the Anthropic memory-tool adapter
excepted), names a provider's model class (every ``*Model`` class defined in
``agent/model/providers/`` and ``anthropic_client.py``) or names a variable a
provider reads (every provider's ``env_vars``). Everything else makes its model
through ``agent/model/registry.py``.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
UI_LIBS = ("click", "rich", "prompt_toolkit")


def package_roots(root: Path) -> dict[str, Path]:
    """Top-level import package -> its folder: pyproject's package-dir, then unmapped package folders."""
    config = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    roots = {package: (root / folder).resolve() for package, folder in mapping.items()}
    # Only the top-level names: "memagent.vfs" is found again as a folder of "memagent".
    mapped = set(roots.values())
    for folder in sorted(root.iterdir()):
        if (folder.is_dir() and not folder.name.startswith(".") and (folder / "__init__.py").is_file()
                and folder.resolve() not in mapped):
            roots[folder.name] = folder.resolve()
    return roots


def discover(root: Path) -> dict[str, Path]:
    """Every module of every discovered package: dotted name -> file."""
    roots = package_roots(root)
    # A folder mapped to a package of its own is walked as that package, never as a child.
    owner = {folder: package for package, folder in roots.items()}
    found: dict[str, Path] = {}

    def walk(package: str, folder: Path) -> None:
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.suffix == ".py":
                name = package if path.name == "__init__.py" else f"{package}.{path.stem}"
                found[name] = path
            elif (path.is_dir() and path.resolve() not in owner and not path.name.startswith((".", "__"))
                  and (folder != root or (path / "__init__.py").is_file())):
                # At the repository root only package folders count (scripts/ is not one).
                walk(f"{package}.{path.name}", path)

    for package, folder in roots.items():
        walk(package, folder)
    return found


def packages(modules: dict[str, Path]) -> set[str]:
    """The packages (folders of Python files, with or without ``__init__.py``) holding ``modules``."""
    return {name if path.name == "__init__.py" else name.rsplit(".", 1)[0] for name, path in modules.items()}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_sites(module: str, path: Path, *, type_checking: bool = False) -> list[tuple[str, int]]:
    """Each name ``module`` imports, with the line of its statement; the imports under
    ``if TYPE_CHECKING:`` only when ``type_checking`` is true."""
    tree = ast.parse(path.read_text("utf-8"))
    is_package = path.name == "__init__.py"
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_checking:
            for stmt in node.orelse:
                visit(stmt)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((target, node.lineno))
            # ``from memagent.agent import loop`` imports the submodule loop.
            found.extend((f"{target}.{alias.name}", node.lineno) for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _imports(module: str, path: Path) -> set[str]:
    return {target for target, _ in _import_sites(module, path)}


MODULES = discover(ROOT)
PACKAGES = packages(MODULES)
GRAPH = {m: {i for i in _imports(m, p) if i in MODULES} for m, p in MODULES.items()}
EXTERNAL = {m: {i.split(".")[0] for i in _imports(m, p) if not i.startswith("memagent")}
            for m, p in MODULES.items()}

# The layers, bottom first. A module belongs to the longest prefix that names it.
# Every discovered package is a key here (test_every_package_has_a_layer).
LAYERS = {
    "memagent": "root",  # the distribution's package: a docstring and __version__
    "memagent.skills_templates": "templates",  # starter memory as package data, read by importlib.resources
    "memagent.validators": "validators",
    "memagent.validators.secrets": "validators",
    "memagent.vfs": "vfs",
    "memagent.vfs.migrations": "vfs",
    "memagent.vfs.migrations.versions": "vfs",
    "memagent.vfs.embeddings": "vfs",
    "memagent.vfs.embeddings.providers": "vfs",
    "memagent.vfs.backends": "vfs",
    "memagent.vfs.files": "vfs",
    "memagent.vfs.grep": "vfs",
    "memagent.vfs.records": "vfs",
    "memagent.vfs.search": "vfs",
    "memagent.agent.model": "model",
    "memagent.agent.model.providers": "model",
    "memagent.agent.mcp": "mcp",
    "memagent.agent.tools": "tools",
    "memagent.agent": "core",
    "memagent.agent.formats": "formats",
    "memagent.agent.chat.ui": "chat",
    "memagent.agent.chat": "chat",
    "memagent.agent.serve": "serve",
    "memagent.agent.evals": "evals",
    "memagent.agent.cli": "cli",
    "memagent.integrations": "integrations",
    "bench": "bench",
    "tests": "tests",
    "tests.mcp_servers": "tests",
    "tests.interop": "tests",
}
PRODUCT = {"validators", "vfs", "model", "mcp", "tools", "core", "formats", "chat", "serve", "cli",
           "integrations", "templates", "evals"}
MAY_IMPORT = {
    "root": set(),
    "templates": set(),
    "validators": set(),
    "vfs": {"validators"},
    "model": set(),
    "mcp": {"vfs", "validators"},
    "tools": {"mcp", "vfs", "validators"},
    "core": {"model", "mcp", "tools", "vfs", "validators"},
    "formats": {"vfs", "validators"},
    # Adapters for other programs (Anthropic memory tool, deepagents): the store and its
    # validators only. Only bench and tests list them, so nothing in memagent imports an adapter.
    "integrations": {"vfs", "validators"},
    "chat": {"core", "mcp", "model", "tools", "vfs", "validators"},
    # The MCP server is a front end beside the chat; neither imports the other.
    "serve": {"core", "mcp", "tools", "vfs", "validators"},
    # ``memagent eval``: scenarios run through the chat's own session and slash commands.
    "evals": {"chat", "core", "mcp", "model", "tools", "vfs", "validators"},
    "cli": {"chat", "core", "evals", "formats", "mcp", "model", "serve", "tools", "vfs", "validators"},
    # The benchmarks measure the product (and hold the Messages API double the tests use too);
    # they never import the tests, which sit above them.
    "bench": PRODUCT,
    "tests": PRODUCT | {"bench"},
}
# ``memagent`` itself (its __version__) is the package every module lives in: any layer may read it.
ANYONE_MAY_IMPORT = {"root"}
# Where click, rich and prompt_toolkit may appear (the front ends, and the tests that drive them).
UI_ALLOWED = {"chat": {"rich", "prompt_toolkit"}, "cli": {"click", "rich"}, "tests": set(UI_LIBS)}


def layer(module: str) -> str:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


def test_the_layers_cover_every_module() -> None:
    assert len(MODULES) > 40
    # Every layer but the optional ones holds modules.
    assert {layer(m) for m in MODULES} >= set(MAY_IMPORT) - {"formats"}


def test_discovery_finds_every_top_level_package() -> None:
    assert {"memagent", "memagent.vfs", "memagent.validators", "memagent.agent", "memagent.integrations",
            "memagent.agent.chat", "bench", "tests"} <= PACKAGES
    assert "bench.corpus" in MODULES and "tests.conftest" in MODULES
    assert not any(m.startswith("memagent.bench") or m.startswith("memagent.tests") for m in MODULES)


def test_every_package_has_a_layer() -> None:
    missing = sorted(PACKAGES - set(LAYERS))
    assert not missing, (f"no layer for {missing}: add each to LAYERS in tests/test_layers.py "
                         "(and to ARCHITECTURE.md's layer table)")
    stale = sorted(set(LAYERS) - PACKAGES)
    assert not stale, f"LAYERS names packages that no longer exist: {stale}"
    assert set(LAYERS.values()) == set(MAY_IMPORT)


def test_a_new_package_is_discovered(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools]\npackage-dir = { "pkg" = ".", "pkg.core" = "core" }\n', "utf-8")
    for rel in ("__init__.py", "core/__init__.py", "core/deep/mod.py", "extra/__init__.py", "extra/x.py",
                "scripts/tool.py", ".hidden/__init__.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("", "utf-8")
    found = discover(tmp_path)
    assert sorted(found) == ["extra", "extra.x", "pkg", "pkg.core", "pkg.core.deep.mod"]
    assert packages(found) == {"extra", "pkg", "pkg.core", "pkg.core.deep"}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_the_layers(module: str) -> None:
    mine = layer(module)
    bad = sorted(i for i in GRAPH[module] if layer(i) != mine
                 and layer(i) not in MAY_IMPORT[mine] | ANYONE_MAY_IMPORT)
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
    ("memagent.vfs", {"click", "rich", "prompt_toolkit", "anthropic", "openai"}),
    ("memagent.validators", {"click", "rich", "prompt_toolkit", "anthropic", "openai"}),
    ("memagent.agent.loop", {"click", "rich", "prompt_toolkit", "anthropic", "openai"}),
    ("memagent.agent.builder", {"click", "rich", "prompt_toolkit", "anthropic", "openai"}),
    ("memagent.agent.tools", {"click", "rich", "prompt_toolkit", "anthropic", "openai"}),
    ("memagent.agent.mcp", {"click", "rich", "prompt_toolkit", "anthropic", "openai", "mcp"}),
    ("memagent.agent.model", {"click", "rich", "prompt_toolkit", "anthropic", "openai"}),
    ("memagent.agent.model.registry", {"click", "rich", "prompt_toolkit", "anthropic", "openai"}),
    ("memagent.agent.chat.session", {"click", "anthropic", "openai"}),
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


# -- outside vfs, memagent.vfs is one package ----------------------------------------------

VFS_INTERNAL = sorted(m for m in MODULES if m.startswith("memagent.vfs."))


def _vfs_internals_used(module: str, path: Path) -> list[str]:
    """``file:line: name`` for each import of a ``memagent.vfs.<module>`` (including the
    ``TYPE_CHECKING`` ones and ``from memagent.vfs import <submodule>``)."""
    internal = set(VFS_INTERNAL)
    return [f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line}: {target}"
            for target, line in _import_sites(module, path, type_checking=True) if target in internal]


def test_outside_vfs_the_product_imports_memagent_vfs_only() -> None:
    """The agent, the front ends and the integrations take what they need from
    ``memagent.vfs`` (its ``__all__``, pinned in tests/test_vfs_public_face.py), never from
    a module inside it. Bench and tests may reach inside."""
    outside = sorted(m for m in MODULES if layer(m) in PRODUCT - {"vfs"})
    assert "memagent.agent.tools.memory" in outside and "memagent.integrations._folder" in outside
    found = [site for m in outside for site in _vfs_internals_used(m, MODULES[m])]
    assert not found, ("outside vfs, import from memagent.vfs only (add the name to its __all__ and "
                       "_LAZY if it is missing):\n" + "\n".join(found))


def test_the_vfs_face_check_catches_an_internal_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from memagent.vfs import ThreadStore\n"
                   "from memagent.vfs.records.queue import ProposalStore\n"
                   "def f():\n    from memagent.vfs import entrance\n"
                   "import memagent.vfs.render\n"
                   "if TYPE_CHECKING:\n    from memagent.vfs.types import Change\n", "utf-8")
    found = _vfs_internals_used("bad", bad)
    assert [site.split(":", 1)[1] for site in found] == [
        "2: memagent.vfs.records.queue", "4: memagent.vfs.entrance", "5: memagent.vfs.render", "7: memagent.vfs.types"]


# -- model providers stay in the model layer ------------------------------------------------

PROVIDER_SDKS = ("anthropic", "openai")
# Who else may import a provider SDK: the Anthropic memory-tool adapter (it implements the
# SDK's memory-tool classes), and bench and tests (fake servers, SDK-level checks).
SDK_ALLOWED = {"memagent.integrations.anthropic": {"anthropic"}}
MODEL_DIR = ROOT / "agent" / "model"


def _provider_classes() -> set[str]:
    """Every ``*Model`` class the providers define (their model classes)."""
    files = [*sorted((MODEL_DIR / "providers").glob("*.py")), MODEL_DIR / "anthropic_client.py"]
    return {node.name for f in files for node in ast.walk(ast.parse(f.read_text("utf-8")))
            if isinstance(node, ast.ClassDef) and node.name.endswith("Model")}


def _provider_variables() -> set[str]:
    """Every environment variable a built-in or installed provider says it reads."""
    from memagent.agent.model import registry

    return {var for provider in registry.providers().values() for var in provider.env_vars}


PROVIDER_NAMES = _provider_classes() | _provider_variables()
OUTSIDE_MODEL = sorted(m for m in MODULES if layer(m) in PRODUCT - {"model"})


def test_the_provider_names_are_found() -> None:
    assert {"AnthropicModel", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"} <= PROVIDER_NAMES


@pytest.mark.parametrize("module", sorted(MODULES))
def test_provider_sdks_stay_in_the_model_layer(module: str) -> None:
    if layer(module) in ("model", "bench", "tests"):
        return
    allowed = SDK_ALLOWED.get(module, set())
    used = sorted(sdk for sdk in PROVIDER_SDKS if sdk in EXTERNAL[module] and sdk not in allowed)
    assert not used, (f"{module} ({layer(module)}) imports {used}: only agent/model/ talks to a "
                      "provider; make the model with agent.model.registry.build")


@pytest.mark.parametrize("module", OUTSIDE_MODEL)
def test_no_provider_is_named_outside_the_model_layer(module: str) -> None:
    source = MODULES[module].read_text("utf-8")
    named = sorted(n for n in PROVIDER_NAMES if re.search(rf"\b{re.escape(n)}\b", source))
    assert not named, (f"{module} ({layer(module)}) names {named}: provider classes and variables "
                       "belong to agent/model/providers/; go through agent.model.registry")


def test_the_provider_checks_catch_a_module_that_names_one(tmp_path: Path) -> None:
    bad = "import os\nkey = os.environ['ANTHROPIC_API_KEY']\nfrom anthropic import Anthropic\n"
    (tmp_path / "bad.py").write_text(bad, "utf-8")
    assert "anthropic" in {i.split(".")[0] for i in _imports("bad", tmp_path / "bad.py")}
    assert any(re.search(rf"\b{re.escape(n)}\b", bad) for n in PROVIDER_NAMES)


def test_listing_the_providers_loads_no_sdk() -> None:
    probe = ("import json, sys; from memagent.agent.model import registry; registry.providers(); "
             "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert not set(json.loads(out.stdout)) & set(PROVIDER_SDKS)
