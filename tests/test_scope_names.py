"""Scope names and reserved mounts have one definition each, in ``memagent.vfs.paths``.

``scope_name(kind, ident)`` is the only place product code puts a scope name
together (``agent:<name>``, ``user:<id>``, ``org:<id>``, ``conversations:<agent>``),
and ``MOUNTS``/``RESERVED_PREFIXES`` the only list of the view's reserved folders.
The product's source (every package of pyproject's package-dir; not tests/ or
bench/) is read as syntax, not text, so docstrings, comments and messages that
*mention* ``agent:<name>`` are not hits, while f-strings, prefixes such as
``"conversations:" + agent`` and literal scope names are.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path
from typing import Any, cast

import pytest

from memagent.vfs.paths import MOUNTS, RESERVED_PREFIXES, SCOPE_KINDS, parse_scope, scope_name

ROOT = Path(__file__).resolve().parent.parent
# The one definition: vfs/paths.py builds scope names in scope_name and lists the mounts.
HOME = (ROOT / "vfs" / "paths.py").resolve()
KIND_PREFIXES = tuple(f"{kind}:" for kind in SCOPE_KINDS)
MOUNT_SETS = (frozenset(MOUNTS), frozenset(RESERVED_PREFIXES), frozenset(p.rstrip("/") for p in RESERVED_PREFIXES))


def product_files(root: Path) -> list[Path]:
    mapping: dict[str, str] = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))[
        "tool"]["setuptools"]["package-dir"]
    out: set[Path] = set()
    for folder in mapping.values():
        base = (root / folder).resolve()
        # The root package "." holds only its own files; its subfolders are mapped on their own.
        found = base.glob("*.py") if base == root.resolve() else base.rglob("*.py")
        out.update(p.resolve() for p in found)
    return sorted(out)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the bare string statements (docstrings and the like): prose, not code."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}


def _scope_literal(text: str) -> bool:
    """``"agent:"`` or ``"agent:bench"``: a scope prefix or name, not prose (no spaces, no markup)."""
    return text.startswith(KIND_PREFIXES) and not any(c.isspace() or c in "<`" for c in text)


def hand_built(source: str) -> list[tuple[int, str]]:
    """(line, what) for every scope name or mount list built outside ``vfs.paths``."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    # The constant parts of an f-string are judged with the f-string, not again alone.
    prose |= {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    hits: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            if (isinstance(first, ast.Constant) and isinstance(first.value, str)
                    and len(node.values) > 1 and _scope_literal(first.value)):
                hits.append((node.lineno, f"f-string {ast.unparse(node)}"))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
              and _scope_literal(node.value)):
            hits.append((node.lineno, f"literal {node.value!r}"))
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            strings = frozenset(e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
            if any(strings >= mounts for mounts in MOUNT_SETS):
                hits.append((node.lineno, f"mount list {ast.unparse(node)}"))
    return sorted(hits)


def test_the_grep_sees_every_shape() -> None:
    source = '''
"""Module docs may say ``agent:<name>`` and agent:ada."""
def f(agent: str, user: str) -> None:
    """So may docstrings: user:<id>."""
    a = f"agent:{agent}"
    b = "conversations:" + agent
    c = "agent:bench"
    d = ("user", "org", "conversations")
    e = ["/user/", "/org/", "/conversations/"]
    ok = f"agent: {agent} has no file"  # a message, not a scope
    ok2 = {"agent": agent, "user": user}
'''
    lines = [line for line, _ in hand_built(source)]
    assert lines == [5, 6, 7, 8, 9]


def test_scope_name_builds_and_parse_scope_takes_apart() -> None:
    for kind in SCOPE_KINDS:
        assert parse_scope(scope_name(kind, "a:b")) == (kind, "a:b")
    assert scope_name("agent", "ada") == "agent:ada"
    with pytest.raises(ValueError, match="not a scope name"):
        parse_scope("team:x")
    with pytest.raises(ValueError, match="unknown scope kind"):
        scope_name(cast(Any, "team"), "x")
    assert tuple(f"/{m}/" for m in MOUNTS) == RESERVED_PREFIXES


def test_product_code_builds_no_scope_name_by_hand() -> None:
    files = product_files(ROOT)
    assert HOME in files and len(files) > 40
    found = [f"{path.relative_to(ROOT)}:{line}: {what}"
             for path in files if path != HOME
             for line, what in hand_built(path.read_text("utf-8"))]
    assert not found, ("build scope names with memagent.vfs.paths.scope_name and take the reserved mounts "
                       "from paths.MOUNTS / paths.RESERVED_PREFIXES:\n" + "\n".join(found))
