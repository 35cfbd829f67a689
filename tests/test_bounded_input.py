"""Bounded input everywhere (issue #36): what a person or a file feeds memagent cannot
crash it, hang it or make it grow without bound.

- Standard input that is not UTF-8 (``memagent run``, ``memagent chat`` with a pipe):
  one line, exit 2, nothing sent to the model and no empty thread left behind; the
  thread store itself replaces what UTF-8 cannot encode (lone surrogates) instead of
  failing, whoever hands it such text.
- Scenario files (``memagent eval FILE``): anchors and aliases, nesting and size are
  refused in one line ``FILE:LINE: ...`` with exit 2; an alias bomb finishes at once
  under a hard address-space limit (the old parser expanded it for minutes, to 7 GB).
- Benchmark files (``--longmemeval``, ``--locomo``): nesting is refused in one line with
  exit 2, and a large file is read one record at a time: the memory a whole-file read
  of a 40 MB file adds stays far below the file's size (the old reader held about
  three copies).

Everything runs through the real ``memagent`` command in a subprocess, as a person
would; only the thread store's guard is called directly, on both databases.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.fake_messages_api import FakeMessagesAPI
from memagent.agent.cli import config
from memagent.agent.evals import benchmarks
from memagent.vfs import open_store
from memagent.vfs.files.store import SqlStore
from memagent.vfs.records.threads import ThreadStore
from tests.cli_helpers import MEMAGENT, err, out, run

# Only a hang (the old alias bomb) reaches this; a refusal takes the command's start-up time.
SAFETY_TIMEOUT = 300
# The address space the scenario commands may use: start-up needs a fraction of it.
ADDRESS_LIMIT = 1 << 30
NOT_UTF8 = b"\xff\xfe x"


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def one_line(proc: subprocess.CompletedProcess[bytes]) -> str:
    """The command's only stderr line (and no traceback)."""
    said = lines(err(proc))
    assert len(said) == 1 and "Traceback" not in err(proc), err(proc)[-3000:]
    return said[0]


# -- standard input that is not UTF-8 ------------------------------------------------------


@pytest.fixture
def home(chat_env: None) -> Iterator[SqlStore]:
    s = open_store(config.db_url())
    s.create_agent("notes", {"/AGENTS.md": "# Notes agent\n"})
    yield s
    s.close()


def model_env(api: FakeMessagesAPI) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.base_url, "MEMAGENT_STREAM": "0"}


def no_threads() -> None:
    p = run("threads", "notes")
    assert p.returncode == 0 and "no threads yet" in out(p), out(p)


@pytest.mark.parametrize("locale", ["C.UTF-8", "C"])
def test_run_refuses_stdin_that_is_not_utf8_in_one_line_and_leaves_no_thread(
        api: FakeMessagesAPI, home: SqlStore, locale: str) -> None:
    p = run("run", "notes", stdin=NOT_UTF8, env={**model_env(api), "LC_ALL": locale})
    assert p.returncode == 2, err(p)
    line = one_line(p)
    assert "not UTF-8" in line and "byte 0xff at offset 0" in line, line
    assert api.requests == []
    no_threads()


def test_run_refuses_a_task_argument_that_is_not_utf8(api: FakeMessagesAPI, home: SqlStore) -> None:
    p = run("run", "notes", os.fsdecode(b"caf\xe9 list"), env={**model_env(api), "LC_ALL": "C.UTF-8"})
    assert p.returncode == 2, err(p)
    assert "the task is not UTF-8 text (character 3)" in one_line(p)
    assert api.requests == []
    no_threads()


def test_chat_refuses_a_first_line_that_is_not_utf8_and_leaves_no_thread(api: FakeMessagesAPI,
                                                                        home: SqlStore) -> None:
    p = run("chat", "notes", stdin=NOT_UTF8 + b"\nsecond line\n", env=model_env(api))
    assert p.returncode == 2, err(p)
    assert "line 1 of standard input is not UTF-8" in one_line(p)
    assert api.requests == []
    no_threads()


def test_chat_ends_at_a_later_line_that_is_not_utf8_keeping_the_turns_before(api: FakeMessagesAPI,
                                                                             home: SqlStore) -> None:
    api.enqueue_text("Hello to you.")
    p = run("chat", "notes", stdin=b"hello there\n" + NOT_UTF8 + b"\n", env=model_env(api))
    assert p.returncode == 2, err(p)
    assert "line 2 of standard input is not UTF-8" in one_line(p)
    assert "Hello to you." in out(p) and len(api.requests) == 1
    listed = out(run("threads", "notes"))
    assert "2 messages" in listed and "hello there" in listed, listed


