"""Start-up time of the ``memagent`` command, as a person at a shell feels it.

``python -m bench.startup`` runs whole processes, interleaved round by round so each
command sees the same machine load, and prints a Markdown table; with ``--out`` (by
default ``bench/RESULTS.md``) it replaces the "Start-up" section of that file and
nothing else (``bench/run.py`` keeps the section when it rewrites the file).

Invariants:
- Every figure is a whole process started from scratch (``subprocess``), measured
  beside ``python -c pass`` and ``python -c "import sqlalchemy"`` (the floor of any
  command that opens the store) in the same rounds; the median and the minimum are
  reported, wall clock and CPU (user + system of the child, from ``wait4``).
- ``chat`` is "ready for input" when its prompt has been written: on a pipe (plain
  UI) and in a pseudo-terminal (prompt_toolkit + rich). The API key is a dummy and
  the base URL unreachable; no request is made before a message is sent.
- Targets: ``fs`` commands <= 0.3 s wall, ``chat`` ready <= 0.6 s wall (median), as set
  on the issue's machine; the table also scales them by this machine's ``python -c
  pass`` over that machine's (``ISSUE_PASS``), and shows each command's time above
  the ``import sqlalchemy`` floor (memagent's own share).
- ``chat`` with a ``/tools.json`` naming an MCP server that never answers (agent
  ``bench-mcp``) must be ready as soon as without one: servers start behind the
  prompt (issue 29); the server gets the default start-up limit.
- Everything happens in a temporary ``MEMAGENT_HOME``; the database is created and
  migrated before the first round, so the rounds measure a warm start.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import sections

MEMAGENT = str(Path(sys.executable).with_name("memagent"))
FS_TARGET = 0.3
CHAT_TARGET = 0.6
# ``python -c pass`` on the machine where issue 15 set the targets: `fs cat` took
# 0.53 s there, 22x ``python -c pass``. Targets scaled by this machine's
# ``python -c pass`` over that one say what the same targets ask of this machine.
ISSUE_PASS = 0.53 / 22
# A stdio MCP server that reads the client's first message and never answers it.
HANGING_TOOLS = {"mcp_servers": {"hang": {"command": sys.executable, "args": [
    "-c", "import sys, threading; sys.stdin.readline(); threading.Event().wait()"]}},
    "tools": [{"server": "hang", "name": "anything"}]}
ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()=>][0-9A-Za-z]?|[\r\x08]")


@dataclass
class Sample:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMAGENT_", "ANTHROPIC_"))}
    env.update(MEMAGENT_HOME=str(home), ANTHROPIC_API_KEY="bench-dummy-key",
               ANTHROPIC_BASE_URL="http://127.0.0.1:9", NO_COLOR="1", TERM="xterm-256color")
    return env


def run_to_exit(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, child CPU s) of a process run to its end, stdin closed."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def _until(fd: int, needle: bytes, deadline: float) -> None:
    seen = b""
    while needle not in ANSI.sub(b"", seen):
        left = deadline - time.perf_counter()
        if left <= 0:
            raise RuntimeError(f"no prompt {needle!r} within the time limit; saw {seen[-300:]!r}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(f"the process ended before its prompt; saw {seen[-300:]!r}")
            seen += chunk


def run_to_prompt(argv: list[str], env: dict[str, str], needle: bytes, *, tty: bool) -> tuple[float, float]:
    """(wall s until ``needle`` is on screen, child CPU s for the whole run) of a chat."""
    if tty:
        import pty

        master, slave = pty.openpty()
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
        os.close(slave)
        read_fd = master
    else:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        assert proc.stdout is not None
        read_fd = proc.stdout.fileno()
    try:
        _until(read_fd, needle, start + 60)
        wall = time.perf_counter() - start
    finally:
        if tty:
            os.write(master, b"\x04")  # Ctrl-D at the prompt: quit
        else:
            assert proc.stdin is not None
            proc.stdin.close()
        usage = _reap(proc, master if tty else None)
        if tty:
            os.close(master)
    return wall, usage.ru_utime + usage.ru_stime


def _reap(proc: subprocess.Popen[bytes], drain: int | None) -> Any:
    """Wait for ``proc`` (killing it after 30 s), reading ``drain`` so it never blocks; its rusage."""
    deadline = time.monotonic() + 30
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage
        if time.monotonic() > deadline:
            proc.kill()
            deadline = float("inf")
        if drain is not None:
            ready, _, _ = select.select([drain], [], [], 0.05)
            if ready:
                try:
                    os.read(drain, 65536)
                except OSError:
                    drain = None
        else:
            time.sleep(0.01)


def prepare(home: Path) -> None:
    env = _env(home)
    subprocess.run([MEMAGENT, "init", "bench", "--template", "assistant"], env=env, check=True,
                   capture_output=True)
    subprocess.run([MEMAGENT, "fs", "write", "/notes/today.md", "-a", "bench"], env=env, check=True,
                   input=b"- Use bullet points when you summarise.\n", capture_output=True)
    subprocess.run([MEMAGENT, "init", "bench-mcp"], env=env, check=True, capture_output=True)
    subprocess.run([MEMAGENT, "fs", "write", "/tools.json", "-a", "bench-mcp"], env=env, check=True,
                   input=json.dumps(HANGING_TOOLS).encode(), capture_output=True)
    # Two agents now: the commands without an agent name mean ``bench``.
    subprocess.run([MEMAGENT, "use", "bench"], env=env, check=True, capture_output=True)


_NOTES = iter(range(1_000_000))


def write_note(env: dict[str, str]) -> tuple[float, float]:
    """A write of new content each round, so every round validates and stores."""
    start = time.perf_counter()
    proc = subprocess.Popen([MEMAGENT, "fs", "write", "/knowledge/note.md"], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None
    proc.stdin.write(f"- note {next(_NOTES)}: deploys go out on Tuesdays.\n".encode())
    proc.stdin.close()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"memagent fs write exited with {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def measure(rounds: int) -> tuple[list[tuple[str, str, Sample]], str]:
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="memagent-startup-") as tmp:
        home = Path(tmp)
        prepare(home)
        env = _env(home)
        cases: list[tuple[str, str, Callable[[], tuple[float, float]]]] = [
            ("python -c pass", "baseline", lambda: run_to_exit([py, "-c", "pass"], env)),
            ('python -c "import sqlalchemy"', "floor", lambda: run_to_exit([py, "-c", "import sqlalchemy"], env)),
            ("memagent --help", "fs", lambda: run_to_exit([MEMAGENT, "--help"], env)),
            ("memagent fs cat /AGENTS.md", "fs", lambda: run_to_exit([MEMAGENT, "fs", "cat", "/AGENTS.md"], env)),
            ("memagent fs ls /", "fs", lambda: run_to_exit([MEMAGENT, "fs", "ls", "/"], env)),
            ("memagent fs grep bullet", "fs", lambda: run_to_exit([MEMAGENT, "fs", "grep", "bullet"], env)),
            ("memagent fs log /AGENTS.md", "fs", lambda: run_to_exit([MEMAGENT, "fs", "log", "/AGENTS.md"], env)),
            ("memagent fs write /knowledge/note.md (validated)", "fs", lambda: write_note(env)),
            ("memagent chat, ready for input (pipe)", "chat",
             lambda: run_to_prompt([MEMAGENT, "chat", "bench"], env, b"bench> ", tty=False)),
            ("memagent chat, ready for input (terminal)", "chat",
             lambda: run_to_prompt([MEMAGENT, "chat", "bench"], env, b"bench>", tty=True)),
            ("memagent chat, ready for input (terminal, an MCP server that hangs)", "chat",
             lambda: run_to_prompt([MEMAGENT, "chat", "bench-mcp"], env, b"bench-mcp>", tty=True)),
        ]
        samples = {name: Sample() for name, _, _ in cases}
        for _ in range(rounds + 1):  # the first round warms caches and is dropped
            for name, _, fn in cases:
                wall, cpu = fn()
                samples[name].wall.append(wall)
                samples[name].cpu.append(cpu)
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    rows = []
    for name, kind, _ in cases:
        s = samples[name]
        rows.append((name, kind, Sample(s.wall[1:], s.cpu[1:])))
    return rows, load


def table(rows: list[tuple[str, str, Sample]], rounds: int, load: str) -> str:
    base = statistics.median(next(s for _, k, s in rows if k == "baseline").wall)
    lines = [
        f"Generated by `python -m bench.startup --rounds {rounds}`: whole processes, {rounds} interleaved "
        f"rounds after one warm-up; load average at the end {load}; {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} logical cores.",
        "",
        "| command | wall median s | wall min s | CPU median s | ÷ python -c pass | above the floor s "
        "| target | met | target scaled to this machine | met (scaled) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    floor = statistics.median(next(s for _, k, s in rows if k == "floor").wall)
    scale = base / ISSUE_PASS
    for name, kind, s in rows:
        wall = statistics.median(s.wall)
        target = FS_TARGET if kind == "fs" else CHAT_TARGET if kind == "chat" else None
        met = "" if target is None else ("yes" if wall <= target else "no")
        scaled = "" if target is None else f"≤ {target * scale:.2f} s"
        met_scaled = "" if target is None else ("yes" if wall <= target * scale else "no")
        above = "" if kind in ("baseline", "floor") else f"{wall - floor:+.3f}"
        lines.append(f"| {name} | {wall:.3f} | {min(s.wall):.3f} | {statistics.median(s.cpu):.3f} | "
                     f"{wall / base:.1f}× | {above} | {'≤ ' + str(target) + ' s' if target else ''} | {met} | "
                     f"{scaled} | {met_scaled} |")
    lines += ["", f"`python -c pass` takes {base:.3f} s here against {ISSUE_PASS:.3f} s on the machine issue 15 "
                  f"measured (`fs cat` 0.53 s = 22×), so this machine is {scale:.1f}× slower at starting Python; "
                  "the scaled targets are the issue's targets times that."]
    if floor > FS_TARGET:
        lines += ["", f"On this machine `import sqlalchemy` alone, which every command that opens the store "
                      f"needs, takes {floor:.2f} s (median), more than the {FS_TARGET} s target, so the targets "
                      "in seconds cannot be met here. \"above the floor\" is what memagent adds to it: its own "
                      "imports (click, the store, the command), opening the database and doing the work."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--out", default=str(Path(__file__).with_name("RESULTS.md")),
                    help="file whose start-up section to replace ('-': print only)")
    args = ap.parse_args(argv)
    if not Path(MEMAGENT).exists() or shutil.which(sys.executable) is None:
        print(f"no memagent command beside {sys.executable}; install the package first", file=sys.stderr)
        return 1
    rows, load = measure(args.rounds)
    section = table(rows, args.rounds, load)
    print(section)
    if args.out != "-":
        sections.write(args.out, "startup", f"## Start-up\n\n{section}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
