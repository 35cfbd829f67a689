"""The agent: the core loop and, in sub-packages by layer, what it is built from.

Core modules live here: ``loop`` (one conversation), ``prompt`` (the system text
built from memory), ``gate`` (approval), ``subagents``, ``pricing`` and ``builder``
(wiring). Below them ``model/`` and ``tools/``; above them the front ends
``chat/`` and ``cli/``. ARCHITECTURE.md at the repository root maps the layers,
what each may import (enforced by tests/test_layers.py) and the path of a write.
The core imports neither click, rich nor prompt_toolkit.
"""
