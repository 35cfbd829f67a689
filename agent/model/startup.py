"""Starting a model without waiting for its SDK: the credential check, and a model built
in a background thread while the person types their first message.

Invariants:
- Nothing here imports a provider SDK: ``api_key_configured`` reads the environment
  only, and ``BackgroundModel`` runs its ``factory`` (which imports the SDK, ~1.4 s
  for anthropic) on a daemon thread, started by ``start`` (or the first use).
- ``BackgroundModel`` is a ``Model`` whose ``name`` is known at once; ``respond`` and
  ``count_tokens`` wait for the factory and then delegate. A factory that raised
  ``ModelError`` raises it again on every use (one line, as before); any other
  exception becomes a ``ModelError`` saying the client could not be set up, so a
  broken install never surfaces as a traceback.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from memagent.agent.model.base import Model, ModelError, ModelRequest, ModelResponse, TextCallback

CREDENTIAL_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


def api_key_configured() -> bool:
    """True when the SDK will find a static credential in the environment."""
    return any(os.environ.get(var, "").strip() for var in CREDENTIAL_VARS)


class BackgroundModel:
    """A ``Model`` built by ``factory`` on a background thread, used once it is ready."""

    def __init__(self, name: str, factory: Callable[[], Model], *, prompt_profile: str | None = None) -> None:
        self.name = name
        # What the built model will declare (``registry.info``): the agent's prompt is chosen
        # (``profiles.profile_of``) before the model is built. Absent: the default profile.
        if prompt_profile is not None:
            self.prompt_profile = prompt_profile
        self._factory = factory
        self._model: Model | None = None
        self._error: ModelError | None = None
        self._delay = 0.0
        self._thread = threading.Thread(target=self._build, name=f"load-model-{name}", daemon=True)
        self._lock = threading.Lock()
        self._started = False

    def start(self, delay: float = 0.0) -> None:
        """Begin building (once), after ``delay`` seconds: importing an SDK holds the GIL
        for long stretches, so the caller lets its prompt appear first."""
        with self._lock:
            if self._started:
                return
            self._started = True
            self._delay = delay
            self._thread.start()

    def _build(self) -> None:
        if self._delay > 0:
            time.sleep(self._delay)
        try:
            self._model = self._factory()
        except ModelError as exc:
            self._error = exc
        except Exception as exc:  # noqa: BLE001 - reported as one line when the model is used
            self._error = ModelError(f"the model client could not be set up ({type(exc).__name__}: {exc})")

    def ready(self) -> Model:
        """The built model (waiting for it); ``ModelError`` if building it failed."""
        self.start()
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._model is not None
        return self._model

    def respond(self, request: ModelRequest, *, on_text: TextCallback | None = None,
                on_retry: TextCallback | None = None) -> ModelResponse:
        return self.ready().respond(request, on_text=on_text, on_retry=on_retry)

    def count_tokens(self, request: ModelRequest) -> int | None:
        """The model's count, or None (also when it could not be built: ``respond`` says why)."""
        try:
            counter = getattr(self.ready(), "count_tokens", None)
        except ModelError:
            return None
        return counter(request) if counter is not None else None
