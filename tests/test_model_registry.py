"""The model provider registry: ids, providers (built-in and entry-point plugins), and every
command that makes a model going through it (``--model``, ``MEMAGENT_MODEL``, ``--base-url``,
a subagent's ``model:``), ``memagent models``, the context budget from a known window, and
the cost line with and without a known price.

Plugins are real distributions: a ``*.dist-info`` with ``entry_points.txt`` in a temporary
folder put on ``sys.path`` (in process) or ``PYTHONPATH`` (for the ``memagent`` command).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.fake_messages_api import FakeMessagesAPI
from memagent.agent import pricing
from memagent.agent.builder import build_agent
from memagent.agent.cli import models as cli_models
from memagent.agent.context import DEFAULT_BUDGET, MIN_BUDGET, budget_for
from memagent.agent.model import ModelError, ModelRequest, Usage, registry
from memagent.agent.model.base import CACHE_KEY, without_cache_marks
from memagent.agent.model.registry import ModelOptions, Price
from memagent.agent.model.scripted import ScriptedModel
from memagent.vfs import SqlStore
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.scopes import AgentView
from tests.agent_helpers import last_tool_result
from tests.cli_helpers import err, out, run

PLUGIN = '''
"""A test provider: its models echo the last user text, their id and base URL."""
import os

from memagent.agent.model.base import ModelError, ModelResponse, Usage
from memagent.agent.model.registry import ModelInfo, Price, ProviderStatus

WINDOWS = {"small": 8192}
PRICES = {"priced": Price(input=1.0, output=2.0)}


class EchoModel:
    def __init__(self, name, base_url):
        self.name = name
        self.base_url = base_url
        self.requests = []

    def respond(self, request, *, on_text=None, on_retry=None):
        self.requests.append(request)
        last = request.messages[-1]["content"]
        text = last if isinstance(last, str) else " ".join(
            b.get("text", "") for b in last if b.get("type") == "text")
        answer = f"{self.name} says: {text} (base {self.base_url})"
        if on_text is not None:
            on_text(answer)
        return ModelResponse(content=[{"type": "text", "text": answer}], stop_reason="end_turn",
                             usage=Usage(input_tokens=1000, output_tokens=500), model=self.name)


class EchoProvider:
    env_vars = ("ECHO_PLUGIN_OFF",)

    def __init__(self, name, local=None, local_error=None):
        self.name = name
        self._local = local or []
        self._local_error = local_error

    def status(self, options=None):
        if os.environ.get("ECHO_PLUGIN_OFF"):
            return ProviderStatus(False, "echo is switched off: unset ECHO_PLUGIN_OFF")
        return ProviderStatus(True, "echo needs nothing")

    def build(self, model, options):
        if model == "refuse":
            raise ModelError("echo/refuse has no tool support; pick echo/small")
        return EchoModel(f"{self.name}/{model}", options.base_url)

    def info(self, model, options=None):
        return ModelInfo(context_window=WINDOWS.get(model), price=PRICES.get(model))

    def local_models(self, options=None):
        if self._local_error:
            raise ModelError(self._local_error)
        return list(self._local)


PROVIDER = EchoProvider("echo", local=["echo-small", "echo-large"])
IMPOSTOR = EchoProvider("anthropic")


def make_provider():
    return EchoProvider("echo2", local_error="cannot reach the echo server at http://127.0.0.1:9")
'''

ENTRY_POINTS = """\
[memagent.providers]
echo = memagent_testplug:PROVIDER
echo2 = memagent_testplug:make_provider
broken = memagent_testplug_missing:PROVIDER
anthropic = memagent_testplug:IMPOSTOR
"""


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    """A folder holding the plugin module and its distribution's metadata."""
    folder = tmp_path / "plugins"
    dist = folder / "memagent_testplug-0.1.dist-info"
    dist.mkdir(parents=True)
    (folder / "memagent_testplug.py").write_text(PLUGIN, "utf-8")
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: memagent-testplug\nVersion: 0.1\n", "utf-8")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS, "utf-8")
    return folder


