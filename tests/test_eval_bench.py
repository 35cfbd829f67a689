"""``python -m bench eval`` runs end to end and writes only its own section (not a timing test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import eval_overhead


def test_the_overhead_table_is_written_into_its_section(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    out.write_text("# results\n\nother text\n", "utf-8")
    assert eval_overhead.main(["--reps", "1", "-k", "small-prompt", "--out", str(out)]) == 0
    text = out.read_text("utf-8")
    assert text.startswith("# results\n\nother text\n")
    assert "<!-- eval_overhead:begin -->" in text and "<!-- eval_overhead:end -->" in text
    assert "| small-prompt | 2 |" in text and "bullet-points-stick" not in text


def test_a_scenario_that_fails_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "RESULTS.md"
    class Ignoring(eval_overhead.Timed):
        def __init__(self) -> None:
            super().__init__()
            self.uses_memory = False

    monkeypatch.setattr(eval_overhead, "Timed", Ignoring)
    with pytest.raises(SystemExit, match="did not pass"):
        eval_overhead.main(["--reps", "1", "-k", "bullet-points-stick", "--out", str(out)])
    assert not out.exists()
