"""An MCP server that never answers: it reads the client's ``initialize`` request and
then hangs, without a reply, until it is killed.

It notes that it got the request by appending a line to the file named by
``HANG_LOG`` (when set), so a test can wait for the very state it wants to observe
(the server started and hanging) instead of sleeping. Standard library only, so it
starts fast and depends on nothing memagent does.

Usage: ``python tests/mcp_servers/hang_server.py [--tag T]`` (``--tag`` only marks the
command line, so a test can find the process).
"""

from __future__ import annotations

import json
import os
import sys
import threading


def main() -> int:
    line = sys.stdin.readline()  # the client's first message: initialize
    path = os.environ.get("HANG_LOG")
    if path and line:
        try:
            method = json.loads(line).get("method", "?")
        except ValueError:
            method = "?"
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"got": method, "pid": os.getpid()}) + "\n")
    # Ignore whatever comes next, closed stdin included: only a signal ends it.
    threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
