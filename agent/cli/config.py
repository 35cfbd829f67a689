"""Where things live: data directory, database URL, agent, user and org names.

Precedence for each setting: command-line option, then environment variable, then
the default. Nothing here opens a connection.
"""

from __future__ import annotations

import getpass
import os
import re
from pathlib import Path

import platformdirs

DEFAULT_AGENT = "default"


def data_dir() -> Path:
    home = os.environ.get("MEMAGENT_HOME")
    return Path(home).expanduser() if home else Path(platformdirs.user_data_dir("memagent"))


def db_url(option: str | None = None) -> str:
    url = option or os.environ.get("MEMAGENT_DB")
    if url:
        return url
    return "sqlite:///" + str(data_dir() / "memagent.db")


def agent_name(option: str | None = None) -> str:
    return option or os.environ.get("MEMAGENT_AGENT") or DEFAULT_AGENT


def user_id() -> str:
    raw = os.environ.get("MEMAGENT_USER") or _login()
    return re.sub(r"[^A-Za-z0-9_.@-]", "-", raw) or "me"


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "me"


def org_id() -> str | None:
    return os.environ.get("MEMAGENT_ORG") or None
