"""Finding the MCP server processes a test started, by a marker on their command line.

A test passes a unique tag to every server it starts (``--tag TAG``); these
helpers find the live ones and wait, on process state rather than time, for them
to be gone. ``server_tag`` is the body of a fixture that fails the test when any
of its servers outlives it (after killing the survivors).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import psutil


def procs(tag: str) -> list[psutil.Process]:
    """The live (not zombie) processes whose command line holds ``tag``."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and any(tag in c for c in p.info["cmdline"] or []):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def wait_gone(tag: str, timeout: float = 30) -> list[psutil.Process]:
    """Waits until no process holds ``tag`` (a safety limit, not a timing check); the survivors."""
    deadline = time.monotonic() + timeout
    while (left := procs(tag)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def server_tag(prefix: str, tmp_path: Path) -> Iterator[str]:
    """Yields a tag unique to this test; afterwards, no process holding it may be left."""
    value = f"{prefix}{os.getpid()}-{tmp_path.name}"
    yield value
    left = wait_gone(value)
    for p in left:
        p.kill()
    assert not left, f"server processes left behind: {[p.pid for p in left]}"
