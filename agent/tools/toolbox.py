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
- What models (local ones above all) get wrong is answered before a provider runs,
  each as one ``is_error`` result saying how to fix the call: arguments that were not
  valid JSON (a model provider hands them over as ``{UNPARSED_ARGUMENTS: raw text}``),
  arguments that are not an object, a missing required parameter, a parameter the
  schema does not have (when it says ``additionalProperties: false``), and a
  top-level value of the wrong JSON type. Deeper checks stay the provider's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

from memagent.agent.tools.base import ToolProvider, ToolResult
from memagent.vfs import VfsError

log = logging.getLogger("memagent.agent.tools")

# The key under which a model provider passes tool arguments it could not parse as a
# JSON object (the raw text as its value). The model layer spells the same string
# (it cannot import tools); tests/test_openai_provider.py checks the two agree.
UNPARSED_ARGUMENTS = "__memagent_unparsed_arguments__"

# How much of a malformed argument text is quoted back to the model.
_RAW_SHOWN = 200

_JSON_TYPES: dict[str, tuple[str, tuple[type, ...]]] = {
    "string": ("a string", (str,)),
    "integer": ("an integer", (int,)),
    "number": ("a number", (int, float)),
    "boolean": ("true or false", (bool,)),
    "array": ("an array", (list,)),
    "object": ("an object", (dict,)),
    "null": ("null", (type(None),)),
}


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
            return ToolResult(f"unknown tool {name!r}; the tools are: {', '.join(names)}; "
                              "call one of those by its exact name", True)
        definition = next(d for p, d in current if d["name"] == name)
        problem = argument_problem(definition.get("input_schema"), args)
        if problem:
            return ToolResult(f"bad arguments for {name}: {problem}", True)
        started = time.perf_counter()
        try:
            return provider.run(name, args)
        except TypeError as exc:
            return ToolResult(f"bad arguments for {name}: {exc}; see the tool's input schema", True)
        except VfsError as exc:
            return ToolResult(str(exc), True)
        finally:
            log.debug("tool %s took %.1f ms", name, (time.perf_counter() - started) * 1000)


def argument_problem(schema: Any, args: Any) -> str:
    """Why ``args`` cannot be a call of a tool with input ``schema`` ("" if none found).

    Only the checks a tool provider cannot make well itself (its handler gets the
    arguments as keywords): the message names the parameter and how to fix the call.
    """
    if isinstance(args, dict) and UNPARSED_ARGUMENTS in args:
        raw = str(args[UNPARSED_ARGUMENTS])
        shown = raw if len(raw) <= _RAW_SHOWN else raw[:_RAW_SHOWN] + "…"
        return (f"the arguments were not a valid JSON object ({shown!r}); call the tool again with "
                "one JSON object of its parameters, e.g. {\"file_path\": \"/notes.md\"}")
    if not isinstance(args, dict):
        return "the arguments must be one JSON object of the tool's parameters"
    if not isinstance(schema, dict):
        return ""
    props = schema.get("properties")
    props = props if isinstance(props, dict) else {}
    required = schema.get("required")
    missing = [r for r in required if isinstance(r, str) and r not in args] if isinstance(required, list) else []
    if missing:
        listed = ", ".join(f"{m} ({_type_words(props.get(m))})" for m in missing)
        plural = "s" if len(missing) > 1 else ""
        return f"missing required parameter{plural} {listed}; call the tool again with {'them' if plural else 'it'}"
    if schema.get("additionalProperties") is False and props:
        unknown = sorted(k for k in args if k not in props)
        if unknown:
            return (f"no parameter {', '.join(map(repr, unknown))}; its parameters are "
                    f"{', '.join(props)}")
    for key, value in args.items():
        expected = _types(props.get(key))
        if expected and not any(_is(value, t) for t in expected):
            return f"{key} must be {_type_words(props.get(key))}, not {value!r}"[:300]
    return ""


def _types(prop: Any) -> list[str]:
    """The JSON types a property schema names (only ones this module knows)."""
    if not isinstance(prop, dict):
        return []
    kind = prop.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    return [k for k in kinds if isinstance(k, str) and k in _JSON_TYPES]


def _is(value: Any, kind: str) -> bool:
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False  # JSON's true is not a number, though Python's bool is an int
    return isinstance(value, _JSON_TYPES[kind][1])


def _type_words(prop: Any) -> str:
    kinds = _types(prop)
    return " or ".join(_JSON_TYPES[k][0] for k in kinds) if kinds else "any value"
