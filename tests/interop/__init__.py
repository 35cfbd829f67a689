"""Interop tests: memagent's exports and servers loaded by the real harnesses (npm releases
pinned in ``harnesses.json``, installed by ``scripts/interop-install``), against local fakes."""
