"""ARCHITECTURE.md's table of layers is checked against the layering test's rules.

The "Layers" table says, per layer, which layers it may import; ``tests/test_layers.py``
enforces ``MAY_IMPORT`` on the code. This test reads the table and fails, naming the row,
when the two disagree, so the map a newcomer reads first cannot drift from what the
code is held to. A row's "may import" cell lists layers before the first ";" (the rest
names third-party libraries); "everything below" means every row above it,
"every product layer" and "everything, bench included" mean what they say.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_layers import MAY_IMPORT, PRODUCT

ARCHITECTURE = Path(__file__).resolve().parent.parent / "ARCHITECTURE.md"
# Layers without a row: the distribution's root package and the starter templates import nothing.
UNLISTED = {"root", "templates"}


def table() -> list[tuple[str, str]]:
    """(layer, "may import" cell) for each row of the Layers table, in order."""
    text = ARCHITECTURE.read_text("utf-8")
    section = text.split("\n## Layers", 1)[1].split("\n## ", 1)[0]
    rows: list[tuple[str, str]] = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3 and cells[0] not in ("layer", "---"):
            rows.append((cells[0], cells[1]))
    return rows


def layers_named(cell: str, above: list[str]) -> set[str]:
    head = cell.split(";", 1)[0].strip()
    if head.startswith("(") or head in ("—", "-", ""):
        return set()
    if head == "everything below":
        return set(above)
    if head == "every product layer":
        return set(PRODUCT)
    if head == "everything, bench included":
        return set(PRODUCT) | {"bench"}
    return {name for name in re.split(r",\s*", head) if name}


def test_the_table_has_a_row_for_every_layer() -> None:
    names = [layer for layer, _ in table()]
    assert len(names) == len(set(names)), names
    assert set(names) == set(MAY_IMPORT) - UNLISTED


def test_each_rows_may_import_is_what_the_layering_test_enforces() -> None:
    seen: list[str] = []
    for layer, cell in table():
        assert layers_named(cell, seen) == MAY_IMPORT[layer], f"ARCHITECTURE.md's row {layer!r}: {cell}"
        seen.append(layer)
