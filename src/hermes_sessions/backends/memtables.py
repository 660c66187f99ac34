"""In-memory building blocks shared by the backends that keep their data in process memory.

``InMemoryBackend`` keeps everything in these; ``JSONLBackend`` keeps them as its cache of the
files. :class:`EntryTable` holds the routing entries, :class:`Transcript` one session's record
and messages, :class:`MessageIndex` the search index over messages, :func:`session_page` lists
sessions, and :func:`resolve_plan` works out what a rotation plan writes before anything changes.
None of them is thread-safe: callers hold their own lock. The rules every backend applies,
whatever it keeps its data in, live in :mod:`hermes_sessions.backends.rules`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from hermes_sessions import text
from hermes_sessions.backends.rules import (
    AppendPlan,
    check_drop_revisions,
    check_drops_unreferenced,
    check_plan,
    check_revision,
    plan_append,
    rank_hits,
    tool_call_count,
    touched_entry,
)
from hermes_sessions.exceptions import InvalidArgumentError, SessionNotFoundError
from hermes_sessions.models import Message, SessionEntry, SessionRecord
from hermes_sessions.queries import SessionPage, SessionSummary, make_preview

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from datetime import datetime

    from hermes_sessions.protocols import RotationPlan
    from hermes_sessions.queries import SearchHit, SearchQuery, SessionQuery

__all__ = [
    "EntryTable",
    "MessageIndex",
    "ResolvedPlan",
    "Transcript",
    "resolve_plan",
    "session_page",
]


def _later(current: datetime | None, candidates: Iterable[datetime | None]) -> datetime | None:
    """The latest of ``current`` and ``candidates`` (``None`` values ignored)."""
    best = current
    for candidate in candidates:
        if candidate is not None and (best is None or candidate > best):
            best = candidate
    return best


# -- routing entries kept in memory ----------------------------------------------------------------


@attrs.define(eq=False)
class EntryTable:
    """Session key → entry, plus the reverse map session id → keys (in-memory and JSONL backends).

    Not thread-safe: callers hold their own lock.
    """

    entries: dict[str, SessionEntry] = attrs.Factory(dict)
    keys_by_session: dict[str, set[str]] = attrs.Factory(dict)

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, key: str) -> SessionEntry | None:
        """The entry of ``key``, or ``None``."""
        return self.entries.get(key)

    def keys_of(self, session_id: str) -> set[str]:
        """The keys pointing at ``session_id`` (do not modify the set)."""
        return self.keys_by_session.get(session_id, set())

    def check_revision(self, key: str, expected: int | None) -> None:
        """Raise ``ConflictError`` unless the key's current revision is ``expected``."""
        current = self.entries.get(key)
        check_revision(key, expected, None if current is None else current.revision)

    def put(self, entry: SessionEntry) -> None:
        """Store ``entry`` as it is (revision included), keeping the reverse map exact."""
        previous = self.entries.get(entry.session_key)
        if previous is not None:
            self._forget(previous)
        self.entries[entry.session_key] = entry
        self.keys_by_session.setdefault(entry.session_id, set()).add(entry.session_key)

    def store(self, entry: SessionEntry, expected: int | None) -> SessionEntry:
        """Store ``entry`` with revision ``expected + 1`` (1 for a new key); return it."""
        stored = attrs.evolve(entry, revision=(expected or 0) + 1)
        self.put(stored)
        return stored

    def delete(self, key: str) -> None:
        """Remove the entry of ``key`` (it must exist)."""
        self._forget(self.entries.pop(key))

    def touch(
        self, key: str, at: datetime, last_prompt_tokens: int | None = None
    ) -> SessionEntry | None:
        """Record activity on ``key`` (see :func:`touched_entry`); ``None`` if it has no entry."""
        entry = self.entries.get(key)
        if entry is None:
            return None
        entry = touched_entry(entry, at, last_prompt_tokens)
        self.entries[key] = entry
        return entry

    def listing(self, session_id: str | None = None) -> list[SessionEntry]:
        """All entries, or those pointing at ``session_id``, in key order."""
        keys = sorted(self.entries) if session_id is None else sorted(self.keys_of(session_id))
        return [self.entries[key] for key in keys]

    def _forget(self, entry: SessionEntry) -> None:
        keys = self.keys_by_session[entry.session_id]
        keys.discard(entry.session_key)
        if not keys:
            del self.keys_by_session[entry.session_id]


