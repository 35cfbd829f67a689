"""bench/RESULTS.md keeps every benchmark's own section when another one rewrites its part."""

from __future__ import annotations

from pathlib import Path

from bench import sections


def test_a_section_is_replaced_in_place_and_the_rest_kept(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    sections.write(out, "startup", "## Start-up\n\nold\n")
    sections.write(out, "search_memory", "## search\n\nfirst\n")
    out.write_text(out.read_text("utf-8") + "\ntrailer\n", "utf-8")
    sections.write(out, "startup", "## Start-up\n\nnew\n")
    doc = out.read_text("utf-8")
    assert doc.startswith(sections.TITLE)
    assert "new" in doc and "old" not in doc and "first" in doc and doc.endswith("trailer\n")
    assert doc.index("<!-- startup:begin -->") < doc.index("<!-- search_memory:begin -->")


def test_regenerating_the_main_tables_keeps_every_other_section() -> None:
    old = sections.replace(sections.replace("# results\nold tables\n", "startup", "S"), "integrations", "I")
    new = sections.keep(old, "# results\nnew tables\n")
    assert "new tables" in new and "old tables" not in new
    assert "<!-- startup:begin -->\nS\n<!-- startup:end -->" in new
    assert "<!-- integrations:begin -->\nI\n<!-- integrations:end -->" in new
    # A section the new text already has is not carried twice.
    assert sections.keep(old, old).count("<!-- startup:begin -->") == 1
