"""A llama.cpp server (``xllamacpp``) on loopback, started on demand and shared between processes.

``ensure(model_path, threads=…, context=…)`` returns the base URL of a server running
that GGUF file: one already running (started by this or another memagent process)
or a new one. The server is a child process (``python -m
memagent.agent.model.local_server``) that loads the model, listens on 127.0.0.1 at a
port the system picks (port 0: no clash with anything), writes where it listens to a
registry file beside the models, and serves while any process that uses it lives.

Invariants:
- Lifetime: every process that uses a server writes its pid into the server's
  ``clients`` folder before it looks for the server; the server checks the folder
  twice a second and exits (removing its registry file first) when no process named
  there is alive. So it stops with the session that started it, also when that
  process is killed, unless another session still uses it.
- Reuse: a registry file is trusted only when its pid is alive, its model path is the
  same file, and its ``/health`` answers 200; otherwise a new server is started (a
  stale file is overwritten). Two processes starting at once take turns under a lock
  file (``fcntl``), so one server is started.
- Readiness is the server's ``/health`` answering 200, polled; a child that exits
  first is one ``ModelError`` line with the last line it logged (the log is
  ``server-<key>.log`` in the run folder).
- The child runs in its own session: a Ctrl-C in the terminal interrupts memagent's
  request, not a server another session may be using.
- The server answers only requests carrying its API key (``/health`` excepted), which
  is in the registry file (mode 0600); ``/slots`` is off. Loopback alone would let any
  local user, and any web page through CORS, use it.
- Importing this module imports no ``xllamacpp``; only the child does.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from memagent.agent.model.base import ModelError, one_line

__all__ = ["ServerInfo", "ensure", "release", "run_dir"]

# How long a model may take to load before a start is given up (a 1.5 B model loads in
# ~8 s; a large GGUF on a busy disk in minutes).
START_TIMEOUT = 600.0
_POLL = 0.2
_CLIENT_CHECK = 0.5


@dataclass(frozen=True)
class ServerInfo:
    pid: int
    url: str  # http://127.0.0.1:PORT (no /v1)
    model: str  # the GGUF's resolved path
    threads: int
    context: int
    key: str  # the server's API key: only who can read the registry file can use the server


def run_dir(models: Path) -> Path:
    """Where the servers' registry files, client folders, locks and logs are."""
    return models / "run"


def _key(model: Path) -> str:
    return hashlib.sha256(str(model).encode()).hexdigest()[:16]


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _healthy(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout) as response:  # noqa: S310 - loopback
            return int(response.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _read(path: Path) -> ServerInfo | None:
    try:
        data = json.loads(path.read_text("utf-8"))
        return ServerInfo(int(data["pid"]), str(data["url"]), str(data["model"]), int(data["threads"]),
                          int(data["context"]), str(data["key"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock; two starts at once start two servers
        yield
        return
    with path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _last_line(log: Path) -> str:
    try:
        lines = [ln for ln in log.read_text("utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    errors = [ln for ln in lines if " E " in ln or "error" in ln.lower()]
    return one_line((errors or lines or [""])[-1])


def ensure(model: Path, *, threads: int, context: int, models: Path) -> ServerInfo:
    """A running server of ``model`` (reused or started; see the module docstring)."""
    model = model.resolve()
    folder = run_dir(models)
    key = _key(model)
    clients = folder / f"server-{key}.clients"
    try:
        clients.mkdir(parents=True, exist_ok=True)
        (clients / str(os.getpid())).touch()
    except OSError as err:
        raise ModelError(f"cannot use {folder} for the local model server: {err.strerror or err}") from None
    registry = folder / f"server-{key}.json"
    with _locked(folder / f"server-{key}.lock"):
        found = _read(registry)
        if found is not None and found.model == str(model) and _alive(found.pid) and _healthy(found.url):
            return found
        return _start(model, threads=threads, context=context, registry=registry, clients=clients,
                      log=folder / f"server-{key}.log")


def release(model: Path, *, models: Path) -> None:
    """This process no longer uses the server of ``model`` (it stops if no one else does)."""
    clients = run_dir(models) / f"server-{_key(model.resolve())}.clients"
    (clients / str(os.getpid())).unlink(missing_ok=True)


def _start(model: Path, *, threads: int, context: int, registry: Path, clients: Path,
           log: Path) -> ServerInfo:
    registry.unlink(missing_ok=True)
    command = [sys.executable, "-m", "memagent.agent.model.local_server", "--model", str(model),
               "--threads", str(threads), "--context", str(context), "--registry", str(registry),
               "--clients", str(clients)]
    with log.open("w") as sink:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                 start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if child.poll() is not None:
            why = _last_line(log)
            raise ModelError(f"the local model server stopped while loading {model.name}"
                             + (f": {why}" if why else "") + f" (log: {log})")
        info = _read(registry)
        if info is not None and info.pid == child.pid and _healthy(info.url):
            return info
        time.sleep(_POLL)
    child.terminate()
    raise ModelError(f"the local model server did not load {model.name} in {START_TIMEOUT:.0f} s (log: {log})")


# --------------------------------------------------------------------------- the child


def _live_clients(clients: Path) -> int:
    live = 0
    for entry in clients.iterdir():
        if entry.name.isdigit() and _alive(int(entry.name)):
            live += 1
        else:
            entry.unlink(missing_ok=True)
    return live


def serve(model: Path, *, threads: int, context: int, registry: Path, clients: Path) -> int:
    """The child: load ``model``, publish where it listens, serve while a client lives."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.n_ctx = context
    params.n_parallel = 1  # one slot: the whole window for one conversation, its prefix cached
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # the system picks a free port
    params.use_jinja = True  # the GGUF's own chat template, with its tools section
    # Qwen's template puts the tools after the system text, which ends with AGENTS.md: a
    # memory write changed the middle of the prompt and llama.cpp recomputed everything after
    # it. Chunks of 256 tokens or more that are unchanged but moved are reused by shifting
    # their cached keys instead (llama-server's --cache-reuse).
    params.n_cache_reuse = 256
    # Loopback is open to every local process and to web pages (CORS): a key only the
    # registry file's readers know, and no /slots (it shows the prompts being served).
    key = secrets.token_urlsafe(24)
    params.api_keys = [key]
    params.endpoint_slots = False
    server = xllamacpp.Server(params)  # returns once the model is loaded and the port listens
    info = ServerInfo(os.getpid(), str(server.listening_address).rstrip("/"), str(model), threads, context, key)
    partial = registry.with_suffix(f".{os.getpid()}.tmp")
    handle = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(handle, "w", encoding="utf-8") as sink:
        sink.write(json.dumps(asdict(info)))
    os.replace(partial, registry)
    try:
        while _live_clients(clients):
            time.sleep(_CLIENT_CHECK)
    finally:
        if (_read(registry) or info).pid == info.pid:
            registry.unlink(missing_ok=True)
    # Out at once: this process exists only to serve, and waiting on llama.cpp's own teardown
    # (its HTTP threads) once kept a server alive minutes after its last client was gone
    # (a CI run). The system frees the model's memory and the port.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memagent.agent.model.local_server")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--context", type=int, required=True)
    parser.add_argument("--registry", type=Path, required=True)
    parser.add_argument("--clients", type=Path, required=True)
    args = parser.parse_args(argv)
    return serve(args.model, threads=args.threads, context=args.context, registry=args.registry,
                 clients=args.clients)


if __name__ == "__main__":
    sys.exit(main())