# -- transcripts kept in memory --------------------------------------------------------------------


@attrs.define(eq=False)
class Transcript:
    """One session's record and messages in memory (in-memory and JSONL backends).

    Keeps the platform-id lookup, the next message id and the record's counters exact through
    every change. Not thread-safe: callers hold their own lock.
    """

    record: SessionRecord
    messages: dict[int, Message] = attrs.Factory(dict)
    by_platform_id: dict[str, int] = attrs.Factory(dict)
    next_id: int = 1

    def copy(self) -> Transcript:
        """An independent copy (the messages themselves are immutable and shared)."""
        return Transcript(
            record=self.record,
            messages=dict(self.messages),
            by_platform_id=dict(self.by_platform_id),
            next_id=self.next_id,
        )

    def prepare(self, messages: Sequence[Message]) -> AppendPlan:
        """What appending ``messages`` does (the redelivery rule), without changing anything."""
        known = {
            platform_id: self.messages[self.by_platform_id[platform_id]]
            for message in messages
            if (platform_id := message.platform_message_id) in self.by_platform_id
        }
        return plan_append(self.record.id, messages, known, self.next_id)

    def bump(self, step: int = 1) -> None:
        """Move the record's revision on (a change of the transcript or the session's state)."""
        if step:
            self.record = attrs.evolve(self.record, revision=self.record.revision + step)

    def add(self, messages: Sequence[Message], *, activity: bool = True) -> None:
        """Store numbered messages; with ``activity`` their times move ``last_active_at``."""
        if not messages:
            return
        record = self.record
        added = tools = 0
        times: list[datetime | None] = []
        for message in messages:
            message_id = message.id
            assert message_id is not None  # noqa: S101  # numbered by prepare() or read back
            self.messages[message_id] = message
            if message.platform_message_id is not None:
                self.by_platform_id[message.platform_message_id] = message_id
            self.next_id = max(self.next_id, message_id + 1)
            if message.active:
                added += 1
                tools += tool_call_count(message)
            times.append(message.timestamp)
        self.record = attrs.evolve(
            record,
            message_count=record.message_count + added,
            tool_call_count=record.tool_call_count + tools,
            last_active_at=_later(record.last_active_at, times)
            if activity
            else record.last_active_at,
        )

    def replace(self, message_id: int, message: Message) -> Message:
        """Replace one message keeping its id; raise ``SessionNotFoundError`` if it is unknown."""
        old = self.messages.get(message_id)
        if old is None:
            raise SessionNotFoundError(
                session_id=self.record.id, hint=f"it has no message {message_id}"
            )
        new = attrs.evolve(message, id=message_id, session_id=self.record.id)
        platform_id = new.platform_message_id
        owner = None if platform_id is None else self.by_platform_id.get(platform_id)
        if owner is not None and owner != message_id:
            raise InvalidArgumentError(
                f"platform message id {platform_id!r} already belongs to message {owner} of "
                f"session {self.record.id}; give the edit that message's id or another one"
            )
        if old.platform_message_id is not None:
            self.by_platform_id.pop(old.platform_message_id, None)
        if new.platform_message_id is not None:
            self.by_platform_id[new.platform_message_id] = message_id
        self.messages[message_id] = new
        self.recount()
        return new

    def clear(self) -> list[Message]:
        """Drop every message (ids are never reused); return what was dropped."""
        dropped = list(self.messages.values())
        self.messages.clear()
        self.by_platform_id.clear()
        self.record = attrs.evolve(self.record, message_count=0, tool_call_count=0)
        return dropped

    def set_active(self, message_ids: Iterable[int], *, active: bool) -> list[int]:
        """Soft-delete or restore messages; return the ids that changed, in order."""
        changed = []
        for message_id in sorted(set(message_ids)):
            message = self.messages.get(message_id)
            if message is not None and message.active != active:
                self.messages[message_id] = attrs.evolve(message, active=active)
                changed.append(message_id)
        self.recount()
        return changed

    def delete(self, message_ids: Iterable[int]) -> list[Message]:
        """Delete messages for good; return the deleted ones."""
        deleted = []
        for message_id in sorted(set(message_ids)):
            message = self.messages.pop(message_id, None)
            if message is None:
                continue
            deleted.append(message)
            if message.platform_message_id is not None:
                self.by_platform_id.pop(message.platform_message_id, None)
        self.recount()
        return deleted

    def recount(self) -> None:
        """Recompute ``message_count`` and ``tool_call_count`` from the active messages."""
        active = [m for m in self.messages.values() if m.active]
        self.record = attrs.evolve(
            self.record,
            message_count=len(active),
            tool_call_count=sum(tool_call_count(m) for m in active),
        )

    def select(
        self,
        *,
        after_id: int | None,
        before_id: int | None,
        limit: int | None,
        include_inactive: bool,
        from_end: bool,
    ) -> list[Message]:
        """The ``get_messages`` window: insertion order, exclusive bounds, limit from either end."""
        selected = [
            message
            for message_id, message in self.messages.items()
            if (after_id is None or message_id > after_id)
            and (before_id is None or message_id < before_id)
            and (include_inactive or message.active)
        ]
        if limit is not None:
            selected = selected[-limit:] if from_end else selected[:limit]
            if limit == 0:
                selected = []
        return selected

    def active(self) -> list[Message]:
        """The active messages in insertion order (what a branch copies)."""
        return self.select(
            after_id=None, before_id=None, limit=None, include_inactive=False, from_end=False
        )

    def preview(self) -> str | None:
        """The listing preview: the first active user message."""
        for message in self.messages.values():
            if message.active and message.role == "user":
                return make_preview(message.content)
        return None


