"""Where things live: data directory, database URL, agent, user and org names.

Precedence for each setting: command-line option, then environment variable, then
the default. The agent has one more step before the default: the name stored by
``memagent use`` in the data directory. Nothing here opens a connection.
"""

from __future__ import annotations

import getpass
import os
import re
from pathlib import Path
from typing import Literal

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


def current_agent_file() -> Path:
    """Where ``memagent use AGENT`` keeps the current agent (one name, one line)."""
    return data_dir() / "current_agent"


def stored_agent() -> str | None:
    """The agent ``memagent use`` chose, or None (no file, or one that cannot be read)."""
    try:
        name = current_agent_file().read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return name or None


def store_agent(name: str) -> Path:
    path = current_agent_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(name + "\n", "utf-8")
    return path


AgentSource = Literal["option", "MEMAGENT_AGENT", "memagent use"]


def chosen_agent(option: str | None = None) -> tuple[str, AgentSource] | None:
    """The agent named by the option, the environment or ``memagent use`` (in that order)."""
    if option:
        return option, "option"
    env = os.environ.get("MEMAGENT_AGENT")
    if env:
        return env, "MEMAGENT_AGENT"
    stored = stored_agent()
    return (stored, "memagent use") if stored else None


def agent_name(option: str | None = None) -> str:
    """The chosen agent, else ``default`` (``common.Ctx.agent_name`` also tries the only agent)."""
    chosen = chosen_agent(option)
    return chosen[0] if chosen else DEFAULT_AGENT


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
