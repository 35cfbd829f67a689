"""Packages discovered from the tree, so a new package folder cannot be left out of the build.

``pyproject.toml`` holds everything else (metadata, ``package-dir``, package data).
Every folder under a product root that holds a ``.py`` file is a package of the
distribution, named ``memagent.<folder path>``; ``tests/test_distribution.py`` builds
the wheel and fails, naming it, on any product module the wheel lacks.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
# The repository folders installed under ``memagent`` (pyproject's package-dir maps them).
ROOTS = ("vfs", "validators", "agent", "skills_templates", "integrations")


def discover_packages(root: Path = HERE) -> list[str]:
    """``memagent`` and ``memagent.<dotted folder>`` for each product folder holding Python code."""
    found = ["memagent"]
    for top in ROOTS:
        folders = [root / top, *(p for p in (root / top).rglob("*") if p.is_dir())]
        for folder in sorted(folders):
            if "__pycache__" in folder.parts or not any(folder.glob("*.py")):
                continue
            found.append("memagent." + ".".join(folder.relative_to(root).parts))
    return found


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import discover_packages
    setup(packages=discover_packages())
