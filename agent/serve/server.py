"""The MCP server over one agent's memory: tools, resources and prompts.

Built on the SDK's low-level ``Server`` so the tools keep the exact names, schemas
and texts of the chat's providers. Invariants:

- Tools: ``ls``, ``read_file``, ``write_file``, ``edit_file``, ``delete_file``,
  ``glob``, ``grep`` (``MemoryTools``), ``search_memory`` (``SearchTools``) and
  ``history`` (``HistoryTools``), run through a ``ToolBox``. Arguments are checked
  against the tool's own input schema first; every failure (bad arguments, a path
  rule, a validator, a stale version, the database) comes back as a tool result
  with ``isError`` and one line saying how to fix the call. Nothing a call sends
  ends the server.
- Writes take the one write path (``prepare_*`` -> version check -> gate -> commit).
  ``client`` and ``yolo`` approve in the gate (the client asked its user before it
  called, or no one is asked) and record that as the revision's approval; ``queue``
  stores the checked change as a pending proposal (``vfs.records.queue``) for
  ``memagent review`` and stores no revision. Author ``agent``; origin ``mcp`` with
  the client's name and version (from the client's ``clientInfo``).
- One ``Session`` per MCP session (the ``mcp-session-id`` of streamable HTTP; the
  process on stdio; the client's name and version when a stateless client sends no
  session id): its own ``seen`` versions, so a write over a version this session
  has not read is refused as in chat. A session's calls run one at a time, in a
  worker thread (the store is synchronous), so the event loop never blocks.
- A client's calls may overlap, so each write is checked against its own call, not
  the session's latest state. ``read_file`` reports the version it read (a last
  line ``(version N)`` and ``_meta`` ``{"path", "version"}``, as the writes do);
  a write that passes it back as ``expected_version`` is refused at any other
  version. A write without it is checked against what the session had seen when
  the server started handling the call (its ``Basis``, snapshotted on the event
  loop before the call waits for the session): it is refused if the file moved
  past that, or, for a file the session had not seen, if another call of the
  session changed it since.
- The server cannot tell which of a session's reads a versionless write rests on,
  so it keeps, per file, the reads it answered (``read_file``, a resource read)
  that no write has used yet (``Bases``): each write call uses one, and a read
  answered before the session's latest commit of the file is *replaced*. A
  ``write_file``, ``edit_file`` or ``delete_file`` without ``expected_version`` is
  refused as stale while any replaced read is unused, whatever order the calls
  arrived in: of concurrent read-then-write calls every acknowledged write rests on
  the version it replaced. A write uses the newest unused read (an acknowledged one
  found them all current; a refused one cannot have rested on a fresher read than
  the newest), so the count of replaced reads never drops below the number of
  callers still holding one. Used: a commit, a "No change", a queued proposal, a
  stale refusal (the client is told to read again). Not used: other refusals
  (validators, bad arguments, approval rules), which a client retries on the same
  read. A session's own write result is no read: with no unused read left a write
  is judged on what the session saw (its own last write), so one client that
  reads, writes, writes (or reads again) keeps working; a second read of a file
  that no write uses is indistinguishable from another caller's, and leaves
  versionless writes of that file refused (``expected_version`` still works).
- ``edit_file`` of an existing file the session had not read (``read_file``, a
  resource read or its own write) when the call arrived, without ``expected_version``,
  is refused as a blind ``write_file`` overwrite is: a client has no prompt that
  showed it the file.
- Resources are ``/AGENTS.md`` and each skill (``/skills/<name>.md``,
  ``/skills/<name>/SKILL.md``) as ``memagent://<agent>/<path>``, read at their
  current version (which counts as read for the session's ``seen``). Prompts are
  ``remember`` and ``compact``: the chat's ``/remember`` and ``/compact`` texts
  (``skills_templates/prompts/``) with a note that memory is reached through this
  server's tools. A prompt's free-text argument survives clients that split it on
  spaces: continuation arguments are declared and every value received is joined.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Final, Literal, get_args
from urllib.parse import quote, unquote

import jsonschema

from memagent.agent.tools import MUTATING, ApprovalRequest, MemoryTools, Outcome, ToolResult
from memagent.agent.tools.memory import Basis, agent_rules
from memagent.agent.tools.toolset import tool_box
from memagent.vfs import (
    QUEUED_BY,
    AgentView,
    Busy,
    NewProposal,
    NotFound,
    Origin,
    PendingChange,
    ProposalStore,
    StaleVersion,
    VfsError,
    memory_of,
)

if TYPE_CHECKING:
    from mcp.server import Server, ServerRequestContext

log = logging.getLogger("memagent.agent.serve")

ApprovalMode = Literal["client", "queue", "yolo"]
APPROVAL_MODES: Final[tuple[str, ...]] = get_args(ApprovalMode)
MAX_SESSIONS = 256  # sessions remembered at once (the oldest is forgotten first)
CLIENT_LABEL_CHARS = 100
QUEUE_WAIT = 10.0  # seconds a queued write waits for a reflection run holding the agent's queue lock
SKILL_PATTERNS = ("skills/*.md", "skills/*/SKILL.md")
MAX_RESOURCES = 500

MCP_NOTE = ("Your memory is the memagent agent {agent!r}, reached through this MCP server's tools (ls, read_file, "
            "write_file, edit_file, delete_file, glob, grep, search_memory, history). read_file a file before you "
            "change it (this server lets you edit or overwrite only what you read through it, even when a copy "
            "of /AGENTS.md is in your instructions). Every write is validated and versioned; if a write is "
            "refused because the file changed, read it again and re-apply your change.")


def client_label(name: object, version: object) -> str:
    """``name version`` of an MCP client as one short line ("unknown client" when it sent none)."""
    text = " ".join(f"{name or ''} {version or ''}".split())
    return (text or "unknown client")[:CLIENT_LABEL_CHARS]


class FixedGate:
    """``Approvals`` for a server: the client (or no one) already decided, so approve and say how."""

    def __init__(self, approval: Literal["client", "yolo"]) -> None:
        self.approval: Literal["client", "yolo"] = approval
        # --approval yolo overrides the agent's approval rules, as --yolo does elsewhere.
        self.yolo = approval == "yolo"

    def check(self, request: ApprovalRequest) -> Outcome:
        return Outcome(True, self.approval)


@dataclass
class Bases:
    """The reads of one file a session answered that no write call has used yet:
    ``fresh`` after the session's latest commit of the file, ``replaced`` before it."""

    fresh: int = 0
    replaced: int = 0

    def use(self) -> None:
        """A write call used one read: the newest (see the module docstring)."""
        if self.fresh:
            self.fresh -= 1
        elif self.replaced:
            self.replaced -= 1

    def committed(self) -> None:
        """The session committed the file: every unused read is now replaced."""
        self.replaced += self.fresh
        self.fresh = 0


