"""The ``ollama`` provider against the Ollama-shaped routes of ``FakeOpenAIAPI``: the
window from ``/api/show`` (and as the chat's context budget), a model without tools
refused in one line, local models, an unreachable server, and a turn over ``/v1``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.fake_openai_api import FakeOpenAIAPI, OllamaModel
from memagent.agent.cli import config
from memagent.agent.model import ModelError, ModelRequest, registry
from memagent.agent.model.providers.ollama import context_window, root_url
from memagent.agent.model.providers.openai_compat import OpenAIModel
from memagent.agent.model.registry import ModelOptions
from memagent.vfs import SqlStore, open_store
from tests.cli_helpers import err, out, run

TOOLS = OllamaModel("qwen3:8b", num_ctx=8192)
TRAINED = OllamaModel("llama3.1:8b", arch="llama", context_length=131072)
NO_TOOLS = OllamaModel("gemma3:1b", capabilities=("completion", "vision"), arch="gemma3")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, chat_env: None) -> Iterator[FakeOpenAIAPI]:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MEMAGENT_MODEL"):
        monkeypatch.delenv(var, raising=False)
    with FakeOpenAIAPI(ollama_models=[TOOLS, TRAINED, NO_TOOLS]) as api:
        monkeypatch.setenv("OLLAMA_HOST", api.root_url)
        yield api


def test_the_window_comes_from_api_show(server: FakeOpenAIAPI) -> None:
    built = registry.build("ollama/qwen3:8b")
    assert isinstance(built, OpenAIModel)
    assert built.name == "ollama/qwen3:8b" and built.context_window == 8192  # num_ctx wins
    assert built.base_url == f"{server.root_url}/v1"
    assert registry.info("ollama/llama3.1:8b").context_window == 131072  # else the trained length
    assert ("/api/show", {"model": "qwen3:8b"}) in server.native_requests
    assert registry.info("ollama/llama3.1:8b").price is None


def test_a_model_without_tools_is_refused_in_one_line(server: FakeOpenAIAPI) -> None:
    with pytest.raises(ModelError) as caught:
        registry.build("ollama/gemma3:1b")
    assert str(caught.value) == (
        "ollama/gemma3:1b cannot call tools (its capabilities: completion, vision), and memagent works "
        "through tools; pick a model that has them, e.g. `ollama pull qwen3:8b` and --model ollama/qwen3:8b "
        "(`memagent models` lists the local ones)")
    assert server.requests == []  # nothing was sent to the chat endpoint


def test_a_model_not_pulled_says_how_to_pull_it(server: FakeOpenAIAPI) -> None:
    with pytest.raises(ModelError, match=r"has no model 'mistral:7b'; pull it with `ollama pull mistral:7b`"):
        registry.build("ollama/mistral:7b")


def test_local_models_and_status(server: FakeOpenAIAPI) -> None:
    provider = registry.get("ollama")
    assert provider.local_models() == ["gemma3:1b", "llama3.1:8b", "qwen3:8b"]
    status = provider.status()
    assert status.configured and status.detail == f"Ollama at {server.root_url}: 3 local models"
    assert provider.env_vars == ("OLLAMA_HOST",)


def test_an_ollama_that_is_not_running_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAIAPI() as closed:
        root = closed.root_url
    monkeypatch.setenv("OLLAMA_HOST", root)
    provider = registry.get("ollama")
    with pytest.raises(ModelError, match=r"^cannot reach Ollama at .*; start it with `ollama serve`"):
        registry.build("ollama/qwen3:8b")
    assert not provider.status().configured and "start it with `ollama serve`" in provider.status().detail
    assert provider.local_models() == []
    assert registry.info("ollama/qwen3:8b").context_window is None


def test_host_forms() -> None:
    assert root_url(ModelOptions(base_url="localhost")) == "http://localhost:11434"
    assert root_url(ModelOptions(base_url="0.0.0.0:8080")) == "http://127.0.0.1:8080"
    assert root_url(ModelOptions(base_url="https://box.lan:443/v1/")) == "https://box.lan:443"


def test_context_window_of_odd_answers() -> None:
    assert context_window({"parameters": "num_ctx                        4096\nstop x"}) == 4096
    assert context_window({"model_info": {"general.architecture": "x"}}) is None
    assert context_window({"model_info": {"foo.context_length": 2048}}) == 2048
    assert context_window(None) is None


def test_a_turn_over_v1_with_a_tool_call(server: FakeOpenAIAPI) -> None:
    ids = server.enqueue_tool_calls([("ls", {"path": "/"})], text="Looking.")
    response = registry.build("ollama/qwen3:8b").respond(
        ModelRequest([], [{"role": "user", "content": "what do you know?"}]))
    assert response.tool_uses == [{"type": "tool_use", "id": ids[0], "name": "ls", "input": {"path": "/"}}]
    body = server.requests[0]
    assert body["model"] == "qwen3:8b" and body["max_tokens"] == 4096
    assert server.headers[0]["authorization"] == "Bearer ollama"


# -- memagent chat ----------------------------------------------------------------------


@pytest.fixture
def bot(chat_env: None) -> Iterator[str]:
    s: SqlStore = open_store(config.db_url())
    s.create_agent("bot", {"/AGENTS.md": ""})
    s.close()
    yield "bot"


def test_chat_budget_defaults_to_half_the_ollama_window(server: FakeOpenAIAPI, bot: str) -> None:
    server.enqueue_text("Hello from qwen.")
    p = run("chat", bot, "--model", "ollama/qwen3:8b", stdin="hi\n/context\n")
    assert p.returncode == 0, err(p)
    assert "Hello from qwen." in out(p)
    assert "of 4,096 tokens" in out(p)  # half of num_ctx 8192, not Claude's default


def test_chat_says_a_model_without_tools_cannot_be_used(server: FakeOpenAIAPI, bot: str) -> None:
    p = run("chat", bot, "--model", "ollama/gemma3:1b", stdin="hi\n")
    assert "ollama/gemma3:1b cannot call tools" in err(p)
    assert len([ln for ln in err(p).splitlines() if ln.strip()]) == 1
    assert server.requests == []


def test_chat_refuses_a_model_without_tools_at_start(server: FakeOpenAIAPI, bot: str) -> None:
    p = run("chat", bot, "--model", "ollama/gemma3:1b", stdin="hi\n")
    assert p.returncode == 1
    assert err(p).startswith("memagent: ollama/gemma3:1b cannot call tools") and err(p).count("\n") == 1
    assert "bot>" not in out(p)  # refused before the first prompt
