"""Fixtures of the interop suite: the real harnesses, isolated from the machine.

``harness(name)`` gives the path of a pinned harness's binary (``claude``, ``codex``,
``opencode``, ``inspector``; pins in ``harnesses.json``, installed into ``.interop/`` by
``scripts/interop-install``, which ``scripts/test`` runs before pytest). It skips, saying
so, only when the install script recorded that the npm registry could not be reached; a
binary that is missing for any other reason (install never run, failed, stale pins) fails
the test with the command to run.

``harness_env`` is the environment every harness runs in: HOME, the XDG folders, and each
harness's own config folder under the test's tmp_path (a harness never reads or writes the
real home), no credentials from the caller, auto-update, telemetry and error reporting
off, and every proxy variable pointing at a closed local port with only 127.0.0.1 exempt,
so anything a harness tries to reach besides the local fakes fails instead of leaving the
machine.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.interop.harnesses import DEST, PINS, install_status, pins

INSTALL = "python3 scripts/interop-install"

# A closed port: the proxy every non-local request is sent to, so it fails at once.
DEAD_PROXY = "http://127.0.0.1:9"


def harness_path(name: str) -> Path:
    """The binary of pinned harness ``name``, or skip/fail as the module docstring says."""
    pinned = pins()
    if name not in pinned:
        pytest.fail(f"no harness named {name!r} in {PINS.name}: one of {', '.join(pinned)}")
    status = install_status()
    state = status.get("state")
    if state == "unreachable":
        pytest.skip(f"the npm registry could not be reached when {INSTALL} ran: "
                    f"{pinned[name]['package']} {pinned[name]['version']} is not installed")
    binary = DEST / "node_modules" / ".bin" / name
    if state != "installed" or status.get("pins") != pinned or not binary.exists():
        detail = str(status.get("detail") or "").strip()
        pytest.fail(f"{name} ({pinned[name]['package']} {pinned[name]['version']}) is not installed "
                    f"(install state: {state}): run `{INSTALL}`"
                    + (f"\n{detail}" if detail else ""), pytrace=False)
    return binary


@pytest.fixture
def harness() -> Callable[[str], Path]:
    """``harness("claude")`` -> the path of the pinned Claude Code binary (see module doc)."""
    return harness_path


@pytest.fixture
def harness_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "harness-home"
    dirs = {"HOME": home, "XDG_CONFIG_HOME": home / ".config", "XDG_DATA_HOME": home / ".local/share",
            "XDG_CACHE_HOME": home / ".cache", "XDG_STATE_HOME": home / ".local/state",
            "CODEX_HOME": home / ".codex", "CLAUDE_CONFIG_DIR": home / ".claude", "TMPDIR": home / "tmp"}
    for folder in dirs.values():
        folder.mkdir(parents=True, exist_ok=True)
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "SYSTEMROOT")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update({k: str(v) for k, v in dirs.items()})
    env.update({
        "NO_COLOR": "1", "CI": "1",
        # Claude Code: no updater, telemetry, error reports or other calls beside the model's.
        "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_NON_ESSENTIAL_MODEL_CALLS": "1",
        "DISABLE_BUG_COMMAND": "1", "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
        # OpenCode: no updater, no models.dev catalogue, no LSP or plugin downloads, no share.
        "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_AUTOCOMPACT": "1",
        # Everything else goes to a closed port; only the local fakes are reachable.
        "HTTP_PROXY": DEAD_PROXY, "HTTPS_PROXY": DEAD_PROXY, "ALL_PROXY": DEAD_PROXY,
        "http_proxy": DEAD_PROXY, "https_proxy": DEAD_PROXY, "all_proxy": DEAD_PROXY,
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
    })
    return env


def run_harness(argv: list[str | Path], env: dict[str, str], cwd: Path, *,
                timeout: float = 300, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """Run a harness to completion (the timeout only bounds a hang; it asserts nothing)."""
    return subprocess.run([str(a) for a in argv], env=env, cwd=cwd, input=stdin, capture_output=True,
                          text=True, timeout=timeout, check=False)
