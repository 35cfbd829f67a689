"""``memagent.vfs``'s public face (issue 38): the names code outside ``vfs`` may import.

The list is pinned here, as httpx's ``tests/test_exported_members.py`` pins its own:
adding or removing a public name is a deliberate edit of this file. Every name
resolves; none is also the name of a ``vfs`` module (importing that module would
replace the package's attribute); the ``TYPE_CHECKING`` imports mypy reads and the
``_LAZY`` table the interpreter reads say the same thing; and ``import memagent.vfs``
stays as cheap as the store: nothing only a search or another command needs (the
lists of tests/test_startup_imports.py), and none of the modules behind the lazy names.
tests/test_layers.py checks the other side: nothing outside ``vfs`` imports a module
inside it.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import memagent.vfs as vfs
from tests.test_startup_imports import EMBEDDER_MODULES, OTHER_COMMANDS, SEARCH_ONLY

ROOT = Path(__file__).resolve().parent.parent

PUBLIC = [
    "Action", "AgentNotFound", "AgentView", "AlreadyExists", "Approval", "Author", "Busy", "Change", "ChangedSince",
    "DEFAULT_SEARCH_MODE", "DatabaseMissing", "DatabaseUnavailable", "EmbedderError", "FileContent", "FileInfo",
    "FileTool", "GrantKind", "INTEGRATION_PREFIX", "InvalidPath", "InvalidPattern", "IsADirectory", "MCP_PREFIX",
    "MOUNTS", "Match", "Memory", "NewProposal", "NotFound", "Origin", "PendingChange", "Proposal", "ProposalOp",
    "ProposalStore", "QUEUED_BY", "REASON_CHARS", "RESERVED_PREFIXES", "RULES_PATH", "Rule", "RuleBook", "RuleError",
    "SCHEMA_HEAD", "SEARCH_MODES", "SearchHit", "SearchMode", "SqlStore", "StaleVersion", "Store", "TOOL_OF_OP",
    "ThreadMessage", "ThreadStore", "ValidationFailed", "VfsError", "WritePolicy", "WriteRefused", "WriteRequest",
    "WriteVerdict", "apply_edit", "approved_policy", "asking_policy", "built_in_message", "check_agent_name",
    "check_message", "check_role_name", "check_search_mode", "compile_glob", "connect_database", "create_role",
    "describe_grants", "dir_prefix", "drop_role", "grant_role", "human_size", "memory_of", "move_file",
    "no_agent_message", "normalize_file", "normalize_path", "open_memory", "open_store", "parse_rule", "path_basename",
    "queue_policy", "reason_line", "refusing_policy", "render_blame", "render_grep", "render_log", "render_ls",
    "render_message", "render_numbered", "render_search", "require_change", "require_postgres_url", "revoke_role",
    "role_grants", "scope_name", "scopes_of_grant", "shown", "submit_change", "typed_part", "unified_diff",
    "upgrade_database", "when", "yolo_policy",
]


def test_the_public_names_are_pinned() -> None:
    assert sorted(vfs.__all__) == PUBLIC
    assert len(set(vfs.__all__)) == len(vfs.__all__)


def test_every_public_name_resolves_to_what_its_module_defines() -> None:
    for name in PUBLIC:
        assert getattr(vfs, name) is not None, name
    for name, (module, attr) in vfs._LAZY.items():
        defining = __import__(f"memagent.vfs.{module}", fromlist=[attr])
        assert getattr(vfs, name) is getattr(defining, attr), name
    assert "from_the_inside" not in dir(vfs)
    with pytest.raises(AttributeError, match="from_the_inside"):
        getattr(vfs, "from_the_inside")  # noqa: B009
    assert set(PUBLIC) <= set(dir(vfs))


def test_no_public_name_is_a_module_name() -> None:
    modules = {m.name for m in pkgutil.iter_modules(vfs.__path__)}
    assert {"entrance", "paths", "render", "files", "grep", "records"} <= modules
    assert not modules & set(PUBLIC)


def _type_checking_imports() -> dict[str, tuple[str, str]]:
    """Public name -> (module, name there), from ``vfs/__init__.py``'s ``if TYPE_CHECKING:`` block."""
    tree = ast.parse((ROOT / "vfs" / "__init__.py").read_text("utf-8"))
    found: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module, ast.dump(stmt)
                for alias in stmt.names:
                    found[alias.asname or alias.name] = (stmt.module.removeprefix("memagent.vfs."), alias.name)
    return found


def test_what_mypy_sees_is_what_runs() -> None:
    assert _type_checking_imports() == vfs._LAZY
    eager = {"SqlStore", "Store", "open_store"}
    assert set(vfs._LAZY) | eager == set(PUBLIC) and not set(vfs._LAZY) & eager


PROBE = "import json, sys; import memagent.vfs; print(json.dumps(sorted(sys.modules)))"


def test_importing_the_face_loads_only_what_the_store_needs() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = set(json.loads(out.stdout))
    tops = {m.partition(".")[0] for m in loaded}
    assert tops.isdisjoint(SEARCH_ONLY + OTHER_COMMANDS), sorted(tops & {*SEARCH_ONLY, *OTHER_COMMANDS})
    assert loaded.isdisjoint(EMBEDDER_MODULES)
    assert "memagent.vfs.files.store" in loaded
    # The modules behind the lazy names that the store does not use load on first use.
    lazy = {f"memagent.vfs.{m}" for m in ("records.rules", "records.episodes", "memory", "records.queue", "render",
                                          "scopes", "terminal_text", "records.threads", "entrance")}
    assert lazy <= {f"memagent.vfs.{module}" for module, _ in vfs._LAZY.values()}
    assert loaded.isdisjoint(lazy), sorted(loaded & lazy)


# -- the sub-packages' faces -------------------------------------------------------------

SUBSYSTEMS = ("files", "grep", "records", "search")


@pytest.mark.parametrize("package", SUBSYSTEMS)
def test_each_subsystem_has_a_face_that_says_what_runs(package: str) -> None:
    """Each sub-package's ``__all__`` is its ``_LAZY`` table and its ``TYPE_CHECKING`` imports,
    every name is what its module defines, and the face itself imports none of its modules."""
    face = __import__(f"memagent.vfs.{package}", fromlist=["_LAZY"])
    tree = ast.parse((ROOT / "vfs" / package / "__init__.py").read_text("utf-8"))
    assert ast.get_docstring(tree), package
    typed: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module, ast.dump(stmt)
                typed.update({a.name: stmt.module.removeprefix(f"memagent.vfs.{package}.") for a in stmt.names})
    assert typed == face._LAZY and sorted(face.__all__) == sorted(face._LAZY), package
    for name, module in face._LAZY.items():
        defining = __import__(f"memagent.vfs.{package}.{module}", fromlist=[name])
        assert getattr(face, name) is getattr(defining, name), (package, name)
    # Importing the face loads nothing that ``import memagent.vfs`` (the store) does not load already.
    loaded = []
    for probe in (PROBE, PROBE.replace("import memagent.vfs;", f"import memagent.vfs.{package};")):
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
        loaded.append(set(json.loads(out.stdout)))
    assert loaded[1] - loaded[0] <= {f"memagent.vfs.{package}"}, sorted(loaded[1] - loaded[0])
