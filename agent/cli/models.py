"""``memagent models``, and how every command that makes a model picks and builds it.

Invariants:
- A command's model is ``--model``, else ``$MEMAGENT_MODEL``, else ``DEFAULT_MODEL``,
  and is made by ``registry.build`` only (``make``, ``factory``); this module names no
  provider and reads no provider variable: whether a provider is usable, and the
  one line saying how to make it so, are its ``status()``.
- ``--base-url`` applies to the command's model and to a subagent's model of the same
  provider, never to another provider's.
- ``memagent models`` lists every provider even when one of them fails to answer (a
  server that is not running is one line in the table, exit 0); only a broken
  registry exits non-zero.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import click

from memagent.agent.cli.common import fail, handled
from memagent.agent.model import DEFAULT_MODEL, Model, ModelError, registry
from memagent.agent.model.base import one_line
from memagent.agent.model.registry import ModelOptions

__all__ = ["check_ready", "context_window", "factory", "make", "model_id", "models_cmd", "options",
           "stream_enabled"]


def stream_enabled() -> bool:
    """False when ``MEMAGENT_STREAM`` asks for whole answers (proxies without server-sent events)."""
    return os.environ.get("MEMAGENT_STREAM", "1").strip().lower() not in ("0", "false", "no", "off")


def model_id(option: str | None) -> str:
    """The model id a command uses: ``--model``, ``$MEMAGENT_MODEL``, or the default."""
    return (option or "").strip() or os.environ.get("MEMAGENT_MODEL", "").strip() or DEFAULT_MODEL


def options(base_url: str | None = None) -> ModelOptions:
    """The options of the command's model (``--base-url``, ``MEMAGENT_STREAM``)."""
    return ModelOptions(base_url=(base_url or "").strip() or None, stream=stream_enabled())


def check_ready(name: str, opts: ModelOptions, command: str, *, exit_status: int = 1) -> None:
    """Exit (``exit_status``) with one line when ``name`` has a bad id, an unknown provider
    or one not set up."""
    try:
        provider = registry.get(registry.parse(name)[0])
        status = provider.status(opts)
    except ModelError as err:
        fail(str(err), status=exit_status)
    if not status.configured:
        fail(f"{status.detail} and run `memagent {command}` again", status=exit_status)
    # An optional provider capability: checks that need no SDK (Ollama: the server has the
    # model and the model takes tools), so a model that cannot work is refused at start.
    check = getattr(provider, "check", None)
    if check is not None:
        try:
            check(registry.parse(name)[1], opts)
        except ModelError as err:
            fail(str(err), status=exit_status)


def make(name: str, opts: ModelOptions, *, exit_status: int = 1) -> Model:
    """The model, built now (``fail`` with the provider's one line when it cannot be)."""
    try:
        return registry.build(name, opts)
    except ModelError as err:
        fail(str(err), status=exit_status)


def factory(main: str, opts: ModelOptions) -> Callable[[str], Model]:
    """Builds the model a subagent's ``model:`` names; ``--base-url`` only for ``main``'s provider."""
    main_provider = registry.parse(main)[0]

    def build(name: str) -> Model:
        same = registry.parse(name)[0] == main_provider
        return registry.build(name, opts if same else replace(opts, base_url=None))

    return build


def context_window(name: str, opts: ModelOptions) -> int | None:
    """The model's window as its provider knows it (None: unknown or the provider cannot say)."""
    try:
        return registry.info(name, opts).context_window
    except ModelError:
        return None


# --------------------------------------------------------------------------- memagent models


def _row(name: str, provider: Any) -> dict[str, Any]:
    """One provider's line: configured, its variables, its local models (errors as one line)."""
    row: dict[str, Any] = {"provider": name, "configured": False, "detail": "",
                           "env_vars": list(getattr(provider, "env_vars", ())), "local_models": [],
                           "local_error": None}
    try:
        status = provider.status()
        row["configured"], row["detail"] = bool(status.configured), one_line(str(status.detail))
    except Exception as err:  # noqa: BLE001 - one provider's bug is its own line
        row["detail"] = one_line(f"status failed: {type(err).__name__}: {err}")
    try:
        row["local_models"] = [str(m) for m in provider.local_models()]
    except Exception as err:  # noqa: BLE001 - e.g. an Ollama server that is not running
        row["local_error"] = one_line(str(err) if isinstance(err, ModelError)
                                      else f"{type(err).__name__}: {err}")
    return row


@click.command("models")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per provider, in a list.")
@handled
def models_cmd(as_json: bool) -> None:
    """List the model providers, whether each is set up, the variables it reads, and local models.

    \b
    Model ids are provider/model: anthropic/claude-sonnet-5-5 (or just the
    Claude name), openai/gpt-5.1, ollama/qwen3:8b, openai-compatible/NAME with
    --base-url. Pick one with --model or MEMAGENT_MODEL.
    """
    rows = [_row(name, provider) for name, provider in registry.providers().items()]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    width = max([len("provider"), *(len(r["provider"]) for r in rows)])
    click.echo(f"{'provider':<{width}}  ready  reads")
    for r in rows:
        reads = ", ".join(r["env_vars"]) or "-"
        click.echo(f"{r['provider']:<{width}}  {'yes' if r['configured'] else 'no':<5}  {reads}")
        if r["detail"]:
            click.echo(f"{'':<{width}}         {r['detail']}")
        if r["local_models"]:
            click.echo(f"{'':<{width}}         local models: {', '.join(r['local_models'])}")
        elif r["local_error"]:
            click.echo(f"{'':<{width}}         local models: none ({r['local_error']})")
    click.echo(f"model used: {model_id(None)} (--model or MEMAGENT_MODEL picks another; "
               f"default {DEFAULT_MODEL})")
