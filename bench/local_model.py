"""``python -m bench local``: the local model's speed, with 1 and 2 threads, load average beside each.

For each thread count the bundled model's server is started the way ``--model local``
starts it (``agent.model.local_server.ensure``, in a run folder of its own so no other
session's server is reused), then sent, streamed, over its OpenAI-compatible API:

- the first request of a new ``assistant`` agent (the compact prompt's system text and
  tools, as ``bench.prompt_sizes.first_request`` records them, and one question), nothing
  cached; then
- a later request: the same conversation one turn on (the answer and a second question),
  its prefix in llama.cpp's cache.

For each: time to the first streamed token (the client's clock), prompt tokens and prompt
tokens per second, generated tokens and tokens per second (llama.cpp's own ``timings``),
and the 1-minute load average when it started. The server is released and waited for
between thread counts, so only one model runs at a time. With ``--loaded WHAT`` (the machine busy on purpose) the
figures go to the "local_speed_loaded" section instead, beside the idle ones. With ``--out`` (by default
``bench/RESULTS.md``) it replaces the "local_speed" section of that file and nothing else.

Invariants:
- Temperature 0 and a fixed seed: the same prompts give the same tokens on one machine.
- The figures are the machine's as it is: the load average stands beside each, because
  on a small CPU it moves them more than anything memagent does.
- Needs the model pulled (``memagent models pull local``) and the runtime installed
  (``memagent[local]``); says so in one line otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from bench import sections
from bench.prompt_sizes import first_request
from memagent.agent.model import local_weights
from memagent.agent.model.local_server import ensure, release
from memagent.agent.model.providers.openai_compat import to_chat_tools

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
CONTEXT = 8_192
MAX_TOKENS = 48
FIRST_QUESTION = "In one sentence: what is a good name for a cat?"
LATER_QUESTION = "And one for a dog, in one sentence?"


@dataclass(frozen=True)
class Figures:
    load_avg: float
    first_token_s: float
    prompt_tokens: int
    prompt_per_s: float
    generated: int
    generated_per_s: float
    answer: str


def _load() -> float:
    return os.getloadavg()[0]


def _stream(url: str, key: str, body: dict[str, Any]) -> Figures:
    load = _load()
    request = urllib.request.Request(f"{url}/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {key}"})
    started = time.monotonic()
    first: float | None = None
    text: list[str] = []
    timings: dict[str, Any] = {}
    with urllib.request.urlopen(request, timeout=3600) as answer:  # noqa: S310 - loopback
        for raw in answer:
            line = raw.decode("utf-8").strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            timings = chunk.get("timings") or timings
            for choice in chunk.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    first = first if first is not None else time.monotonic() - started
                    text.append(piece)
    return Figures(load, first if first is not None else time.monotonic() - started,
                   int(timings.get("prompt_n", 0)), float(timings.get("prompt_per_second", 0.0)),
                   int(timings.get("predicted_n", 0)), float(timings.get("predicted_per_second", 0.0)),
                   "".join(text).strip())


def _wait_gone(pid: int) -> None:
    """Until the server has exited (this process started it: an exited one is a zombie here)."""
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.2)


def measure(threads: int, model: Path) -> tuple[float, float, Figures, Figures]:
    """(load average at start, seconds to load, first request, later request) with ``threads``."""
    request = first_request("assistant", profile="compact")
    system = "\n\n".join(str(b.get("text", "")) for b in request.system)
    tools = to_chat_tools(request.tools)
    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp)
        load = _load()
        started = time.monotonic()
        info = ensure(model, threads=threads, context=CONTEXT, models=models)
        loaded = time.monotonic() - started
        try:
            messages: list[dict[str, Any]] = [{"role": "system", "content": system},
                                              {"role": "user", "content": FIRST_QUESTION}]
            body = {"model": "local", "messages": messages, "tools": tools, "stream": True,
                    "temperature": 0, "seed": 1, "max_tokens": MAX_TOKENS}
            first = _stream(info.url, info.key, body)
            messages += [{"role": "assistant", "content": first.answer},
                         {"role": "user", "content": LATER_QUESTION}]
            later = _stream(info.url, info.key, {**body, "messages": messages})
        finally:
            release(model, models=models)
            _wait_gone(info.pid)  # the server stops with its last client: one model at a time
    return load, loaded, first, later


def table(rows: list[tuple[int, float, float, Figures, Figures]], note: str = "") -> str:
    runtime = local_weights.runtime_version() or "?"
    out = [
        "## The local model's speed (`python -m bench local`)" + (f", {note}" if note else ""),
        "",
        f"Qwen2.5-Coder-1.5B-Instruct Q4_K_M (sha256 `{local_weights.DEFAULT.sha256}`), xllamacpp {runtime}, "
        f"context {CONTEXT:,}, {os.cpu_count()} logical cores ({platform.machine()}), CPython "
        f"{platform.python_version()}. Each thread count gets its own server, started as `--model local` "
        "starts it; the first request is a new `assistant` agent's (the compact prompt and its tools, "
        "one question, nothing cached), the later one the same conversation a turn on (its prefix "
        f"cached). Streamed, temperature 0, at most {MAX_TOKENS} tokens generated. Tokens and tokens/s "
        "are llama.cpp's own timings; time to first token is the client's clock. The 1-minute load "
        "average is beside each figure.",
        "",
        "| threads | what | load | figure |",
        "|---|---|---|---|",
    ]
    for threads, load, loaded, first, later in rows:
        out.append(f"| {threads} | model load (server start to ready) | {load:.1f} | {loaded:.1f} s |")
        for name, f in (("first request", first), ("later request", later)):
            out.append(f"| {threads} | {name}: time to first token | {f.load_avg:.1f} | {f.first_token_s:.1f} s |")
            out.append(f"| {threads} | {name}: prompt | {f.load_avg:.1f} | {f.prompt_tokens:,} tokens at "
                       f"{f.prompt_per_s:.1f} tokens/s |")
            out.append(f"| {threads} | {name}: generation | {f.load_avg:.1f} | {f.generated} tokens at "
                       f"{f.generated_per_s:.1f} tokens/s |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench local", description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2", help="thread counts to measure (default 1,2)")
    parser.add_argument("--out", default=str(RESULTS), help="the results file whose section is replaced")
    parser.add_argument("--loaded", metavar="WHAT",
                        help="the machine is busy on purpose (say with what): the figures go to the "
                             "'local_speed_loaded' section, so the idle ones stay beside them")
    args = parser.parse_args(argv)
    model = local_weights.DEFAULT.path(local_weights.models_dir())
    if not local_weights.pulled(folder=local_weights.models_dir()):
        print("bench local: the local model is not pulled: run `memagent models pull local` first")
        return 2
    if local_weights.runtime_version() is None:
        print("bench local: the runtime is not installed: pip install 'memagent[local]'")
        return 2
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        load, loaded, first, later = measure(threads, model)
        rows.append((threads, load, loaded, first, later))
        print(f"{threads} thread(s): load {loaded:.1f} s; first {first.first_token_s:.1f} s to first token, "
              f"{first.prompt_per_s:.1f}/{first.generated_per_s:.1f} tokens/s; later {later.first_token_s:.1f} s, "
              f"{later.prompt_per_s:.1f}/{later.generated_per_s:.1f} tokens/s", flush=True)
    text = table(rows, f"loaded: {args.loaded}" if args.loaded else "")
    print(text)
    if args.out:
        sections.write(args.out, "local_speed_loaded" if args.loaded else "local_speed", text)
    return 0