class _Watched:
    """``MemoryTools`` as the session's ``ToolBox`` sees it, noting a stale refusal
    (``StaleVersion``; the box still turns it into the tool's error result)."""

    def __init__(self, memory: MemoryTools) -> None:
        self.memory = memory
        self.stale = False

    def definitions(self) -> list[dict[str, Any]]:
        return self.memory.definitions()

    def run(self, name: str, args: dict[str, Any]) -> ToolResult:
        try:
            return self.memory.run(name, args)
        except StaleVersion:
            self.stale = True
            raise


class Session:
    """The tools of one MCP session: their ``seen`` versions and the client they record."""

    def __init__(self, view: AgentView, mode: ApprovalMode, client: str, queue: ProposalStore | None) -> None:
        self.view = view
        self.client = client
        self.queue = queue
        self.lock = threading.Lock()
        gate = FixedGate("yolo" if mode == "yolo" else "client")
        # The agent's approval rules first; "ask" (no rule) is what --approval says.
        # A store with no database (a double) and no queue given has no review queue.
        records = memory_of(view) if queue is None else None
        proposals = queue if queue is not None else records.queue if records is not None else None
        rules = agent_rules(view, proposals, by=client)  # a store without a queue: queue rules refuse
        self.memory = MemoryTools(view, gate, author="agent",
                                  defer=self._enqueue if mode == "queue" else None, rules=rules)
        self.memory.origin = Origin("mcp", detail=client)
        self.watched = _Watched(self.memory)
        self.box = tool_box("serve", view, memory=self.watched)
        # Per view path: the reads answered that no write has used yet (see the module docstring).
        self.bases: dict[str, Bases] = {}
        self.schemas = {d["name"]: d["input_schema"] for d in self.box.definitions()}

    def basis(self) -> Basis:
        """What this session has seen now: the basis of a call that arrives now."""
        return self.memory.snapshot()

    def run(self, name: str, args: Any, basis: Basis | None = None) -> ToolResult:
        """Run one call, its writes checked against ``basis`` (default: taken now)."""
        with self.lock, self.memory.based_on(basis):
            if name in MUTATING:
                return self._write(name, args, basis or self.memory.snapshot())
            result = self._run(name, args, basis or self.memory.snapshot())
            if name == "read_file" and not result.is_error and result.data is not None:
                self.bases.setdefault(str(result.data["path"]), Bases()).fresh += 1
            return result

    def _write(self, name: str, args: Any, basis: Basis) -> ToolResult:
        """A mutating call, refused while a read it may rest on was replaced; see the module docstring."""
        shown = self._path_of(args)
        if shown is None or _argument_problem(self.schemas[name], args):
            return self._run(name, args, basis)  # bad arguments or path: the tool's own error says it
        bases = self.bases.setdefault(shown, Bases())
        if bases.replaced and args.get("expected_version") is None:
            bases.use()
            version = self.memory.log.last_version(shown)
            return ToolResult(
                f"{shown} may have changed since you read it: another call of this session wrote it (version "
                f"{version}) after a read of it that no write has used yet, and this call may rest on that read; "
                "read it again and re-apply your change, or pass expected_version (the N of read_file's "
                "'(version N)') so the server knows which version you read", True)
        made = len(self.memory.log.made)
        self.watched.stale = False
        result = self._run(name, args, basis)
        if not result.is_error or self.watched.stale:
            bases.use()
        if len(self.memory.log.made) > made and self.memory.log.made[-1].path == shown:
            bases.committed()
        return result

    def _path_of(self, args: Any) -> str | None:
        """The view path a mutating call names, or None when it names none this view accepts."""
        path = args.get("file_path") if isinstance(args, dict) else None
        if not isinstance(path, str):
            return None
        try:
            return self.view.resolve(path, write=True).shown
        except VfsError:
            return None

    def _blind_edit(self, name: str, args: Any, basis: Basis) -> ToolResult | None:
        """The refusal of an ``edit_file`` of an existing file this session had not read when the
        call arrived (and that names no ``expected_version``), as ``write_file`` refuses a blind
        overwrite; None for every other call. In chat the model has the prompt's memory before
        it edits; an MCP client has only what it read through this server."""
        if name != "edit_file" or not isinstance(args, dict) or args.get("expected_version") is not None:
            return None
        path = args.get("file_path")
        if not isinstance(path, str):
            return None  # the schema check answers it
        try:
            shown = self.view.resolve(path, write=True).shown
            if shown in basis.seen:
                return None
            version = self.view.stat(shown).version
        except VfsError:
            return None  # a missing file or a bad path: the tool's own error says it
        return ToolResult(f"{shown} exists (version {version}) and you have not read it; read_file it first "
                          "so you do not edit what you have not seen, then edit_file again", True)

    def _run(self, name: str, args: Any, basis: Basis) -> ToolResult:
        if name not in self.schemas:
            return ToolResult(f"unknown tool {name!r}; the tools are: {', '.join(self.schemas)}", True)
        args = {} if args is None else args
        problem = _argument_problem(self.schemas[name], args)
        if problem:
            return ToolResult(f"bad arguments for {name}: {problem}; see the tool's input schema", True)
        blind = self._blind_edit(name, args, basis)
        if blind is not None:
            return blind
        try:
            return self.box.run(name, dict(args))
        except Exception as exc:  # noqa: BLE001 - the server outlives any one call
            log.exception("tool %s failed", name)
            return ToolResult(f"{name} failed: {_one_line(exc)}; try again, and if it keeps failing check the "
                              "memagent server's database", True)

    def mark_read(self, shown: str, version: int) -> None:
        with self.lock:
            self.memory.seen[shown] = version
            self.bases.setdefault(shown, Bases()).fresh += 1

    def _enqueue(self, pending: PendingChange, reason: str) -> str:
        assert self.queue is not None
        agent = self.view.agent
        try:
            run = self.queue.start_run(agent, model=f"{QUEUED_BY}{self.client}"[:100], wait=QUEUE_WAIT)
        except Busy:
            raise VfsError(f"the review queue of agent {agent!r} is busy (a reflect run holds it); nothing was "
                           "queued: try the same call again in a minute") from None
        proposal = NewProposal(pending.scope, pending.path, pending.shown, pending.op, pending.expected_version,
                               pending.before, pending.after, reason)
        ids = self.queue.finish_run(run.id, "done", new=[proposal],
                                    note=f"queued by MCP client {self.client} (memagent mcp serve --approval queue)")
        return (f"Queued for review as proposal #{ids[0]}: {pending.op} {pending.shown}. Nothing is changed until "
                f"a person approves it with `memagent review {agent}`; {pending.shown} stays at version "
                f"{pending.expected_version} until then.")


