"""Running the installed ``memagent`` command as a person would, in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

MEMAGENT = str(Path(sys.executable).with_name("memagent"))


def run(*args: str, stdin: bytes | str | None = None, env: dict[str, str] | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([MEMAGENT, *args], input=data, capture_output=True, env=full_env,
                          timeout=timeout)


def out(proc: subprocess.CompletedProcess[bytes]) -> str:
    return proc.stdout.decode()


def err(proc: subprocess.CompletedProcess[bytes]) -> str:
    return proc.stderr.decode()
