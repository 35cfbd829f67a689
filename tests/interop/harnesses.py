"""The pinned harness set (``harnesses.json``) and what ``scripts/interop-install`` recorded.

Read by the interop fixtures and by the suite's report header (tests/conftest.py), so every
run's output names the harness releases it drove.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PINS = Path(__file__).with_name("harnesses.json")
DEST = Path(os.environ.get("MEMAGENT_INTEROP_DIR") or ROOT / ".interop")  # as scripts/interop-install
STATUS = DEST / "status.json"


def pins() -> dict[str, dict[str, str]]:
    """name -> {"package", "version"}, in the order of harnesses.json."""
    data = json.loads(PINS.read_text())
    return {name: spec for name, spec in data.items() if not name.startswith("_")}


def install_status() -> dict[str, object]:
    """.interop/status.json, or {"state": "missing"} when the install script never ran."""
    try:
        status = json.loads(STATUS.read_text())
    except (OSError, ValueError):
        return {"state": "missing"}
    return status if isinstance(status, dict) else {"state": "missing"}


def report_line() -> str:
    pinned = ", ".join(f"{spec['package']} {spec['version']}" for spec in pins().values())
    return f"interop harnesses ({install_status().get('state')}): {pinned}"
