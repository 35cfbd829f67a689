"""Threads: a conversation's messages, tool calls, approvals, usage and running summary.

Invariants:
- Messages are stored in API shape (role + content blocks) with a sequence number
  per thread, so a resumed thread replays exactly what the model saw. Nothing is
  ever deleted: a user turn whose model request failed is kept, marked ``failed``
  (``mark_failed``), and ``load`` leaves it out so it is never glued to the next
  turn; the last message may be replaced only by ``replace_last``.
- Memory is not history: the context budget folds old turns into a running summary
  (``save_summary``); summaries are only added, never overwritten, and the messages
  they cover stay in the table.
- A thread's title is set with its first message: the caller's ``title`` (a label
  for a built-in prompt such as /remember) or a short form of the user's first
  request (its first sentence, cut at a word boundary), never a built-in prompt.
- Each thread has a Markdown file in scope ``conversations:<agent>``, its path
  fixed with the first message; ``vfs/records/conversation_files.py`` is its only writer
  (what its ``version`` means is said there) and ``vfs/records/episodes.py`` renders it.
  Appending only marks the thread ``stale``; ``sync``/``sync_stale`` render the
  messages the file does not show yet and append them to it, so a thread is
  rendered once, piece by piece, when someone looks at ``/conversations/``
  (``AgentView`` calls ``sync_stale``), never once per message (rewriting a long
  thread's file per message would cost its whole size each time); ``sync_stale``
  renders many threads per statement. A change to a message the file already shows
  (``replace_last``, ``mark_failed``) brings the file back to a whole render in the
  same transaction.
- Whoever writes a conversation file holds its thread's row lock (Postgres ``FOR
  UPDATE``; SQLite's write lock), so concurrent renders of one thread queue, and
  the writer's compare-and-set on ``version`` refuses any that read an older state.
- Whatever text reaches the store is stored: a lone surrogate (what Python's
  surrogateescape makes of bytes that are not UTF-8, or a ``\udcff`` escape in a
  model's JSON) is replaced by U+FFFD (``storable``) in messages, titles, summaries
  and events, since neither database can encode it and a turn must not fail on it.
"""

from __future__ import annotations

import builtins
import json
import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, and_, func, insert, literal, select, update
from sqlalchemy.exc import IntegrityError

from memagent.vfs.backends import Database
from memagent.vfs.errors import VfsError
from memagent.vfs.models import events, files, messages, thread_summaries, threads
from memagent.vfs.records import conversation_files, episodes

TITLE_CHARS = 60
FAILED = "failed"
# Threads rendered per transaction by ``sync_stale``.
SYNC_CHUNK = 500


_SURROGATES = re.compile("[\ud800-\udfff]")
T = TypeVar("T")


def storable(value: T) -> T:
    """``value`` (text, or JSON-shaped data) with each lone surrogate replaced by U+FFFD.

    The common case pays one C-speed scan and returns ``value`` itself.
    """
    if isinstance(value, str):
        return _SURROGATES.sub("\ufffd", value)  # type: ignore[return-value]
    if value is None:
        return value
    text = json.dumps(value, ensure_ascii=False)
    if _SURROGATES.search(text) is None:
        return value
    return json.loads(_SURROGATES.sub("\ufffd", text))


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class ThreadInfo:
    id: str
    agent: str
    title: str
    model: str
    created_at: datetime
    updated_at: datetime
    messages: int


@dataclass(frozen=True)
class Summary:
    """A running summary: it covers the thread's messages up to ``upto_seq``."""

    upto_seq: int
    text: str
    method: str  # "model" or "fallback"
    created_at: datetime


@dataclass
class _Meta:
    agent: str
    model: str
    created_at: datetime
    path: str | None


class ThreadNotFound(VfsError):
    pass


