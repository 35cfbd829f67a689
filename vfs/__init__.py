"""The virtual filesystem: versioned files in scopes, stored in SQLite or Postgres.

Entry points: ``open_memory(url)`` migrates the database and returns a ``Memory``
(files, threads, review queue, approval rules, vectors; vfs/memory.py); ``open_store(url)``
is its store alone, a ``SqlStore`` (close either with ``close()``, or use it as a
context manager). Changes take one path:
``prepare_*`` returns a ``PendingChange`` (types.py), ``commit`` stores it
(files/revisions.py). Diagnostics go to the ``memagent.vfs`` logger, silent unless the
application configures logging. This package never imports ``memagent.agent``.

The public face: code outside ``vfs`` (the agent, the front ends, the integrations)
imports from ``memagent.vfs`` only, never from a ``memagent.vfs.<module>`` path
(tests/test_layers.py enforces it, tests/test_vfs_public_face.py pins ``__all__``).
Besides the store, each public name is imported from its module on first use
(``_LAZY``, PEP 562), so ``import memagent.vfs`` costs no more than the store does:
the review queue, threads, approval rules and the renderers load when asked for.
A few names are renamed where the module's name carried the meaning
(``entrance.submit`` is ``submit_change``, ``paths.normalize`` is ``normalize_path``,
``db.connect`` is ``connect_database``, ``grep.engine.render`` is ``render_grep``, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memagent.vfs.db import connect, require_existing
from memagent.vfs.files.store import SqlStore, Store, Validator
from memagent.vfs.lazy import face

if TYPE_CHECKING:
    from memagent.vfs.backends.postgres_roles import (
        GrantKind,
        check_role_name,
        create_role,
        drop_role,
        require_postgres_url,
    )
    from memagent.vfs.backends.postgres_roles import (
        describe as describe_grants,
    )
    from memagent.vfs.backends.postgres_roles import (
        grant as grant_role,
    )
    from memagent.vfs.backends.postgres_roles import (
        grants as role_grants,
    )
    from memagent.vfs.backends.postgres_roles import (
        revoke as revoke_role,
    )
    from memagent.vfs.backends.postgres_roles import (
        scopes_of as scopes_of_grant,
    )
    from memagent.vfs.db import (
        HEAD as SCHEMA_HEAD,
    )
    from memagent.vfs.db import (
        DatabaseMissing,
    )
    from memagent.vfs.db import (
        connect as connect_database,
    )
    from memagent.vfs.db import (
        upgrade as upgrade_database,
    )
    from memagent.vfs.embeddings.base import SEARCH_MODES, EmbedderError, SearchMode
    from memagent.vfs.embeddings.base import check_mode as check_search_mode
    from memagent.vfs.embeddings.hybrid import DEFAULT_MODE as DEFAULT_SEARCH_MODE
    from memagent.vfs.entrance import (
        REASON_CHARS,
        reason_line,
    )
    from memagent.vfs.entrance import (
        Policy as WritePolicy,
    )
    from memagent.vfs.entrance import (
        Refused as WriteRefused,
    )
    from memagent.vfs.entrance import (
        Request as WriteRequest,
    )
    from memagent.vfs.entrance import (
        Verdict as WriteVerdict,
    )
    from memagent.vfs.entrance import (
        approved as approved_policy,
    )
    from memagent.vfs.entrance import (
        asking as asking_policy,
    )
    from memagent.vfs.entrance import (
        move as move_file,
    )
    from memagent.vfs.entrance import (
        queue as queue_policy,
    )
    from memagent.vfs.entrance import (
        refusing as refusing_policy,
    )
    from memagent.vfs.entrance import (
        require as require_change,
    )
    from memagent.vfs.entrance import (
        submit as submit_change,
    )
    from memagent.vfs.entrance import (
        yolo as yolo_policy,
    )
    from memagent.vfs.errors import (
        AgentNotFound,
        AlreadyExists,
        DatabaseUnavailable,
        InvalidPath,
        InvalidPattern,
        IsADirectory,
        NotFound,
        StaleVersion,
        ValidationFailed,
        VfsError,
    )
    from memagent.vfs.files.bulk import ChangedSince
    from memagent.vfs.files.edits import apply_edit, unified_diff
    from memagent.vfs.files.revisions import check_message
    from memagent.vfs.files.store import check_agent_name, no_agent_message
    from memagent.vfs.grep.engine import render as render_grep
    from memagent.vfs.grep.globbing import compile_glob
    from memagent.vfs.memory import Memory, memory_of, open_memory
    from memagent.vfs.paths import (
        MOUNTS,
        RESERVED_PREFIXES,
        dir_prefix,
        normalize_file,
        scope_name,
    )
    from memagent.vfs.paths import (
        basename as path_basename,
    )
    from memagent.vfs.paths import (
        normalize as normalize_path,
    )
    from memagent.vfs.records.episodes import built_in_message, render_message, typed_part
    from memagent.vfs.records.queue import (
        INTEGRATION_PREFIX,
        QUEUED_BY,
        Busy,
        NewProposal,
        Proposal,
        ProposalOp,
        ProposalStore,
        ThreadMessage,
    )
    from memagent.vfs.records.rules import (
        MCP_PREFIX,
        RULES_PATH,
        TOOL_OF_OP,
        Action,
        FileTool,
        Match,
        Rule,
        RuleBook,
        RuleError,
        parse_rule,
    )
    from memagent.vfs.records.threads import ThreadStore
    from memagent.vfs.render import (
        human_size,
        render_blame,
        render_log,
        render_ls,
        render_numbered,
        render_search,
        when,
    )
    from memagent.vfs.scopes import AgentView
    from memagent.vfs.terminal_text import shown
    from memagent.vfs.types import Approval, Author, Change, FileContent, FileInfo, Origin, PendingChange, SearchHit

# Public name -> (module under memagent.vfs, its name there). Keep in step with the
# TYPE_CHECKING imports above (tests/test_vfs_public_face.py checks both against __all__).
_LAZY: dict[str, tuple[str, str]] = {
    "Action": ("records.rules", "Action"),
    "FileTool": ("records.rules", "FileTool"),
    "MCP_PREFIX": ("records.rules", "MCP_PREFIX"),
    "Match": ("records.rules", "Match"),
    "RULES_PATH": ("records.rules", "RULES_PATH"),
    "Rule": ("records.rules", "Rule"),
    "RuleBook": ("records.rules", "RuleBook"),
    "RuleError": ("records.rules", "RuleError"),
    "TOOL_OF_OP": ("records.rules", "TOOL_OF_OP"),
    "parse_rule": ("records.rules", "parse_rule"),
    "GrantKind": ("backends.postgres_roles", "GrantKind"),
    "check_role_name": ("backends.postgres_roles", "check_role_name"),
    "create_role": ("backends.postgres_roles", "create_role"),
    "describe_grants": ("backends.postgres_roles", "describe"),
    "drop_role": ("backends.postgres_roles", "drop_role"),
    "grant_role": ("backends.postgres_roles", "grant"),
    "role_grants": ("backends.postgres_roles", "grants"),
    "require_postgres_url": ("backends.postgres_roles", "require_postgres_url"),
    "revoke_role": ("backends.postgres_roles", "revoke"),
    "scopes_of_grant": ("backends.postgres_roles", "scopes_of"),
    "ChangedSince": ("files.bulk", "ChangedSince"),
    "DatabaseMissing": ("db", "DatabaseMissing"),
    "SCHEMA_HEAD": ("db", "HEAD"),
    "connect_database": ("db", "connect"),
    "upgrade_database": ("db", "upgrade"),
    "apply_edit": ("files.edits", "apply_edit"),
    "unified_diff": ("files.edits", "unified_diff"),
    "EmbedderError": ("embeddings.base", "EmbedderError"),
    "SEARCH_MODES": ("embeddings.base", "SEARCH_MODES"),
    "SearchMode": ("embeddings.base", "SearchMode"),
    "check_search_mode": ("embeddings.base", "check_mode"),
    "DEFAULT_SEARCH_MODE": ("embeddings.hybrid", "DEFAULT_MODE"),
    "built_in_message": ("records.episodes", "built_in_message"),
    "render_message": ("records.episodes", "render_message"),
    "typed_part": ("records.episodes", "typed_part"),
    "AgentNotFound": ("errors", "AgentNotFound"),
    "AlreadyExists": ("errors", "AlreadyExists"),
    "DatabaseUnavailable": ("errors", "DatabaseUnavailable"),
    "InvalidPath": ("errors", "InvalidPath"),
    "InvalidPattern": ("errors", "InvalidPattern"),
    "IsADirectory": ("errors", "IsADirectory"),
    "NotFound": ("errors", "NotFound"),
    "StaleVersion": ("errors", "StaleVersion"),
    "ValidationFailed": ("errors", "ValidationFailed"),
    "VfsError": ("errors", "VfsError"),
    "compile_glob": ("grep.globbing", "compile_glob"),
    "Memory": ("memory", "Memory"),
    "memory_of": ("memory", "memory_of"),
    "open_memory": ("memory", "open_memory"),
    "MOUNTS": ("paths", "MOUNTS"),
    "RESERVED_PREFIXES": ("paths", "RESERVED_PREFIXES"),
    "path_basename": ("paths", "basename"),
    "dir_prefix": ("paths", "dir_prefix"),
    "normalize_path": ("paths", "normalize"),
    "normalize_file": ("paths", "normalize_file"),
    "scope_name": ("paths", "scope_name"),
    "Busy": ("records.queue", "Busy"),
    "INTEGRATION_PREFIX": ("records.queue", "INTEGRATION_PREFIX"),
    "NewProposal": ("records.queue", "NewProposal"),
    "Proposal": ("records.queue", "Proposal"),
    "ProposalOp": ("records.queue", "ProposalOp"),
    "ProposalStore": ("records.queue", "ProposalStore"),
    "QUEUED_BY": ("records.queue", "QUEUED_BY"),
    "ThreadMessage": ("records.queue", "ThreadMessage"),
    "human_size": ("render", "human_size"),
    "render_blame": ("render", "render_blame"),
    "render_log": ("render", "render_log"),
    "render_ls": ("render", "render_ls"),
    "render_numbered": ("render", "render_numbered"),
    "render_search": ("render", "render_search"),
    "when": ("render", "when"),
    "check_message": ("files.revisions", "check_message"),
    "AgentView": ("scopes", "AgentView"),
    "render_grep": ("grep.engine", "render"),
    "check_agent_name": ("files.store", "check_agent_name"),
    "no_agent_message": ("files.store", "no_agent_message"),
    "shown": ("terminal_text", "shown"),
    "ThreadStore": ("records.threads", "ThreadStore"),
    "Approval": ("types", "Approval"),
    "Author": ("types", "Author"),
    "Change": ("types", "Change"),
    "FileContent": ("types", "FileContent"),
    "FileInfo": ("types", "FileInfo"),
    "Origin": ("types", "Origin"),
    "PendingChange": ("types", "PendingChange"),
    "SearchHit": ("types", "SearchHit"),
    "WritePolicy": ("entrance", "Policy"),
    "REASON_CHARS": ("entrance", "REASON_CHARS"),
    "WriteRefused": ("entrance", "Refused"),
    "WriteRequest": ("entrance", "Request"),
    "WriteVerdict": ("entrance", "Verdict"),
    "approved_policy": ("entrance", "approved"),
    "asking_policy": ("entrance", "asking"),
    "move_file": ("entrance", "move"),
    "queue_policy": ("entrance", "queue"),
    "reason_line": ("entrance", "reason_line"),
    "refusing_policy": ("entrance", "refusing"),
    "require_change": ("entrance", "require"),
    "submit_change": ("entrance", "submit"),
    "yolo_policy": ("entrance", "yolo"),
}


def open_store(url: str, *, validator: Validator | None = None, migrate: bool = True,
               create: bool = True) -> SqlStore:
    """``create=False`` refuses a SQLite file that does not exist (``DatabaseUnavailable``)
    instead of creating it and its folder: for commands that only read."""
    if not create:
        require_existing(url)
    return SqlStore(connect(url, migrate=migrate), validator=validator)


if not TYPE_CHECKING:
    __getattr__ = face(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["Action", "AgentNotFound", "AgentView", "AlreadyExists", "Approval", "Author", "Busy", "Change",
           "ChangedSince", "DEFAULT_SEARCH_MODE", "DatabaseMissing", "DatabaseUnavailable", "EmbedderError",
           "FileContent", "FileInfo", "FileTool", "GrantKind", "INTEGRATION_PREFIX", "InvalidPath", "InvalidPattern",
           "IsADirectory", "MCP_PREFIX", "MOUNTS", "Match", "Memory", "NewProposal", "NotFound", "Origin",
           "PendingChange", "Proposal", "ProposalOp", "ProposalStore", "QUEUED_BY", "REASON_CHARS", "RESERVED_PREFIXES",
           "RULES_PATH", "Rule", "RuleBook", "RuleError", "SCHEMA_HEAD", "SEARCH_MODES", "SearchHit", "SearchMode",
           "SqlStore", "StaleVersion", "Store", "TOOL_OF_OP", "ThreadMessage", "ThreadStore", "ValidationFailed",
           "VfsError", "WritePolicy", "WriteRefused", "WriteRequest", "WriteVerdict", "apply_edit", "approved_policy",
           "asking_policy", "built_in_message", "check_agent_name", "check_message", "check_role_name",
           "check_search_mode", "compile_glob", "connect_database", "create_role", "describe_grants", "dir_prefix",
           "drop_role", "grant_role", "human_size", "memory_of", "move_file", "no_agent_message", "normalize_file",
           "normalize_path", "open_memory", "open_store", "parse_rule", "path_basename", "queue_policy", "reason_line",
           "refusing_policy", "render_blame", "render_grep", "render_log", "render_ls", "render_message",
           "render_numbered", "render_search", "require_change", "require_postgres_url", "revoke_role", "role_grants",
           "scope_name", "scopes_of_grant", "shown", "submit_change", "typed_part", "unified_diff", "upgrade_database",
           "when", "yolo_policy"]