@pytest.fixture
def plugin(plugin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The plugin installed in this process (and prices looked up afresh)."""
    monkeypatch.syspath_prepend(str(plugin_dir))
    pricing.price_for.cache_clear()
    yield plugin_dir
    pricing.price_for.cache_clear()
    sys.modules.pop("memagent_testplug", None)


# --------------------------------------------------------------------------- ids


@pytest.mark.parametrize("model_id,expected", [
    ("claude-sonnet-5-5", ("anthropic", "claude-sonnet-5-5")),
    ("anthropic/claude-sonnet-5-5", ("anthropic", "claude-sonnet-5-5")),
    ("openai/gpt-5.1", ("openai", "gpt-5.1")),
    ("ollama/qwen3:8b", ("ollama", "qwen3:8b")),
    ("openai-compatible/NAME", ("openai-compatible", "NAME")),
    ("openai-compatible/meta-llama/llama-3.3-70b", ("openai-compatible", "meta-llama/llama-3.3-70b")),
    ("  ollama/qwen3:8b ", ("ollama", "qwen3:8b")),
])
def test_parse(model_id: str, expected: tuple[str, str]) -> None:
    assert registry.parse(model_id) == expected


@pytest.mark.parametrize("model_id", ["", "   ", "openai/", "/gpt-5.1", "ollama/qwen3 8b", "claude\x1b[2J"])
def test_a_bad_id_is_one_line(model_id: str) -> None:
    with pytest.raises(ModelError) as caught:
        registry.parse(model_id)
    message = str(caught.value)
    assert "\n" not in message and "model id" in message
    assert "\x1b" not in message or repr("\x1b") in message


def test_an_unknown_provider_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(ModelError) as caught:
        registry.build("nope/model-1")
    assert str(caught.value) == ("unknown model provider 'nope'; known: anthropic, local, ollama, openai, "
                                 "openai-compatible")
    with pytest.raises(ModelError, match="unknown model provider 'nope'"):
        registry.info("nope/model-1")


def test_the_built_ins_are_listed_without_loading_an_sdk() -> None:
    table = registry.providers()
    assert "anthropic" in table
    anthropic = table["anthropic"]
    assert anthropic.name == "anthropic"
    assert {"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"} <= set(anthropic.env_vars)
    assert anthropic.local_models() == []


# --------------------------------------------------------------------------- the Anthropic provider


def test_anthropic_status_says_how_to_set_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    status = registry.get("anthropic").status()
    assert not status.configured and "export ANTHROPIC_API_KEY=" in status.detail
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    status = registry.get("anthropic").status(ModelOptions(base_url="http://proxy.example"))
    assert status.configured and status.detail == "ANTHROPIC_API_KEY is set (base URL http://proxy.example)"


def test_anthropic_info_knows_claude_and_guesses_nothing_else() -> None:
    known = registry.info("anthropic/claude-sonnet-5-5")
    assert known.context_window == 200_000 and known.price is not None and known.price.input == 2.0
    assert registry.info("claude-haiku-4-5-20251001").price is not None
    assert registry.info("claude-unheard-of-9") == registry.ModelInfo()


def test_anthropic_model_through_the_registry_with_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """The prefix goes, the bare name stays (stored threads), --base-url wins over the
    environment, and the core's cache mark reaches the Messages API."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # nothing listens there
    with FakeMessagesAPI() as api:
        api.enqueue_text("hello back")
        model = registry.build("anthropic/claude-sonnet-5-5", ModelOptions(base_url=api.base_url, stream=False))
        assert model.name == "claude-sonnet-5-5"
        system = [{"type": "text", "text": "stable", CACHE_KEY: {"type": "ephemeral"}}]
        response = model.respond(ModelRequest(system=system, messages=[
            {"role": "user", "content": [{"type": "text", "text": "hi"}]}]))
        assert response.text == "hello back"
        sent = api.requests[-1]
        assert sent["model"] == "claude-sonnet-5-5"
        assert sent["system"][0][CACHE_KEY] == {"type": "ephemeral"}


def test_cache_marks_are_stripped_on_a_copy() -> None:
    request = [{"role": "user", "content": [{"type": "text", "text": "x", CACHE_KEY: {"type": "ephemeral"}}]}]
    stripped = without_cache_marks(request)
    assert stripped == [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
    assert CACHE_KEY in request[0]["content"][0]  # the request itself is never changed
    assert json.dumps(without_cache_marks(request)) == json.dumps(stripped)  # byte-stable


# --------------------------------------------------------------------------- plugins


def test_entry_point_plugins_register(plugin: Path) -> None:
    table = registry.providers()
    assert {"anthropic", "echo", "echo2"} <= set(table)
    assert "broken" not in table  # a plugin that cannot load is a log line, not a crash
    # A plugin cannot take over a built-in's name.
    assert type(table["anthropic"]).__name__ == "AnthropicProvider"
    model = registry.build("echo/one", ModelOptions(base_url="http://h"))
    assert model.name == "echo/one"
    assert "echo/one says: hi (base http://h)" in model.respond(
        ModelRequest(system=[], messages=[{"role": "user", "content": "hi"}])).text
    assert registry.get("echo2").name == "echo2"  # a zero-argument callable returning a provider
    assert registry.info("echo/small").context_window == 8192
    with pytest.raises(ModelError, match="^echo/refuse has no tool support; pick echo/small$"):
        registry.build("echo/refuse")


def test_the_unknown_provider_message_names_plugins(plugin: Path) -> None:
    with pytest.raises(ModelError, match=r"known: anthropic, echo, echo2, local, ollama, openai, openai-compatible$"):
        registry.get("nope")


# --------------------------------------------------------------------------- costs and budget


def test_cost_comes_from_the_registry_price_only(plugin: Path) -> None:
    usage = Usage(input_tokens=1000, output_tokens=500, cache_read_input_tokens=2000)
    # No cache rate: cached tokens cost the input rate (no discount is invented).
    assert pricing.cost_usd("echo/priced", usage) == pytest.approx((3000 * 1.0 + 500 * 2.0) / 1e6)
    assert pricing.cost_usd("echo/free", usage) is None
    assert pricing.cost_usd("nope/model", usage) is None
    assert pricing.cost_usd("claude-sonnet-5-5", usage) == pytest.approx(
        (1000 * 2.0 + 500 * 10.0 + 2000 * 0.1) / 1e6)
    assert pricing.cost_of(Price(input=1.0, output=1.0, cache_write=5.0, cache_read=0.5),
                           Usage(cache_creation_input_tokens=1_000_000)) == pytest.approx(5.0)


def test_budget_from_the_window() -> None:
    assert budget_for(None) == DEFAULT_BUDGET
    assert budget_for(8192) == 4096
    assert budget_for(1000) == MIN_BUDGET
    assert budget_for(200_000) == DEFAULT_BUDGET


# --------------------------------------------------------------------------- subagents


SUB = """---
name: helper
description: Helps. Use for anything.
model: {model}
---
You help.
"""


def test_a_subagents_model_is_made_by_the_registry(plugin: Path, store: SqlStore) -> None:
    store.write("agent:a", "/subagents/helper.md", SUB.format(model="echo/sub"))
    view = AgentView(store, "a", user="tester")
    parent = ScriptedModel()
    agent = build_agent(view, parent, yolo=True, threads=ThreadStore(store.engine),
                        model_factory=cli_models.factory("claude-sonnet-5-5", ModelOptions(base_url="http://main")))
    parent.enqueue_tool_use("task", {"subagent": "helper", "description": "find tea"})
    parent.enqueue_text("done")
    agent.turn("go")
    result = last_tool_result(parent)
    # The subagent's model is the plugin's; --base-url belongs to the chat's provider only.
    assert result["content"] == "echo/sub says: find tea (base None)"
    assert not result.get("is_error")


def test_a_subagent_model_that_cannot_be_made_is_a_tool_error(plugin: Path, store: SqlStore) -> None:
    store.write("agent:a", "/subagents/helper.md", SUB.format(model="nope/x"))
    view = AgentView(store, "a", user="tester")
    parent = ScriptedModel()
    agent = build_agent(view, parent, yolo=True, threads=ThreadStore(store.engine),
                        model_factory=cli_models.factory("claude-sonnet-5-5", ModelOptions()))
    parent.enqueue_tool_use("task", {"subagent": "helper", "description": "x"})
    parent.enqueue_text("ok")
    agent.turn("go")
    result = last_tool_result(parent)
    assert result["is_error"] is True
    assert "asks for model 'nope/x'" in str(result["content"])
    assert "unknown model provider 'nope'" in str(result["content"])


# --------------------------------------------------------------------------- the commands


@pytest.fixture
def cli_plugin(plugin_dir: Path, chat_env: None) -> dict[str, str]:
    """Environment for ``memagent`` subprocesses that see the plugin; an agent ``bot``."""
    from memagent.agent.cli import config
    from memagent.vfs import open_store

    s = open_store(config.db_url())
    s.create_agent("bot", {"/AGENTS.md": ""})
    s.close()
    path = os.pathsep.join(p for p in (str(plugin_dir), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "MEMAGENT_MODEL": ""}


def test_chat_model_option_env_and_base_url_resolve_through_the_registry(cli_plugin: dict[str, str]) -> None:
    p = run("chat", "bot", "--model", "echo/one", stdin="hello\n", env=cli_plugin)
    assert p.returncode == 0, err(p)
    assert "model echo/one" in out(p) and "echo/one says: hello (base None)" in out(p)
    p = run("chat", "bot", stdin="hello\n", env={**cli_plugin, "MEMAGENT_MODEL": "echo/two"})
    assert p.returncode == 0, err(p)
    assert "echo/two says: hello" in out(p)
    p = run("chat", "bot", "--model", "echo/one", "--base-url", "http://127.0.0.1:1234/v1", stdin="hi\n",
            env={**cli_plugin, "MEMAGENT_MODEL": "echo/two"})
    assert p.returncode == 0, err(p)
    assert "echo/one says: hi (base http://127.0.0.1:1234/v1)" in out(p)


def test_chat_cost_line_dollars_only_with_a_known_price(cli_plugin: dict[str, str]) -> None:
    p = run("chat", "bot", "--model", "echo/priced", stdin="hello\n", env=cli_plugin)
    assert p.returncode == 0, err(p)
    assert "[1,000 tokens in · 500 out · $0.0020]" in out(p)
    p = run("chat", "bot", "--model", "echo/free", stdin="hello\n", env=cli_plugin)
    assert p.returncode == 0, err(p)
    assert "[1,000 tokens in · 500 out · cost unknown]" in out(p) and "$" not in out(p)


def test_chat_budget_defaults_to_half_the_known_window(cli_plugin: dict[str, str]) -> None:
    p = run("chat", "bot", "--model", "echo/small", stdin="/context\n", env=cli_plugin)
    assert p.returncode == 0, err(p)
    assert re.search(r"Context: [\d,]+ of 4,096 tokens", out(p)), out(p)
    p = run("chat", "bot", "--model", "echo/small", "--context-budget", "3000", stdin="/context\n",
            env=cli_plugin)
    assert re.search(r"Context: [\d,]+ of 3,000 tokens", out(p)), out(p)


@pytest.mark.parametrize("args,extra,expected", [
    (["--model", "nope/x"], {}, "memagent: unknown model provider 'nope'; known: anthropic, echo, echo2, "
                                "local, ollama, openai, openai-compatible"),
    (["--model", "openai/"], {}, "memagent: bad model id 'openai/': use provider/model, e.g. openai/gpt-5.1"),
    (["--model", "echo/one"], {"ECHO_PLUGIN_OFF": "1"},
     "memagent: echo is switched off: unset ECHO_PLUGIN_OFF and run `memagent chat` again"),
    ([], {}, "memagent: no API key: set one with `export ANTHROPIC_API_KEY=...` and run `memagent chat` again, "
             "or with no key: `memagent models pull local`, then `memagent chat --model local`"),
])
def test_chat_model_problems_are_one_line(cli_plugin: dict[str, str], args: list[str], extra: dict[str, str],
                                          expected: str) -> None:
    p = run("chat", "bot", *args, stdin="hello\n", env={**cli_plugin, **extra})
    assert p.returncode == 1
    assert err(p).strip() == expected


def test_remember_and_reflect_use_the_registry(cli_plugin: dict[str, str]) -> None:
    p = run("remember", "bot", "Use short answers.", "--model", "echo/one", env=cli_plugin)
    assert p.returncode == 0, err(p)
    assert "echo/one says:" in out(p)
    p = run("reflect", "bot", "--model", "nope/x", env=cli_plugin)
    assert p.returncode == 1 and "unknown model provider 'nope'" in err(p)
    p = run("remember", "bot", "x", "--model", "echo/refuse", env=cli_plugin)
    assert p.returncode == 1
    assert err(p).strip() == "memagent: echo/refuse has no tool support; pick echo/small"


def test_models_lists_providers_variables_and_local_models(cli_plugin: dict[str, str]) -> None:
    p = run("models", env=cli_plugin)
    assert p.returncode == 0, err(p)
    text = out(p)
    assert re.search(r"^anthropic +no +ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, ANTHROPIC_BASE_URL$", text, re.M)
    assert "no API key: set one with `export ANTHROPIC_API_KEY=...`" in text
    assert re.search(r"^echo +yes +ECHO_PLUGIN_OFF$", text, re.M)
    assert "local models: echo-small, echo-large" in text
    # A local server that is not running is one line, not a failure.
    assert "local models: none (cannot reach the echo server at http://127.0.0.1:9)" in text
    assert "broken" not in text and "Traceback" not in err(p)
    rows = {r["provider"]: r for r in json.loads(out(run("models", "--json", env=cli_plugin)))}
    assert rows["echo"]["configured"] is True and rows["echo"]["local_models"] == ["echo-small", "echo-large"]
    assert rows["echo2"]["local_error"] == "cannot reach the echo server at http://127.0.0.1:9"
    assert rows["anthropic"]["configured"] is False


def test_models_says_which_model_is_used(cli_plugin: dict[str, str]) -> None:
    p = run("models", env={**cli_plugin, "MEMAGENT_MODEL": "ollama/qwen3:8b", "ANTHROPIC_API_KEY": "k"})
    assert p.returncode == 0, err(p)
    assert re.search(r"^anthropic +yes ", out(p), re.M)
    assert "model used: ollama/qwen3:8b" in out(p)
