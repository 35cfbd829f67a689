"""Memory files: versioned files in scopes, and the store that reads and changes them.

``SqlStore`` (store.py) is composed by concern on ``StoreCore`` (core.py: the database,
transactions, row reads): listing.py (ls, glob), grepping.py (grep over the store's rows,
with the engine of ``vfs/grep/``), history.py and blame.py (log, blame, diff) and
mutations.py (agents and every mutation); revisions.py appends revisions, bulk.py writes
a batch, edits.py applies exact-string edits and makes diffs. Invariants:

- One write path: ``prepare_*`` normalise the path once, read the file once, check the
  expected version, apply the edit and validate once; ``commit`` stores the change at
  the version it was read at, or raises ``StaleVersion`` and stores nothing.
- Each mutation is one transaction that updates ``files`` and appends exactly one
  revision (revisions.py is the one place that writes ``revisions``); a refused mutation
  leaves the database as it was. Deleting keeps the row and its history.
- Nothing here branches on the database: what differs is the backend's (``vfs/backends/``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from memagent.vfs.lazy import face

if TYPE_CHECKING:
    from memagent.vfs.files.bulk import ChangedSince
    from memagent.vfs.files.edits import apply_edit, unified_diff
    from memagent.vfs.files.revisions import check_message
    from memagent.vfs.files.store import SqlStore, Store, Validator, check_agent_name, no_agent_message

# Public name -> its module in this package, imported on first use (PEP 562, as
# vfs/__init__.py does), so importing one module of the package loads no other.
_LAZY: dict[str, str] = {
    "ChangedSince": "bulk",
    "apply_edit": "edits",
    "unified_diff": "edits",
    "check_message": "revisions",
    "SqlStore": "store",
    "Store": "store",
    "Validator": "store",
    "check_agent_name": "store",
    "no_agent_message": "store",
}

if not TYPE_CHECKING:
    __getattr__ = face(__name__, _LAZY, globals())


__all__ = ["ChangedSince", "SqlStore", "Store", "Validator", "apply_edit", "check_agent_name", "check_message",
           "no_agent_message", "unified_diff"]
