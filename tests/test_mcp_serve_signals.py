"""SIGINT and SIGTERM stop ``memagent mcp serve`` on stdio, with stdin a pipe or a terminal.

A client starts the server with stdin a pipe it keeps open, and stops it with
SIGINT (then SIGTERM): the server must exit while stdin stays open and silent, so
each case sends the signal after the initialize answer (the server is then
reading stdin) and waits for the process to end without closing stdin. A hang is
ended by a kill deadline and fails the test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import pexpect
import pytest

from memagent.vfs import open_store
from tests.cli_helpers import MEMAGENT
from tests.pty_helpers import Screen

LIMIT = 60.0
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "sig-test", "version": "1"}}})


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    monkeypatch.setenv("MEMAGENT_DB", url)
    store = open_store(url)
    store.create_agent("demo", {"/AGENTS.md": "# Preferences\n- Be brief.\n"})
    store.close()
    return url


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("inherited", ["default", "sigint-ignored"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_server_while_its_stdin_pipe_stays_open(db: str, sig: signal.Signals,
                                                                   inherited: str) -> None:
    proc = subprocess.Popen([MEMAGENT, "mcp", "serve", "demo"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ),
                            preexec_fn=_ignore_sigint if inherited == "sigint-ignored" else None)
    killer = threading.Timer(LIMIT, proc.kill)  # a hang ends the test, not the run
    killer.start()
    try:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write((INITIALIZE + "\n").encode())
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        assert answer["result"]["serverInfo"]["name"] == "memagent"
        proc.send_signal(sig)
        status = proc.wait()  # stdin is still open: only the signal can end it
        stderr = proc.stderr.read().decode()
    finally:
        killer.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        assert proc.stdin is not None
        proc.stdin.close()
    assert status == 0, f"exit {status}: {stderr}"
    assert stderr.splitlines()[-1] == "memagent: MCP server stopped" and "Traceback" not in stderr


@pytest.mark.parametrize("stop", ["ctrl-C", "SIGTERM"])
def test_ctrl_c_or_sigterm_stops_the_server_on_a_terminal(db: str, stop: str) -> None:
    child = pexpect.spawn(MEMAGENT, ["mcp", "serve", "demo"], env=dict(os.environ), encoding="utf-8",
                          dimensions=(40, 200), timeout=LIMIT)
    screen = Screen(child)
    try:
        screen.wait_for("ctrl-C stops", timeout=LIMIT)
        child.setecho(False)
        screen.type(INITIALIZE)
        screen.wait_for('"serverInfo"', timeout=LIMIT)
        if stop == "ctrl-C":
            child.sendintr()
        else:
            child.kill(signal.SIGTERM)
        screen.wait_for("memagent: MCP server stopped", timeout=LIMIT)
        child.expect(pexpect.EOF, timeout=LIMIT)
        child.close()
    finally:
        if child.isalive():
            child.terminate(force=True)
    assert child.exitstatus == 0 and "Traceback" not in screen.text
