"""Starter agents shipped in ``skills_templates/templates/<name>/``.

A template is a folder of memory files copied verbatim into a new agent; the copy
is validated like any write, so a broken template cannot create a broken agent.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

from memagent.vfs import VfsError

DEFAULT_TEMPLATE = "empty"


def _root() -> Traversable:
    return resources.files("memagent.skills_templates").joinpath("templates")


def names() -> list[str]:
    return sorted(p.name for p in _root().iterdir() if p.is_dir() and not p.name.startswith("_"))


def describe(name: str) -> str:
    """One line saying what the template is: its ``_description.txt``, else its AGENTS.md's first line."""
    folder = _root().joinpath(name)
    about = folder.joinpath("_description.txt")
    if about.is_file():
        return about.read_text("utf-8").strip().splitlines()[0]
    agents = folder.joinpath("AGENTS.md")
    first = next((line.strip("# ").strip() for line in agents.read_text("utf-8").splitlines() if line.strip()), "") \
        if agents.is_file() else ""
    return first or "(no description)"


def files(name: str) -> dict[str, str]:
    """The template's files as {memory path: content}."""
    if name not in names():
        raise VfsError(f"no template named {name!r}; choose one of: {', '.join(names())}")
    out: dict[str, str] = {}

    def walk(node: Traversable, prefix: str) -> None:
        for child in node.iterdir():
            if child.name.startswith(("_", ".")):
                continue
            if child.is_dir():
                walk(child, f"{prefix}/{child.name}")
            else:
                out[f"{prefix}/{child.name}"] = child.read_text("utf-8")

    walk(_root().joinpath(name), "")
    return out