def session_page(query: SessionQuery, transcripts: Iterable[Transcript]) -> SessionPage:
    """One page of a session listing over transcripts kept in memory."""
    by_id = {t.record.id: t for t in transcripts}
    records, cursor = query.page(t.record for t in by_id.values())
    return SessionPage(
        items=[SessionSummary(record=r, preview=by_id[r.id].preview()) for r in records],
        next_cursor=cursor,
    )


# -- search over messages kept in memory -----------------------------------------------------------


@attrs.define(eq=False)
class MessageIndex:
    """The shared :class:`text.SearchIndex` over messages of many sessions.

    Documents are numbered internally; :meth:`search` filters with the query's reference
    semantics and builds hits with :func:`rank_hits`. Not thread-safe.
    """

    _index: text.SearchIndex = attrs.Factory(text.SearchIndex)
    _documents: dict[int, tuple[str, int]] = attrs.Factory(dict)
    _document_ids: dict[tuple[str, int], int] = attrs.Factory(dict)
    _next_document: int = 1

    def add(self, message: Message) -> None:
        """Index one stored message (replacing an earlier copy with the same id)."""
        assert message.session_id is not None  # noqa: S101  # stored messages have both
        assert message.id is not None  # noqa: S101
        self.remove(message.session_id, message.id)
        document = self._next_document
        self._next_document += 1
        self._documents[document] = (message.session_id, message.id)
        self._document_ids[message.session_id, message.id] = document
        self._index.add(document, text.searchable_text(message))

    def remove(self, session_id: str, message_id: int) -> None:
        """Forget one message; nothing happens if it is not indexed."""
        document = self._document_ids.pop((session_id, message_id), None)
        if document is not None:
            del self._documents[document]
            self._index.remove(document)

    def search(
        self, query: SearchQuery, transcript_of: Callable[[str], Transcript]
    ) -> list[SearchHit]:
        """Run ``query`` over the indexed messages; ``transcript_of`` finds their sessions."""
        parsed = text.parse_query(query.text)
        if parsed.is_empty:
            return []

        def message_of(document: int) -> Message:
            session_id, message_id = self._documents[document]
            return transcript_of(session_id).messages[message_id]

        def accept(document: int) -> bool:
            session_id, message_id = self._documents[document]
            transcript = transcript_of(session_id)
            return query.accepts_session(transcript.record) and query.accepts_message(
                transcript.messages[message_id]
            )

        scored = self._index.search(parsed, accept=accept)
        hits = [(message_of(document), score) for document, score in scored]
        return rank_hits(hits, query, parsed, lambda session_id: transcript_of(session_id).record)