def test_the_thread_store_replaces_what_utf8_cannot_encode(store: SqlStore) -> None:
    threads = ThreadStore(store.db)
    tid = threads.create("a", "m")
    text = "caf\udce9 \ud800 ok"  # what surrogateescape makes of Latin-1 bytes, and a lone high surrogate
    threads.append(tid, {"role": "user", "content": [{"type": "text", "text": text}]})
    threads.append(tid, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "x", "input": {"k\udcff": ["v\udcff"]}}]})
    threads.replace_last(tid, {"role": "assistant", "content": [{"type": "text", "text": "b\udcff"}]})
    threads.save_summary(tid, 1, "summary \udcff", "fallback")
    threads.event(tid, "note", {"what": "\udcff"})
    assert threads.load(tid) == [
        {"role": "user", "content": [{"type": "text", "text": "caf\ufffd \ufffd ok"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "b\ufffd"}]},
    ]
    assert threads.get("a", tid).title == "caf\ufffd \ufffd ok"
    summary = threads.summary(tid)
    assert summary is not None and summary.text == "summary \ufffd"
    assert threads.events(tid) == [("note", {"what": "\ufffd"})]
    threads.sync(tid)  # the conversation file renders what was stored
    (made,) = threads.create_many("a", "m", [[{"role": "user", "content": [{"type": "text", "text": "x\udcff"}]}]])
    assert threads.load(made)[0]["content"][0]["text"] == "x\ufffd"


# -- scenario files -------------------------------------------------------------------------


