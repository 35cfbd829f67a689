"""Which prompt profile a model gets: decided here and only here (``profile_of``).

A model that declares ``prompt_profile = "compact"`` (the ``local`` provider's models: small,
on a CPU) gets the compact base instructions and tool definitions; every other model the full
ones. ``$MEMAGENT_PROMPT_PROFILE`` overrides the model. The agent builder asks for the parent
agent, ``subagents`` for a subagent's own model; this module imports neither, so both can.
"""

from __future__ import annotations

import os
from typing import Any, cast

from memagent.agent.model import Model, ModelError
from memagent.agent.prompt import PROFILES, Profile

__all__ = ["PROFILE_VAR", "profile_of"]

PROFILE_VAR = "MEMAGENT_PROMPT_PROFILE"
# How deep ``profile_of`` looks through wrapper models (each keeps the wrapped one as ``inner``).
_WRAPPERS = 8


def profile_of(model: Model) -> Profile:
    """The prompt profile ``model`` asks for: its ``prompt_profile`` attribute (a model MAY
    carry one, as it may carry ``context_window``), looking through wrappers that keep the
    wrapped model as ``inner`` (the chat's ``ShownText``, the eval's ``Counting``); ``full``
    when none says. ``$MEMAGENT_PROMPT_PROFILE`` overrides the model (a large local model
    that can afford the full prompt, or an eval comparing the two)."""
    forced = os.environ.get(PROFILE_VAR, "").strip()
    if forced:
        if forced not in PROFILES:
            raise ModelError(f"{PROFILE_VAR}={forced!r} is not a prompt profile; set one of "
                             f"{', '.join(PROFILES)} or unset it")
        return cast(Profile, forced)
    current: Any = model
    for _ in range(_WRAPPERS):
        declared = getattr(current, "prompt_profile", None)
        if declared in PROFILES:
            return declared
        current = getattr(current, "inner", None)
        if current is None:
            break
    return "full"