# -- the rotation plan -----------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ResolvedPlan:
    """What a :class:`RotationPlan` does to the routing index, worked out before writing."""

    written: list[SessionEntry]
    """Every entry stored, in order, with its new revision (a key may appear twice)."""
    end: list[tuple[str, str]]
    """``(session_id, reason)`` of sessions no key points at after the plan, in plan order."""
    deleted: list[str] = attrs.Factory(list)
    """Keys whose entry the plan removes (before ``written`` is stored)."""


@attrs.define
class _PlannedIndex:
    """The entry table as a plan leaves it, worked out on an overlay (the table is untouched)."""

    table: EntryTable
    overlay: dict[str, SessionEntry] = attrs.Factory(dict)
    members: dict[str, set[str]] = attrs.Factory(dict)
    written: list[SessionEntry] = attrs.Factory(list)

    removed: set[str] = attrs.Factory(set)

    def current(self, key: str) -> SessionEntry | None:
        if key in self.removed:
            return None
        return self.overlay[key] if key in self.overlay else self.table.get(key)

    def remove(self, key: str) -> None:
        previous = self.current(key)
        if previous is not None:
            self.keys_at(previous.session_id).discard(key)
        self.overlay.pop(key, None)
        self.removed.add(key)

    def keys_at(self, session_id: str) -> set[str]:
        if session_id not in self.members:
            self.members[session_id] = set(self.table.keys_of(session_id))
        return self.members[session_id]

    def store(self, entry: SessionEntry, expected: int | None) -> None:
        stored = attrs.evolve(entry, revision=(expected or 0) + 1)
        previous = self.current(stored.session_key)
        if previous is not None:
            self.keys_at(previous.session_id).discard(stored.session_key)
        self.overlay[stored.session_key] = stored
        self.keys_at(stored.session_id).add(stored.session_key)
        self.written.append(stored)


def resolve_plan(
    plan: RotationPlan, table: EntryTable, record_of: Callable[[str], SessionRecord | None]
) -> ResolvedPlan:
    """Check a plan (:func:`check_plan`) and work out its entry writes, changing nothing.

    ``end`` lists the sessions no key points at after the plan; ending one that already ended
    must keep its first reason.
    """

    def revision_of(key: str) -> int | None:
        entry = table.get(key)
        return None if entry is None else entry.revision

    def ended_of(session_id: str) -> bool | None:
        record = record_of(session_id)
        return None if record is None else record.is_ended

    check_plan(plan, revision_of, ended_of)

    def session_revision(session_id: str) -> int | None:
        record = record_of(session_id)
        return None if record is None else record.revision

    check_drop_revisions(plan, session_revision)
    planned = _PlannedIndex(table)
    for source, target in plan.repoint:
        for key in sorted(planned.keys_at(source)):
            entry = planned.current(key)
            assert entry is not None  # noqa: S101  # listed by keys_at
            planned.store(attrs.evolve(entry, session_id=target), entry.revision)
    for key, _ in plan.delete:
        planned.remove(key)
    for write in plan.entries:
        now = planned.current(write.entry.session_key)
        expected = write.expected_revision
        if now is not None and expected is not None and now.revision != expected:
            # a repoint in this same plan moved the key; the caller's read still holds
            expected = now.revision
        planned.store(write.entry, expected)
    check_drops_unreferenced(plan, lambda session_id: bool(planned.keys_at(session_id)))
    end = [
        (session_id, reason) for session_id, reason in plan.end if not planned.keys_at(session_id)
    ]
    deleted = [key for key, _ in plan.delete]
    return ResolvedPlan(written=planned.written, end=end, deleted=deleted)
