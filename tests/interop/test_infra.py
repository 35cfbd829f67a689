"""The interop fixture itself: every pinned harness is installed and is the pinned release."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.interop.conftest import run_harness
from tests.interop.harnesses import pins


@pytest.mark.parametrize("name", list(pins()))
def test_pinned_harness_runs_at_its_pinned_version(
        name: str, harness: Callable[[str], Path], harness_env: dict[str, str], tmp_path: Path) -> None:
    binary = harness(name)
    done = run_harness([binary, "--version"], harness_env, tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert pins()[name]["version"] in done.stdout
