"""``ToolBox``: the tools one agent may use, merged from providers behind one ``run``.

Invariants:
- The model sees exactly ``definitions()``: every provider's tools, filtered by
  the allow-list when there is one; ``run`` refuses any other name with the list
  of the real ones, so an allow-list cannot be bypassed by naming a tool anyway.
- Tool names are unique across providers (a clash is a programming error,
  caught when the box is built). A provider's tools may change while the box
  lives (MCP tools follow ``/tools.json``): ``definitions`` and ``run`` ask the
  providers each time, and a dynamic name that clashes with an earlier
  provider's is dropped.
- Nothing a call sends reaches the loop as an exception: bad arguments and store
  errors become ``is_error`` results.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

from memagent.agent.tools.base import ToolProvider, ToolResult
from memagent.vfs.errors import VfsError

log = logging.getLogger("memagent.agent.tools")


class ToolBox:
    def __init__(self, providers: Sequence[ToolProvider], *, allowed: Iterable[str] | None = None) -> None:
        self.providers = list(providers)
        # None = every tool the providers offer; a subagent gets the set its file allows.
        self.allowed = frozenset(allowed) if allowed is not None else None
        self._owner: dict[str, ToolProvider] = {}
        for provider in self.providers:
            for d in provider.definitions():
                if d["name"] in self._owner:
                    raise ValueError(f"two tool providers define {d['name']!r}")
                self._owner[d["name"]] = provider

    def _current(self) -> list[tuple[ToolProvider, dict[str, Any]]]:
        seen: set[str] = set()
        found: list[tuple[ToolProvider, dict[str, Any]]] = []
        for p in self.providers:
            for d in p.definitions():
                if d["name"] in seen or (self.allowed is not None and d["name"] not in self.allowed):
                    continue
                seen.add(d["name"])
                found.append((p, d))
        return found

    def definitions(self) -> list[dict[str, Any]]:
        return [d for _, d in self._current()]

    def names(self) -> list[str]:
        return [d["name"] for d in self.definitions()]

    def run(self, name: str, args: dict[str, Any]) -> ToolResult:
        current = self._current()
        names = [d["name"] for _, d in current]
        provider = next((p for p, d in current if d["name"] == name), None)
        if provider is None:
            return ToolResult(f"unknown tool {name!r}; the tools are: {', '.join(names)}", True)
        started = time.perf_counter()
        try:
            return provider.run(name, args)
        except TypeError as exc:
            return ToolResult(f"bad arguments for {name}: {exc}; see the tool's input schema", True)
        except VfsError as exc:
            return ToolResult(str(exc), True)
        finally:
            log.debug("tool %s took %.1f ms", name, (time.perf_counter() - started) * 1000)
