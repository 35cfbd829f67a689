"""The sections of ``bench/RESULTS.md`` that single benchmarks own.

``python -m bench`` writes the whole file; ``bench.startup``, ``bench.search_memory``
and ``bench.integrations`` each own one section between ``<!-- NAME:begin -->`` and
``<!-- NAME:end -->``.

Invariants:
- ``write`` replaces only its own section (or appends it) and leaves every other
  byte of the file as it was; a missing file starts with the results title.
- ``keep`` carries every marked section of the old file that the new text lacks,
  unchanged, so regenerating the main tables never drops another tool's results.
"""

from __future__ import annotations

import re
from pathlib import Path

TITLE = "# memagent benchmark results\n"
_MARKED = re.compile(r"<!-- ([a-z_-]+):begin -->.*?<!-- \1:end -->", re.S)


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def replace(doc: str, name: str, body: str) -> str:
    """``doc`` with section ``name`` holding ``body`` (replaced in place, or appended)."""
    begin, end = markers(name)
    block = f"{begin}\n{body.rstrip(chr(10))}\n{end}"
    if begin in doc and end in doc:
        head, _, rest = doc.partition(begin)
        return head + block + rest.partition(end)[2]
    return doc.rstrip("\n") + "\n\n" + block + "\n"


def write(path: str | Path, name: str, body: str) -> None:
    """Replace section ``name`` of the file at ``path`` with ``body``."""
    out = Path(path)
    doc = out.read_text("utf-8") if out.exists() else TITLE
    out.write_text(replace(doc, name, body), "utf-8")


def keep(old_doc: str, new_doc: str) -> str:
    """``new_doc`` plus every marked section of ``old_doc`` it does not have."""
    for m in _MARKED.finditer(old_doc):
        if markers(m.group(1))[0] not in new_doc:
            new_doc = new_doc.rstrip("\n") + "\n\n" + m.group(0) + "\n"
    return new_doc
