"""The same scripted conversation through ``memagent chat`` with Claude (the real anthropic SDK
against ``FakeMessagesAPI``) and with an OpenAI-compatible model (the real openai SDK
against ``FakeOpenAIAPI``) leaves the same memory: files, contents and revisions."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bench.fake_messages_api import FakeMessagesAPI
from bench.fake_openai_api import FakeOpenAIAPI
from memagent.agent.cli import config
from memagent.vfs import SqlStore, open_store
from memagent.vfs.scopes import AgentView
from tests.cli_helpers import err, run

# (tool, input) calls, one per model step, then a closing text; the person's answers
# to each approval are in STDIN. Agent files only: /user/ is shared by the two agents.
STEPS: list[tuple[str, dict[str, Any]]] = [
    ("write_file", {"file_path": "/AGENTS.md", "content": "# Rules\n- Be brief.\n", "reason": "a rule"}),
    ("write_file", {"file_path": "/notes/ann.md", "content": "# Ann\n- works on the launch\n"}),
    ("read_file", {"file_path": "/notes/ann.md"}),
    ("edit_file", {"file_path": "/notes/ann.md", "old_string": "launch", "new_string": "May launch"}),
    ("write_file", {"file_path": "/AGENTS.md", "content": "wiped\n"}),  # refused by the person
    ("read_file", '{"file_path": "/AGENTS.md"'),  # malformed: a tool error, nothing changes
]
STDIN = "I'm Ann, I work on the launch; be brief\ny\ny\ny\nn\n"


@pytest.fixture
def store(chat_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[SqlStore]:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OLLAMA_HOST", "MEMAGENT_MODEL"):
        monkeypatch.delenv(var, raising=False)
    s = open_store(config.db_url())
    for agent in ("claude", "other"):
        s.create_agent(agent, {"/AGENTS.md": ""})
    yield s
    s.close()


def memory(store: SqlStore, agent: str) -> dict[str, Any]:
    view = AgentView(store, agent)
    paths = sorted(p for p in ("/AGENTS.md", "/notes/ann.md") if view.exists(p))
    return {p: (view.read(p).content, [(r.version, r.author, r.approval, r.message) for r in view.history(p)])
            for p in paths}


def through_claude(run_chat: Callable[..., subprocess.CompletedProcess[bytes]]) -> list[Any]:
    with FakeMessagesAPI() as api:
        for name, args in STEPS:
            if isinstance(args, str):  # the Messages API always sends an object; the raw text is ours
                api.enqueue_tool_use(name, {"__memagent_unparsed_arguments__": args})
            else:
                api.enqueue_tool_use(name, args)
        api.enqueue_text("Done.")
        p = run_chat("claude", {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": api.base_url})
        assert p.returncode == 0, err(p)

        return api.requests


def through_openai(run_chat: Callable[..., subprocess.CompletedProcess[bytes]]) -> list[Any]:
    with FakeOpenAIAPI() as api:
        for name, args in STEPS:
            api.enqueue_tool_call(name, args)
        api.enqueue_text("Done.")
        p = run_chat("other", {"OPENAI_BASE_URL": api.base_url,
                               "MEMAGENT_MODEL": "openai-compatible/fake"})
        assert p.returncode == 0, err(p)

        return api.requests


def test_both_providers_leave_the_same_memory(store: SqlStore) -> None:
    def run_chat(agent: str, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
        return run("chat", agent, stdin=STDIN, env=env)

    claude_requests = through_claude(run_chat)
    other_requests = through_openai(run_chat)

    assert len(claude_requests) == len(other_requests) == len(STEPS) + 1
    claude, other = memory(store, "claude"), memory(store, "other")
    assert claude == other
    assert claude["/AGENTS.md"][0] == "# Rules\n- Be brief.\n"
    assert claude["/notes/ann.md"][0] == "# Ann\n- works on the May launch\n"