class ThreadStore:
    """The threads of every agent, in the store's database.

    Takes the store's ``Database`` (``store.db``); an ``Engine`` is wrapped in one.
    """

    def __init__(self, db: Database | Engine) -> None:
        self.db = Database.of(db)
        self.engine = self.db.engine
        self._next_seq: dict[str, int] = {}
        self._meta: dict[str, _Meta] = {}

    @contextmanager
    def _small_write(self) -> Iterator[Connection]:
        """A connection for one or two independent statements.

        On Postgres each statement commits by itself (no BEGIN/COMMIT round trips: a
        thread's log is written several times per turn); SQLite keeps a transaction,
        which costs nothing there.
        """
        with self.db.backend.small_write(self.engine) as conn:
            yield conn

    def create(self, agent: str, model: str) -> str:
        tid = str(uuid.uuid4())
        now = _now()
        with self._small_write() as conn:  # one statement: autocommit on Postgres
            conn.execute(insert(threads).values(id=tid, agent=agent, title="", model=storable(model),
                                                created_at=now, updated_at=now))
        self._meta[tid] = _Meta(agent, model, now, None)
        self._next_seq[tid] = 1  # a new thread has no message: no need to ask
        return tid

    def create_many(self, agent: str, model: str,
                    conversations: Sequence[Sequence[dict[str, Any]]]) -> builtins.list[str]:
        """One new thread per conversation, with its messages, in one transaction.

        For loading many threads at once (an import, a test corpus): each thread is
        what ``create`` and one ``append`` per message would leave (title, file path,
        stale until its file is rendered), in two statements for the whole batch.
        """
        now = _now()
        ids: builtins.list[str] = []
        thread_rows: builtins.list[dict[str, Any]] = []
        message_rows: builtins.list[dict[str, Any]] = []
        conversations = [[{**m, "content": storable(m["content"])} for m in conversation]
                         for conversation in conversations]
        model = storable(model)
        for conversation in conversations:
            tid = str(uuid.uuid4())
            ids.append(tid)
            title = make_title(_text_of(conversation[0]["content"])) if conversation else ""
            thread_rows.append({
                "id": tid, "agent": agent, "title": title, "model": model, "created_at": now,
                "updated_at": now, "stale": bool(conversation),
                "conversation_path": episodes.file_path(now, title, tid) if conversation else None})
            message_rows.extend(
                {"thread_id": tid, "seq": seq, "role": m["role"], "content": m["content"], "usage": None,
                 "cost_usd": None, "created_at": now}
                for seq, m in enumerate(conversation, 1))
        if not ids:
            return ids
        with self._locked() as conn:
            conn.execute(insert(threads), thread_rows)
            if message_rows:
                conn.execute(insert(messages), message_rows)
        for tid, conversation in zip(ids, conversations, strict=True):
            self._next_seq[tid] = len(conversation) + 1
        return ids

    def get(self, agent: str, thread_id: str) -> ThreadInfo:
        with self.engine.connect() as conn:
            rows = self._infos(conn, agent, prefix=thread_id)
        if len(rows) != 1:
            what = "no thread" if not rows else f"{len(rows)} threads"
            verb = "matches" if not rows else "match"
            raise ThreadNotFound(
                f"{what} of agent {agent!r} {verb} id {thread_id!r}; `memagent threads {agent}` lists them "
                "(/threads in chat)"
            )
        return rows[0]

    def _infos(self, conn: Any, agent: str, prefix: str | None = None) -> list[ThreadInfo]:
        count = (select(func.count()).where(messages.c.thread_id == threads.c.id)
                 .scalar_subquery())
        q = select(threads, count.label("n")).where(threads.c.agent == agent)
        if prefix:
            q = q.where(threads.c.id.startswith(prefix, autoescape=True))
        q = q.order_by(threads.c.updated_at.desc())
        return [ThreadInfo(r.id, r.agent, r.title, r.model, r.created_at, r.updated_at, r.n)
                for r in conn.execute(q)]

    def list(self, agent: str, limit: int = 20) -> list[ThreadInfo]:
        with self.engine.connect() as conn:
            return self._infos(conn, agent)[:limit]

    def latest(self, agent: str) -> str | None:
        items = self.list(agent, 1)
        return items[0].id if items else None

    def load(self, thread_id: str) -> builtins.list[dict[str, Any]]:
        """The conversation as the model should see it (failed turns left out)."""
        return [m for _, m in self.load_numbered(thread_id)]

    def load_numbered(self, thread_id: str) -> builtins.list[tuple[int, dict[str, Any]]]:
        """(seq, message) pairs of the conversation, failed turns left out."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(messages.c.seq, messages.c.role, messages.c.content)
                .where(messages.c.thread_id == thread_id,
                       (messages.c.state.is_(None)) | (messages.c.state != FAILED))
                .order_by(messages.c.seq)
            ).all()
        return [(r.seq, {"role": r.role, "content": r.content}) for r in rows]

    def count(self, thread_id: str) -> int:
        """Every stored message of the thread, failed turns included."""
        with self.engine.connect() as conn:
            return int(conn.scalar(select(func.count()).select_from(messages)
                                   .where(messages.c.thread_id == thread_id)) or 0)

    def append(self, thread_id: str, message: dict[str, Any], *, usage: dict[str, int] | None = None,
               cost_usd: float | None = None, title: str | None = None) -> int:
        """Add a message; one short transaction (the next seq number is remembered), one
        statement on Postgres.

        Returns the message's seq. ``title`` names the thread if this is its first
        message (default: a short form of the message's text).
        """
        now = _now()
        message = {**message, "content": storable(message["content"])}
        title = storable(title)
        for attempt in (1, 2):
            seq = self._next_seq.get(thread_id) or self._last_seq(thread_id) + 1
            try:
                with self._small_write() as conn:
                    values: dict[str, Any] = {"stale": True}
                    if message["role"] == "user" and _has_text(message["content"]):
                        # Activity time orders /threads and --resume; one update per turn is enough.
                        values["updated_at"] = now
                    if seq == 1:
                        meta = self._thread_meta(conn, thread_id)
                        name = title or make_title(_text_of(message["content"]))
                        values["title"] = name
                        if meta is not None:
                            meta.path = episodes.file_path(meta.created_at, name, thread_id)
                            values["conversation_path"] = meta.path
                    row = insert(messages).values(
                        thread_id=thread_id, seq=seq, role=message["role"], content=message["content"],
                        usage=usage, cost_usd=None if cost_usd is None else f"{cost_usd:.6f}",
                        created_at=now)
                    mark = update(threads).values(**values)
                    # Together: a thread never has a message its file cannot find.
                    self.db.backend.append_message(conn, row, mark, thread_id)
            except IntegrityError:
                # Another session appended to this thread meanwhile: re-read the end once.
                self._next_seq.pop(thread_id, None)
                if attempt == 2:
                    raise
                continue
            self._next_seq[thread_id] = seq + 1
            return seq
        raise AssertionError("unreachable")

    def _last_seq(self, thread_id: str) -> int:
        with self.engine.connect() as conn:
            last = conn.scalar(select(func.max(messages.c.seq)).where(messages.c.thread_id == thread_id))
        return int(last or 0)

    def replace_last(self, thread_id: str, message: dict[str, Any]) -> None:
        with self._locked() as conn:
            agent = self._lock(conn, [thread_id]).get(thread_id)
            seq = conn.scalar(select(func.max(messages.c.seq)).where(messages.c.thread_id == thread_id))
            conn.execute(update(messages).where(messages.c.thread_id == thread_id,
                                                messages.c.seq == seq)
                         .values(content=storable(message["content"])))
            if agent is not None and seq is not None:
                self._rerender_if_shown(conn, agent, thread_id, seq, marked_failed=False)

    def mark_failed(self, thread_id: str, seq: int) -> None:
        """Keep message ``seq`` (a user turn whose request failed) out of the conversation."""
        with self._locked() as conn:
            agent = self._lock(conn, [thread_id]).get(thread_id)
            marked = conn.execute(update(messages)
                                  .where(messages.c.thread_id == thread_id, messages.c.seq == seq,
                                         messages.c.state.is_(None) | (messages.c.state != FAILED))
                                  .values(state=FAILED)).rowcount
            if agent is not None and marked:
                self._rerender_if_shown(conn, agent, thread_id, seq, marked_failed=True)

    # -- summaries ------------------------------------------------------------------

    def save_summary(self, thread_id: str, upto_seq: int, text: str, method: str) -> None:
        with self._small_write() as conn:
            conn.execute(insert(thread_summaries).values(thread_id=thread_id, upto_seq=upto_seq, text=storable(text),
                                                         method=method, created_at=_now()))

    def summary(self, thread_id: str) -> Summary | None:
        """The summary in use (the newest), if the thread has one."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(thread_summaries).where(thread_summaries.c.thread_id == thread_id)
                .order_by(thread_summaries.c.id.desc()).limit(1)
            ).first()
        return None if row is None else Summary(row.upto_seq, row.text, row.method, row.created_at)

    def summaries(self, thread_id: str) -> builtins.list[Summary]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(thread_summaries).where(thread_summaries.c.thread_id == thread_id)
                                .order_by(thread_summaries.c.id)).all()
        return [Summary(r.upto_seq, r.text, r.method, r.created_at) for r in rows]

    # -- episodic files ---------------------------------------------------------------

    def conversation_file(self, thread_id: str) -> str | None:
        """The thread's file path inside ``conversations:<agent>`` (None before its first message)."""
        with self.engine.connect() as conn:
            meta = self._thread_meta(conn, thread_id)
            if meta is not None and meta.path is None:
                meta.path = conn.scalar(select(threads.c.conversation_path).where(threads.c.id == thread_id))
        return None if meta is None else meta.path

    def _thread_meta(self, conn: Connection, thread_id: str) -> _Meta | None:
        meta = self._meta.get(thread_id)
        if meta is None:
            row = conn.execute(select(threads.c.agent, threads.c.model, threads.c.created_at,
                                      threads.c.conversation_path).where(threads.c.id == thread_id)).first()
            if row is None:
                return None
            meta = _Meta(row.agent, row.model, row.created_at, row.conversation_path)
            self._meta[thread_id] = meta
        return meta

    # The conversation file is written by ``conversation_files`` only; these methods
    # decide when. Every one holds the thread rows' lock (``_locked`` + ``_lock``), so two
    # processes rendering the same thread queue instead of both appending.

    @contextmanager
    def _locked(self) -> Iterator[Connection]:
        """A write transaction in which ``_lock`` holds thread rows until it ends."""
        with self.db.backend.locking_write(self.engine) as conn:
            yield conn

    @staticmethod
    def _lock(conn: Connection, ids: Iterable[str], *, stale_only: bool = False) -> dict[str, str]:
        """Lock the threads ``ids`` (in id order, so two lockers never deadlock): id -> agent."""
        q = select(threads.c.id, threads.c.agent).where(threads.c.id.in_(list(ids)))
        if stale_only:
            q = q.where(threads.c.stale.is_(True))
        rows = conn.execute(q.order_by(threads.c.id).with_for_update()).all()
        return {r.id: r.agent for r in rows}

    def sync(self, thread_id: str) -> None:
        """Render the messages the thread's file does not show yet, and append them to it."""
        with self._locked() as conn:
            agent = self._lock(conn, [thread_id]).get(thread_id)
            if agent is not None:
                self._render(conn, agent, [thread_id])

    def sync_stale(self, agent: str) -> int:
        """Bring every conversation file of ``agent`` up to date; returns how many changed.

        In chunks of ``SYNC_CHUNK`` threads, each one transaction of a few statements
        (lock, state, messages, insert, append, un-stale), so a first look at thousands
        of new threads costs a few round trips per chunk, not per thread.
        """
        with self.engine.connect() as conn:
            ids = list(conn.scalars(select(threads.c.id).where(threads.c.agent == agent,
                                                                threads.c.stale.is_(True))))
        done = 0
        for at in range(0, len(ids), SYNC_CHUNK):
            with self._locked() as conn:
                # Another process may have rendered some meanwhile: only those still stale.
                locked = self._lock(conn, ids[at:at + SYNC_CHUNK], stale_only=True)
                if locked:
                    self._render(conn, agent, sorted(locked))
                done += len(locked)
        return done

    def _rerender_if_shown(self, conn: Connection, agent: str, thread_id: str, seq: int, *,
                           marked_failed: bool) -> None:
        """Message ``seq`` changed: bring the file back to a whole render if it shows it.

        The common case, ``marked_failed`` (only the message's state changed, from
        none to failed) on the file's last message, only appends what the mark adds
        to that message's rendering; anything else renders the thread again (rare: an
        interrupted turn merged into a message the file shows).
        """
        path = conn.scalar(select(threads.c.conversation_path).where(threads.c.id == thread_id))
        have = None if path is None else conversation_files.state(conn, agent, path)
        if path is None or have is None or have.upto < seq:
            return  # not shown yet: the next render reads the message as it is now
        if marked_failed and have.upto == seq:
            row = conn.execute(select(messages.c.role, messages.c.content, messages.c.created_at,
                                      messages.c.state)
                               .where(messages.c.thread_id == thread_id, messages.c.seq == seq)).one()
            was = episodes.render_message(row.role, row.content, row.created_at)
            now = episodes.render_message(row.role, row.content, row.created_at, state=row.state)
            extra = now[len(was):]
            if now.startswith(was) and conversation_files.fit(have.size, extra) == extra:
                # Same bytes as a whole render: the message's piece was whole (the
                # file is not cut) and its rendering only grew at the end.
                if extra:
                    conversation_files.append_one(conn, agent, conversation_files.Grow(
                        path, extra, have, seq))
                return
        self._render(conn, agent, [thread_id], whole=True)

    def _render(self, conn: Connection, agent: str, ids: Sequence[str], *, whole: bool = False) -> None:
        """Render the locked threads ``ids`` of ``agent`` into their files, and un-stale them.

        ``whole``: render every message again and replace the content (a shown message
        changed); otherwise only the messages after the file's ``upto`` are appended.
        """
        scope = episodes.scope_of(agent)
        on_file = and_(files.c.scope == scope, files.c.path == threads.c.conversation_path)
        heads = {r.id: r for r in conn.execute(
            select(threads.c.id, threads.c.title, threads.c.model, threads.c.created_at,
                   threads.c.conversation_path, files.c.version, files.c.size)
            .select_from(threads.outerjoin(files, on_file))
            .where(threads.c.id.in_(ids), threads.c.conversation_path.is_not(None)))}
        if not heads:
            return
        shown = func.coalesce(files.c.version, 0) if not whole else literal(0)
        pending: dict[str, list[conversation_files.Message]] = {}
        for r in conn.execute(
                select(messages.c.thread_id, messages.c.seq, messages.c.role, messages.c.content,
                       messages.c.created_at, messages.c.state)
                .select_from(messages.join(threads, threads.c.id == messages.c.thread_id)
                             .outerjoin(files, on_file))
                .where(threads.c.id.in_(list(heads)), messages.c.seq > shown)
                .order_by(messages.c.thread_id, messages.c.seq)):
            pending.setdefault(r.thread_id, []).append(
                conversation_files.Message(r.seq, r.role, r.content, r.created_at, r.state))
        new: list[conversation_files.New] = []
        grow: list[conversation_files.Grow] = []
        for tid, rows in pending.items():
            h = heads[tid]
            upto = rows[-1].seq
            if h.version is None or whole:
                content = conversation_files.render_whole(conversation_files.header(
                    title=h.title, thread_id=tid, agent=agent, model=h.model, created_at=h.created_at),
                    rows)
                if h.version is None:
                    new.append(conversation_files.New(h.conversation_path, content, upto))
                else:
                    conversation_files.replace(conn, agent, h.conversation_path, content,
                                               have=conversation_files.Shown(h.version, h.size), upto=upto)
            else:
                have = conversation_files.Shown(h.version, h.size)
                grow.append(conversation_files.Grow(
                    h.conversation_path, conversation_files.render_pieces(have.size, rows), have, upto))
        conversation_files.create(conn, agent, new)
        conversation_files.append(conn, agent, grow)
        # Not stale any more, unless a message arrived that the file does not show.
        # Both subqueries name the updated ``threads`` row (explicitly: the inner one is
        # two levels down, where automatic correlation would add ``threads`` to its FROM).
        upto_now = select(files.c.version).where(on_file).correlate(threads).scalar_subquery()
        newer = (select(messages.c.id).where(messages.c.thread_id == threads.c.id,
                                              messages.c.seq > func.coalesce(upto_now, 0))
                 .correlate(threads).exists())
        conn.execute(update(threads).where(threads.c.id.in_(list(heads)), ~newer).values(stale=False))

    # -- events and usage ---------------------------------------------------------------

    def event(self, thread_id: str, kind: str, data: dict[str, Any]) -> None:
        with self._small_write() as conn:
            conn.execute(insert(events).values(thread_id=thread_id, kind=kind, data=storable(data),
                                               created_at=_now()))

    def events(self, thread_id: str) -> builtins.list[tuple[str, dict[str, Any]]]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(events.c.kind, events.c.data)
                                .where(events.c.thread_id == thread_id).order_by(events.c.id))
            return [(r.kind, r.data) for r in rows]

    def usage(self, thread_id: str) -> tuple[dict[str, int], float]:
        """Summed token usage and cost of a thread."""
        total: dict[str, int] = {}
        cost = 0.0
        with self.engine.connect() as conn:
            for u, c in conn.execute(select(messages.c.usage, messages.c.cost_usd)
                                     .where(messages.c.thread_id == thread_id)):
                for k, v in (u or {}).items():
                    total[k] = total.get(k, 0) + int(v)
                cost += float(c or 0)
        return total, cost


