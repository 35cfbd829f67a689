"""PEP 562 faces: a package's public names, each imported from its module on first use.

``face(package, table, namespace)`` is the ``__getattr__`` of ``package``: ``table`` maps
each public name to the module inside the package that defines it (``"store"``), or to
``(module, attribute)`` where the public name differs from the module's. A name found is
stored in ``namespace`` (the package's globals), so each is imported once; any other name
is an ``AttributeError``, as for a module without it. ``memagent.vfs`` and its sub-packages
(files, grep, records, search) are such faces: importing one loads none of its modules.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["face"]


def face(package: str, table: Mapping[str, str | tuple[str, str]],
         namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The module-level ``__getattr__`` of ``package`` over ``table``."""

    def __getattr__(name: str) -> Any:
        try:
            entry = table[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        module, attr = (entry, name) if isinstance(entry, str) else entry
        value = getattr(importlib.import_module(f"{package}.{module}"), attr)
        namespace[name] = value
        return value

    return __getattr__
