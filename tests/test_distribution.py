"""The package as users install it: a built wheel, not the editable tree.

``pip install -e .`` maps the source folders in place, so a package the build leaves
out still imports in every other test. Here the wheel is built from a copy of the
product's files, its contents are compared with the tree (every module and data file
of every product folder must be in it, named), and it is installed into a fresh
virtual environment where the installed ``memagent`` command runs ``--help``,
``models`` (every built-in provider listed) and one scripted chat turn against the
local fake Messages API.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.fake_messages_api import FakeMessagesAPI
from setup import ROOTS

ROOT = Path(__file__).resolve().parent.parent
# The product folders are the build's own list (setup.py), not a second copy of it.
PRODUCT = ROOTS
DATA_SUFFIXES = {".md", ".yaml", ".json", ".txt", ".ini", ".mako"}
BUILT_IN_PROVIDERS = ("anthropic", "openai", "openai-compatible", "ollama")


def _product_files() -> list[Path]:
    """Every module and data file the installed package needs, relative to the root."""
    files = [Path("__init__.py")]
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*")):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            if path.suffix == ".py" or path.suffix in DATA_SUFFIXES:
                files.append(path.relative_to(ROOT))
    return files


def _copy_source(dest: Path) -> None:
    """The files a build reads, copied so the build writes nothing into the work tree."""
    dest.mkdir(parents=True)
    for name in ("pyproject.toml", "setup.py", "README.md", "__init__.py"):
        shutil.copy2(ROOT / name, dest / name)
    for top in PRODUCT:
        shutil.copytree(ROOT / top, dest / top, ignore=shutil.ignore_patterns("__pycache__"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("dist")
    _copy_source(work / "src")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "-q", "-w", str(work / "out"), str(work / "src")],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (built,) = (work / "out").glob("memagent-*.whl")
    return built


def test_the_wheel_holds_every_product_module_and_data_file(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    missing = [str(f) for f in _product_files() if f"memagent/{f.as_posix()}" not in names]
    assert not missing, f"the built wheel lacks {len(missing)} product files, e.g. {missing[:10]}"


def test_every_package_folder_is_a_package() -> None:
    """A folder of modules without ``__init__.py`` still imports from the tree (a namespace
    package) but is no package to tools that list them; every product folder has one."""
    lacking = sorted(str(p.parent.relative_to(ROOT)) for top in PRODUCT for p in (ROOT / top).rglob("*.py")
                     if "__pycache__" not in p.parts and not (p.parent / "__init__.py").exists())
    assert not lacking, f"folders of modules without __init__.py: {sorted(set(lacking))}"


def test_discovery_finds_a_new_package_folder(tmp_path: Path) -> None:
    """The build's package list is the tree's: a folder added tomorrow is in it."""
    _copy_source(tmp_path / "src")
    (tmp_path / "src" / "agent" / "brand_new").mkdir()
    (tmp_path / "src" / "agent" / "brand_new" / "__init__.py").write_text('"""New."""\n', "utf-8")
    proc = subprocess.run(
        [sys.executable, "-c", "import json, setup; print(json.dumps(setup.discover_packages()))"],
        cwd=tmp_path / "src", capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    packages = json.loads(proc.stdout)
    assert "memagent.agent.brand_new" in packages
    assert "memagent.agent.model.providers" in packages


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh virtual environment with the wheel installed (dependencies from the index pip uses)."""
    env_dir = tmp_path_factory.mktemp("venv") / "v"
    # No pip of its own (ensurepip costs seconds): this process's pip installs into it
    # (``--python``), resolving the dependencies from the index as any user's pip would.
    # ``--no-compile``: byte-compiling every dependency is most of an install's time, and
    # the three commands below compile only what they import.
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-compile",
                           "--disable-pip-version-check", str(wheel)],
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    yield env_dir / "bin" / "memagent"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR")}
    return {**keep, "HOME": str(tmp_path / "home"), "MEMAGENT_HOME": str(tmp_path / "mh"),
            "NO_COLOR": "1", **extra}


def _show(title: str, proc: subprocess.CompletedProcess[str]) -> None:
    """What the installed command printed, kept in the test's output (-rA shows it)."""
    print(f"--- {title} (exit {proc.returncode})\n{proc.stdout}{proc.stderr}")


def test_the_installed_command_runs_help_models_and_a_chat_turn(installed: Path, tmp_path: Path) -> None:
    # Nothing of the work tree may be importable: run from an empty folder.
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = _env(tmp_path)
    where = subprocess.run([str(installed.with_name("python")), "-c",
                            "import memagent, pathlib; print(pathlib.Path(memagent.__file__).parent)"],
                           capture_output=True, text=True, cwd=cwd, env=env, timeout=120)
    assert "site-packages" in where.stdout, where.stdout + where.stderr

    helped = subprocess.run([str(installed), "--help"], capture_output=True, text=True, cwd=cwd, env=env,
                            timeout=120)
    _show("memagent --help", helped)
    assert helped.returncode == 0 and "chat" in helped.stdout

    models = subprocess.run([str(installed), "models", "--json"], capture_output=True, text=True, cwd=cwd,
                            env=env, timeout=120)
    _show("memagent models --json", models)
    assert models.returncode == 0, models.stderr
    names = {row["provider"] for row in json.loads(models.stdout)}
    assert set(BUILT_IN_PROVIDERS) <= names, f"providers listed: {sorted(names)}"

    init = subprocess.run([str(installed), "init", "shipped", "--template", "assistant"], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=120)
    _show("memagent init shipped --template assistant", init)
    assert init.returncode == 0, init.stderr
    with FakeMessagesAPI() as api:
        api.enqueue_text("Hello from the installed memagent.")
        chat_env = _env(tmp_path, ANTHROPIC_API_KEY="sk-ant-test", ANTHROPIC_BASE_URL=api.base_url)
        chat = subprocess.run([str(installed), "chat", "shipped"], input="hi\n", capture_output=True, text=True,
                              cwd=cwd, env=chat_env, timeout=300)
    _show("echo hi | memagent chat shipped", chat)
    assert chat.returncode == 0, chat.stderr
    assert "Hello from the installed memagent." in chat.stdout