def _has_text(content: Any) -> bool:
    return isinstance(content, str) or any(
        isinstance(b, dict) and b.get("type") == "text" for b in content)


def _text_of(content: Any) -> str:
    return content if isinstance(content, str) else " ".join(
        b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")


# Openings that say nothing about the subject ("hi, can you ...").
_FILLER = re.compile(r"^(?:(?:(?:hi|hello|hey)(?: there)?|ok|okay|so|please|thanks|thank you)\b[\s,!.:-]*)+",
                     re.IGNORECASE)


# Where a chat message's attached memory files start (agent/chat/attach.py appends
# them after the typed text as blocks of this form).
_ATTACHED = "\n\n<memory "


def make_title(text: str) -> str:
    """A short title for a request: its first sentence, fillers dropped, cut at a word.

    Only what the person typed counts: a built-in prompt's instructions and the
    files ``@path`` attached (``<memory ...>`` blocks after the text) are cut first.
    """
    text = episodes.typed_part(text).split(_ATTACHED, 1)[0]
    text = " ".join(text.split())
    if not text:
        return ""
    sentences = re.split(r"(?<=[.!?])\s", text)
    first = sentences[0]
    # The first sentence that says something ("Hi! Could you ..." -> "Could you ...").
    for sentence in sentences[:5]:
        rest = _FILLER.sub("", sentence).strip(" ,!.?")
        if rest:
            first = sentence
            break
    trimmed = _FILLER.sub("", first).strip() or first
    trimmed = trimmed[:1].upper() + trimmed[1:] if trimmed != first else trimmed
    if len(trimmed) <= TITLE_CHARS:
        return trimmed
    cut = trimmed[:TITLE_CHARS].rsplit(" ", 1)[0] or trimmed[:TITLE_CHARS]
    return cut.rstrip(",;:- ") + "…"