def limited(*args: str) -> subprocess.CompletedProcess[bytes]:
    """``memagent ARGS`` under a hard address-space limit, so a bomb cannot eat the machine."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_LIMIT, ADDRESS_LIMIT))

    return subprocess.run([MEMAGENT, *args], stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=SAFETY_TIMEOUT, preexec_fn=cap)


HEAD = "name: bomb\ndescription: a hostile scenario\nsessions:\n  - turns:\n      - user: hi\n"


def alias_bomb() -> str:
    """Nine levels of aliases, each nine of the level below: 9**9 strings once expanded."""
    levels = "abcdefghi"
    parts = ['&a ["x","x","x","x","x","x","x","x","x"]']
    parts += [f"&{cur} [" + ",".join([f"*{prev}"] * 9) + "]" for prev, cur in zip(levels, levels[1:], strict=False)]
    return HEAD + "expect:\n  answer_matches: [" + ", ".join(parts) + "]\n"


@pytest.mark.parametrize(("text", "line", "said"), [
    (alias_bomb(), 7, "anchor or alias"),
    (HEAD + "expect:\n  answer_matches: &loop [a, *loop]\n", 7, "anchor or alias"),
    (HEAD + "expect:\n  answer_matches: " + "[" * 50_000 + "\n", 7, "nests deeper than 64 levels"),
    (HEAD + "expect:\n  answer_matches: " + "{a: " * 5_000 + "\n", 7, "nests deeper than 64 levels"),
    (HEAD + "expect:\n  answer_matches: x\nfiles:\n  /big.md: \"" + "y" * (2 << 20) + "\"\n", 1, "larger than"),
], ids=["alias-bomb", "recursive-anchor", "50000-brackets", "5000-braces", "size"])
def test_a_hostile_scenario_file_is_refused_in_one_line(chat_env: None, tmp_path: Path, text: str, line: int,
                                                        said: str) -> None:
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    p = limited("eval", str(path))
    assert p.returncode == 2, err(p)[-3000:]
    message = one_line(p)
    assert message.startswith(f"memagent: {path}:{line}: ") and said in message, message


# -- benchmark files ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["longmemeval", "locomo"])
@pytest.mark.parametrize("where", ["top", "inside"])
def test_a_benchmark_file_nested_100000_deep_is_refused_in_one_line(chat_env: None, tmp_path: Path, kind: str,
                                                                    where: str) -> None:
    path = tmp_path / f"{kind}.json"
    deep = "[" * 100_000 + "]" * 100_000
    path.write_text(deep if where == "top" else '[{"question_id": ' + deep + "}]")
    p = limited("eval", f"--{kind}", str(path), "--retrieval-only")
    assert p.returncode == 2, err(p)[-3000:]
    message = one_line(p)
    assert message.startswith(f"memagent: {path}:1: ") and "nests deeper than 64 levels" in message, message


def instance(n: int, sessions: int = 10, turns: int = 10) -> dict[str, Any]:
    text = "I moved the blue vase to the hall shelf and told my sister about the trip. " * 5
    return {
        "question_id": f"q{n}", "question_type": "single-session-user", "question": "Where is the vase?",
        "answer": "the hall", "question_date": "2023/05/30",
        "haystack_session_ids": [f"s{n}-{i}" for i in range(sessions)],
        "haystack_dates": ["2023/05/20 (Sat) 02:21"] * sessions,
        "haystack_sessions": [[{"role": "user" if t % 2 == 0 else "assistant", "content": f"{t} {text}"}
                               for t in range(turns)] for _ in range(sessions)],
        "answer_session_ids": [f"s{n}-0"],
    }


def write_longmemeval(path: Path, count: int) -> int:
    """``count`` instances, the last without its question (so the whole file is read, then refused)."""
    with path.open("w") as f:
        f.write("[\n")
        for n in range(count):
            item = instance(n)
            if n == count - 1:
                del item["question"]
            f.write(json.dumps(item, indent=1) + (",\n" if n < count - 1 else "\n"))
        f.write("]\n")
    return path.stat().st_size


PEAK_RSS = (
    "import resource, subprocess, sys\n"
    "p = subprocess.run(sys.argv[1:], stdin=subprocess.DEVNULL, capture_output=True)\n"
    "sys.stdout.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.stderr.buffer.write(p.stderr)\n"
    "sys.exit(p.returncode)\n"
)


def peak_rss(*args: str) -> tuple[int, subprocess.CompletedProcess[bytes]]:
    """Peak resident memory (bytes) of ``memagent ARGS``, measured by a parent of its own."""
    p = subprocess.run([sys.executable, "-c", PEAK_RSS, MEMAGENT, *args], capture_output=True,
                       timeout=SAFETY_TIMEOUT, env=dict(os.environ))
    return int(out(p)) * 1024, p


def test_a_large_benchmark_file_is_read_one_record_at_a_time(chat_env: None, tmp_path: Path) -> None:
    small, large = tmp_path / "small.json", tmp_path / "large.json"
    write_longmemeval(small, 1)
    size = write_longmemeval(large, 900)
    assert size > 30_000_000
    base, p = peak_rss("eval", "--longmemeval", str(small), "--retrieval-only")
    assert p.returncode == 2 and "instance 0" in one_line(p)
    peak, p = peak_rss("eval", "--longmemeval", str(large), "--retrieval-only")
    assert p.returncode == 2, err(p)[-3000:]
    assert "instance 899: not LongMemEval's format (KeyError: 'question')" in one_line(p)
    # The whole file was read; what that added is a small fraction of its size (old: ~3x).
    print(f"file {size / 1e6:.1f} MB; peak RSS {peak / 1e6:.1f} MB, {base / 1e6:.1f} MB for one record")
    assert peak - base < size // 4, (peak, base, size)


@pytest.mark.parametrize("chunk", [1, 7, 4096])
@pytest.mark.parametrize(("kind", "name"), [("longmemeval", "longmemeval_small.json"),
                                           ("locomo", "locomo_small.json")])
def test_reading_in_small_pieces_gives_what_one_piece_gives(chunk: int, kind: benchmarks.Benchmark,
                                                            name: str) -> None:
    path = Path(__file__).parent / "fixtures" / "eval" / name
    whole = list(benchmarks.read(kind, path, chunk=1 << 30))  # the file in one read, one json parse
    assert whole and list(benchmarks.read(kind, path, chunk=chunk)) == whole


@pytest.mark.parametrize(("text", "said"), [
    ("", ":1: not JSON or not a list of instances (the file is empty)"),
    ('\n {"a": 1}', ":2: not JSON or not a list of instances (it starts with '{' where"),
    ("[\n" + json.dumps(instance(0)) + ",\n", ":3: not JSON (Expecting value)"),
    ("[\n" + json.dumps(instance(0)) + "\n]\n[", ":4: not JSON (text after the list of instances)"),
    ("[\n" + json.dumps(instance(0)) + " x", ":2: not JSON (expected ',' or ']' after instance 0)"),
    ("[" + json.dumps(instance(0))[:-1] + ', "x": ' + "[" * 65 + "]" * 65 + "}]", ":1: instance 0 nests deeper"),
])
def test_what_is_wrong_in_a_benchmark_file_is_said_with_its_line(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "lme.json"
    path.write_text(text)
    for chunk in (3, 1 << 20):
        with pytest.raises(benchmarks.BenchmarkError) as caught:
            list(benchmarks.read("longmemeval", path, chunk=chunk))
        assert str(caught.value).startswith(f"{path}{said}"), str(caught.value)
    path.write_text("[\n]\n")
    assert list(benchmarks.read("longmemeval", path)) == []