def _argument_problem(schema: dict[str, Any], args: Any) -> str:
    if not isinstance(args, dict):
        return "arguments must be a JSON object"
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(args))
    if error is None:
        return ""
    where = "/".join(str(p) for p in error.absolute_path)
    return (f"{where}: " if where else "") + _one_line(error.message)[:300]


def _one_line(exc: object) -> str:
    return " ".join(str(exc).split())[:500] or type(exc).__name__


def prompt_text(name: str) -> str:
    """A built-in prompt (the chat's ``/remember`` and ``/compact`` guidance)."""
    files = resources.files("memagent.skills_templates")
    return files.joinpath(f"prompts/{name}.md").read_text("utf-8").strip()


# Clients such as Claude Code split a slash command's text on spaces and give the words to
# the declared arguments in order, dropping words past the last one: `/remember focus on
# citations` arrives as hint="focus" unless more arguments are declared. So a free-text
# argument is declared with this many continuation arguments (hint, hint2, ... hint24), and
# get_prompt joins every value it receives.
SPLIT_WORDS = 24
MAX_HINT_CHARS = 500


@dataclass(frozen=True)
class PromptSpec:
    name: str
    description: str
    argument: tuple[str, str] | None = None  # an optional free-text argument: name, description

    def argument_names(self) -> list[str]:
        """The free-text argument and its continuations, in the order words fill them."""
        if self.argument is None:
            return []
        first = self.argument[0]
        return [first, *(f"{first}{i}" for i in range(2, SPLIT_WORDS + 1))]


