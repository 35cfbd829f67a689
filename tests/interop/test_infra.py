"""The interop fixture itself: every pinned harness is installed and is the pinned release, and
the suite skips only when the install script found the npm registry unreachable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.interop import harnesses
from tests.interop.conftest import harness_path, run_harness
from tests.interop.harnesses import pins


@pytest.mark.parametrize("name", list(pins()))
def test_pinned_harness_runs_at_its_pinned_version(
        name: str, harness: Callable[[str], Path], harness_env: dict[str, str], tmp_path: Path) -> None:
    binary = harness(name)
    done = run_harness([binary, "--version"], harness_env, tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert pins()[name]["version"] in done.stdout


def test_the_fixture_skips_only_when_the_registry_was_unreachable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    status = tmp_path / "status.json"
    monkeypatch.setattr(harnesses, "STATUS", status)
    with pytest.raises(pytest.fail.Exception, match="run `python3 scripts/interop-install`"):
        harness_path("claude")  # never installed: a failure, not a skip
    status.write_text(json.dumps({"state": "failed", "pins": pins(), "detail": "npm ERR! 404 no such package"}))
    with pytest.raises(pytest.fail.Exception, match="404 no such package"):
        harness_path("claude")
    status.write_text(json.dumps({"state": "installed", "pins": {**pins(), "claude": {"package": "x",
                                                                                      "version": "0"}}}))
    with pytest.raises(pytest.fail.Exception, match="install state: installed"):
        harness_path("claude")  # installed, but for other pins
    status.write_text(json.dumps({"state": "unreachable", "pins": pins(), "detail": "ECONNREFUSED"}))
    with pytest.raises(pytest.skip.Exception, match="npm registry could not be reached"):
        harness_path("claude")


def test_the_install_script_records_an_unreachable_registry(tmp_path: Path) -> None:
    dest = tmp_path / "interop"
    env = {**os.environ, "MEMAGENT_INTEROP_DIR": str(dest), "npm_config_registry": "http://127.0.0.1:9/",
           "npm_config_fetch_retries": "0", "npm_config_cache": str(tmp_path / "npm-cache")}
    done = subprocess.run([sys.executable, str(harnesses.ROOT / "scripts/interop-install")], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads((dest / "status.json").read_text())["state"] == "unreachable"
    assert "interop-install: unreachable" in done.stdout
