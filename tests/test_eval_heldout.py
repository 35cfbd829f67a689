"""The held-out eval scenarios (``bench/eval_heldout/``, issue #37): never tuned on.

- Every file there loads as a scenario, under a name the built-in suite does not use.
- ``bench.eval_oracle.OracleModel`` (memory used) passes every one, so each check can be met.
- The same model ignoring memory fails at least one check of each scenario whose point is memory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.eval_oracle import OracleModel
from memagent.agent.cli import templates
from memagent.agent.evals.harness import run_scenario
from memagent.agent.evals.scenario import builtin_names, load

HELDOUT = Path(__file__).resolve().parent.parent / "bench" / "eval_heldout"
FILES = sorted(HELDOUT.glob("*.yaml"))
# Passes whether or not memory is used: it checks that nothing transient is stored.
NOT_ABOUT_RECALL = {"weather-and-meeting-not-stored"}


def test_the_heldout_set_loads_apart_from_the_suite() -> None:
    assert 5 <= len(FILES) <= 7
    names = [load(path).name for path in FILES]
    assert len(set(names)) == len(names)
    assert not set(names) & set(builtin_names())
    assert set(names) >= NOT_ABOUT_RECALL
    assert (HELDOUT / "README.md").is_file()


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_the_oracle_passes_and_the_memoryless_oracle_fails(path: Path) -> None:
    scenario = load(path)
    result = run_scenario(scenario, OracleModel(), templates=templates.files)
    assert result.error is None
    assert [(c.where, c.label, c.detail) for c in result.checks if not c.passed] == []
    assert result.total == scenario.checks
    if scenario.name in NOT_ABOUT_RECALL:
        return
    control = run_scenario(scenario, OracleModel(uses_memory=False), templates=templates.files)
    assert control.error is None
    assert control.passed < control.total