def joined_argument(spec: PromptSpec, arguments: dict[str, Any] | None) -> str:
    """The free text a client sent, whole: the declared arguments' values in order, then any it
    sent under other names (in the order sent), joined by spaces, one line, bounded."""
    given = dict(arguments or {})
    order = [n for n in spec.argument_names() if n in given] + [n for n in given if n not in spec.argument_names()]
    words = " ".join(str(given[n]) for n in order if given[n] is not None)
    return " ".join(words.split())[:MAX_HINT_CHARS]


PROMPTS = (
    PromptSpec("remember", "Reflect on this conversation and update memagent memory (AGENTS.md for standing "
                           "preferences, a skill for a task procedure).",
               ("hint", "Optional: what to remember (several words are fine)")),
    PromptSpec("compact", "Compact memagent memory: merge duplicates, generalise lists of cases into rules, move "
                          "task detail out of AGENTS.md into skills."),
)


class MemoryServer:
    """The MCP server of one agent's memory (build it, then run it on a transport)."""

    def __init__(self, view: AgentView, *, approval: ApprovalMode = "client",
                 queue: ProposalStore | None = None,
                 view_factory: Callable[[], AgentView] | None = None) -> None:
        if approval not in APPROVAL_MODES:
            raise ValueError(f"approval must be one of {', '.join(APPROVAL_MODES)}")
        if approval == "queue" and queue is None:
            raise ValueError("approval 'queue' needs the proposal store")
        self.view = view
        self.agent = view.agent
        self.approval: ApprovalMode = approval
        self.queue = queue
        self.view_factory = view_factory or (lambda: view)
        self._sessions: OrderedDict[tuple[str, str], Session] = OrderedDict()
        self._lock = threading.Lock()

    # -- sessions ----------------------------------------------------------------------

    def session(self, key: str, client: str) -> Session:
        with self._lock:
            found = self._sessions.get((key, client))
            if found is None:
                found = Session(self.view_factory(), self.approval, client, self.queue)
                self._sessions[(key, client)] = found
                while len(self._sessions) > MAX_SESSIONS:
                    self._sessions.popitem(last=False)
            else:
                self._sessions.move_to_end((key, client))
            return found

    def session_for(self, ctx: ServerRequestContext[Any, Any]) -> Session:
        params = ctx.session.client_params
        info = params.client_info if params is not None else None
        client = client_label(getattr(info, "name", ""), getattr(info, "version", ""))
        key = ""
        request = ctx.request
        headers = getattr(request, "headers", None)
        if headers is not None:
            key = str(headers.get("mcp-session-id") or "")
        return self.session(key, client)

    # -- resources -----------------------------------------------------------------------

    def uri(self, path: str) -> str:
        return f"memagent://{quote(self.agent, safe='')}{quote(path)}"

    def path_of(self, uri: str) -> str:
        prefix = f"memagent://{quote(self.agent, safe='')}/"
        if not uri.startswith(prefix):
            raise NotFound(f"{uri} is not a resource of this server; its resources are memagent://{self.agent}/... "
                           "(list them with resources/list)")
        return "/" + unquote(uri[len(prefix):])

    def resource_paths(self) -> list[str]:
        view = self.view_factory()
        paths = ["/AGENTS.md"] if view.exists("/AGENTS.md") else []
        skills: set[str] = set()
        for pattern in SKILL_PATTERNS:
            skills.update(view.glob(pattern, "/"))
        return (paths + sorted(skills))[:MAX_RESOURCES]

    def is_resource(self, path: str) -> bool:
        return path == "/AGENTS.md" or (path.startswith("/skills/") and path.endswith(".md"))

    # -- the SDK server --------------------------------------------------------------------

    def build(self) -> Server[Any]:
        """The SDK's low-level ``Server`` with this memory's handlers."""
        import anyio.to_thread
        import mcp_types as types
        from mcp.server import Server

        from memagent import __version__

        async def list_tools(ctx: ServerRequestContext[Any, Any],
                             params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
            session = self.session_for(ctx)
            # Hints for the client's permission prompt: what only reads, what can destroy (a delete;
            # kept in history, but the live file goes), and that nothing reaches outside memory.
            return types.ListToolsResult(tools=[
                types.Tool(name=d["name"], description=d["description"], input_schema=d["input_schema"],
                           annotations=types.ToolAnnotations(
                               read_only_hint=d["name"] not in MUTATING,
                               destructive_hint=d["name"] == "delete_file" if d["name"] in MUTATING else None,
                               open_world_hint=False))
                for d in session.box.definitions()])

        async def call_tool(ctx: ServerRequestContext[Any, Any],
                            params: types.CallToolRequestParams) -> types.CallToolResult:
            session = self.session_for(ctx)
            # The call's basis is what the session had seen as the call arrived, before it
            # waits for the session's earlier calls; see the module docstring.
            basis = session.basis()
            result = await anyio.to_thread.run_sync(session.run, params.name, params.arguments, basis)
            meta = dict(result.data) if result.data is not None and not result.is_error else None
            return types.CallToolResult(content=[types.TextContent(type="text", text=result.content)],
                                        is_error=result.is_error, _meta=meta)

        async def list_resources(ctx: ServerRequestContext[Any, Any],
                                 params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
            paths = await anyio.to_thread.run_sync(self.resource_paths)
            return types.ListResourcesResult(resources=[
                types.Resource(name=p.lstrip("/"), uri=self.uri(p), mime_type="text/markdown",
                               description="The agent's standing instructions" if p == "/AGENTS.md"
                               else "A skill of the agent")
                for p in paths])

        async def read_resource(ctx: ServerRequestContext[Any, Any],
                                params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
            from mcp.shared.exceptions import MCPError

            session = self.session_for(ctx)
            uri = str(params.uri)

            def read() -> tuple[str, int, str]:
                path = self.path_of(uri)
                if not self.is_resource(path):
                    raise NotFound(f"{uri} is not a resource (only /AGENTS.md and skills are); "
                                   "use the read_file tool for other files")
                fc = session.view.read(path)
                session.mark_read(fc.path, fc.version)
                return fc.path, fc.version, fc.content

            try:
                _, version, text = await anyio.to_thread.run_sync(read)
            except VfsError as exc:
                raise MCPError(code=types.INVALID_PARAMS, message=_one_line(exc)) from None
            return types.ReadResourceResult(contents=[types.TextResourceContents(
                uri=uri, mime_type="text/markdown", text=text, _meta={"version": version})])

        async def list_prompts(ctx: ServerRequestContext[Any, Any],
                               params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
            def arguments(p: PromptSpec) -> list[types.PromptArgument] | None:
                if p.argument is None:
                    return None
                first, *more = p.argument_names()
                return [types.PromptArgument(name=first, description=p.argument[1], required=False),
                        *(types.PromptArgument(name=n, required=False, description=(
                            f"Optional: more words of {first} (for clients that split arguments on spaces)"))
                          for n in more)]

            return types.ListPromptsResult(prompts=[
                types.Prompt(name=p.name, description=p.description, arguments=arguments(p)) for p in PROMPTS])

        async def get_prompt(ctx: ServerRequestContext[Any, Any],
                             params: types.GetPromptRequestParams) -> types.GetPromptResult:
            from mcp.shared.exceptions import MCPError

            spec = next((p for p in PROMPTS if p.name == params.name), None)
            if spec is None:
                raise MCPError(code=types.INVALID_PARAMS,
                               message=f"unknown prompt {params.name!r}; the prompts are: "
                                       + ", ".join(p.name for p in PROMPTS))
            text = prompt_text(spec.name) + "\n\n" + MCP_NOTE.format(agent=self.agent)
            hint = joined_argument(spec, params.arguments) if spec.argument else ""
            if hint:
                text += f"\n\nThe user adds this hint about what to remember: {hint}"
            return types.GetPromptResult(description=spec.description, messages=[
                types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))])

        return Server(
            "memagent", version=__version__,
            instructions=MCP_NOTE.format(agent=self.agent),
            on_list_tools=list_tools, on_call_tool=call_tool,
            on_list_resources=list_resources, on_read_resource=read_resource,
            on_list_prompts=list_prompts, on_get_prompt=get_prompt,
        )
