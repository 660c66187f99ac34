"""InMemoryBackend: dicts and a lock. The reference behaviour, for tests and ephemeral bots.

Nothing is persisted and only one process sees the data. Every method takes one re-entrant lock,
so each call is atomic and the backend is thread-safe. Search uses the shared text engine's
in-memory index, so it matches exactly what every other backend matches.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ParamSpec, Self, TypeVar

import attrs

from hermes_sessions import text
from hermes_sessions.backends._common import (
    apply_update,
    check_update,
    fresh_record,
    later,
    missing_session,
    rank_hits,
    tool_call_count,
    touched_entry,
)
from hermes_sessions.exceptions import BackendClosedError, ConflictError, SessionNotFoundError
from hermes_sessions.models import Message, SessionEntry, SessionRecord, stamped
from hermes_sessions.protocols import Capabilities
from hermes_sessions.queries import (
    SearchHit,
    SearchQuery,
    SessionPage,
    SessionSummary,
    make_preview,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from types import TracebackType

    from hermes_sessions.protocols import RotationPlan
    from hermes_sessions.queries import SessionQuery

__all__ = ["InMemoryBackend"]

P = ParamSpec("P")
R = TypeVar("R")


def _locked(method: Callable[P, R]) -> Callable[P, R]:
    """Run the method under the backend's lock, after checking it is open."""

    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        self = args[0]
        assert isinstance(self, InMemoryBackend)  # noqa: S101  # only used on its methods
        with self._lock:
            if self._closed:
                raise BackendClosedError("in-memory backend")
            return method(*args, **kwargs)

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


@attrs.define
class _Transcript:
    record: SessionRecord
    messages: dict[int, Message] = attrs.Factory(dict)
    by_platform_id: dict[str, int] = attrs.Factory(dict)
    next_id: int = 1


@attrs.define(eq=False)
class InMemoryBackend:
    """Keeps everything in process memory. Thread-safe; not persistent; single process.

    .. versionadded:: 0.1.0
    """

    _lock: threading.RLock = attrs.field(factory=threading.RLock, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _entries: dict[str, SessionEntry] = attrs.field(factory=dict, init=False)
    _keys_by_session: dict[str, set[str]] = attrs.field(factory=dict, init=False)
    _sessions: dict[str, _Transcript] = attrs.field(factory=dict, init=False)
    _leases: dict[str, tuple[str, datetime]] = attrs.field(factory=dict, init=False)
    _index: text.SearchIndex = attrs.field(factory=text.SearchIndex, init=False)
    _documents: dict[int, tuple[str, int]] = attrs.field(factory=dict, init=False)
    _document_ids: dict[tuple[str, int], int] = attrs.field(factory=dict, init=False)
    _next_document: int = attrs.field(default=1, init=False)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._sessions)} sessions"
        return f"<InMemoryBackend {state}>"

    # -- lifecycle ---------------------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        """Not persistent, single process, searchable."""
        return Capabilities(persistent=False, multiprocess=False, search=True)

    def close(self) -> None:
        """Drop everything; later calls raise ``BackendClosedError``."""
        with self._lock:
            self._closed = True
            self._entries.clear()
            self._keys_by_session.clear()
            self._sessions.clear()
            self._index = text.SearchIndex()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- routing index -----------------------------------------------------------------------------

    @_locked
    def get_entry(self, key: str) -> SessionEntry | None:
        """Return the entry of ``key``, or ``None``."""
        return self._entries.get(key)

    @_locked
    def put_entry(self, entry: SessionEntry, *, expected_revision: int | None) -> SessionEntry:
        """Store ``entry`` if the key's revision is ``expected_revision`` (compare-and-swap)."""
        self._check_revision(entry.session_key, expected_revision)
        if entry.session_id not in self._sessions:
            raise missing_session(entry.session_id)
        return self._store_entry(entry, expected_revision)

    @_locked
    def delete_entry(self, key: str, *, expected_revision: int) -> None:
        """Remove the entry of ``key`` if its revision is ``expected_revision``."""
        self._check_revision(key, expected_revision)
        entry = self._entries.pop(key)
        self._keys_by_session[entry.session_id].discard(key)

    @_locked
    def entries(self, *, session_id: str | None = None) -> list[SessionEntry]:
        """Return all entries, or those pointing at ``session_id``, in key order."""
        if session_id is None:
            keys: Sequence[str] = sorted(self._entries)
        else:
            keys = sorted(self._keys_by_session.get(session_id, ()))
        return [self._entries[key] for key in keys]

    @_locked
    def record_activity(
        self, key: str, at: datetime, *, last_prompt_tokens: int | None = None
    ) -> SessionEntry | None:
        """Move ``updated_at`` forward to ``at`` without a revision check."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        entry = touched_entry(entry, at, last_prompt_tokens)
        self._entries[key] = entry
        return entry

    def _check_revision(self, key: str, expected: int | None) -> None:
        current = self._entries.get(key)
        actual = None if current is None else current.revision
        if actual != expected:
            raise ConflictError(key, expected_revision=expected, actual_revision=actual)

    def _store_entry(self, entry: SessionEntry, expected: int | None) -> SessionEntry:
        stored = attrs.evolve(entry, revision=(expected or 0) + 1)
        previous = self._entries.get(entry.session_key)
        if previous is not None:
            self._keys_by_session[previous.session_id].discard(entry.session_key)
        self._entries[entry.session_key] = stored
        self._keys_by_session.setdefault(stored.session_id, set()).add(stored.session_key)
        return stored

    # -- sessions ----------------------------------------------------------------------------------

    @_locked
    def create_session(self, record: SessionRecord) -> SessionRecord:
        """Store a new session; an existing id returns the stored record unchanged."""
        existing = self._sessions.get(record.id)
        if existing is not None:
            return existing.record
        stored = fresh_record(record)
        self._sessions[record.id] = _Transcript(stored)
        return stored

    @_locked
    def get_session(self, session_id: str) -> SessionRecord | None:
        """Return the record of ``session_id``, or ``None``."""
        transcript = self._sessions.get(session_id)
        return None if transcript is None else transcript.record

    @_locked
    def update_session(
        self,
        session_id: str,
        *,
        values: Mapping[str, Any] | None = None,
        increments: Mapping[str, int | float] | None = None,
    ) -> SessionRecord:
        """Set fields and add to counters atomically."""
        changes, amounts = check_update(values, increments)
        transcript = self._transcript(session_id)
        transcript.record = apply_update(transcript.record, changes, amounts)
        return transcript.record

    @_locked
    def end_session(self, session_id: str, reason: str, *, at: datetime) -> SessionRecord:
        """End a session; the first reason wins."""
        transcript = self._transcript(session_id)
        if transcript.record.end_reason is None:
            transcript.record = attrs.evolve(transcript.record, end_reason=reason, ended_at=at)
        return transcript.record

    @_locked
    def reopen_session(self, session_id: str) -> SessionRecord:
        """Clear a session's end."""
        transcript = self._transcript(session_id)
        transcript.record = attrs.evolve(transcript.record, end_reason=None, ended_at=None)
        return transcript.record

    @_locked
    def delete_session(self, session_id: str) -> bool:
        """Delete a session and its messages; orphan its children."""
        transcript = self._sessions.pop(session_id, None)
        if transcript is None:
            return False
        for message_id in transcript.messages:
            self._unindex(session_id, message_id)
        for child in self._sessions.values():
            if child.record.parent_session_id == session_id:
                child.record = attrs.evolve(child.record, parent_session_id=None)
        return True

    @_locked
    def list_sessions(self, query: SessionQuery) -> SessionPage:
        """Return one page of sessions matching ``query``."""
        records, cursor = query.page(t.record for t in self._sessions.values())
        return SessionPage(
            items=[SessionSummary(record=r, preview=self._preview(r.id)) for r in records],
            next_cursor=cursor,
        )

    def _preview(self, session_id: str) -> str | None:
        for message in self._sessions[session_id].messages.values():
            if message.active and message.role == "user":
                return make_preview(message.content)
        return None

    def _transcript(self, session_id: str) -> _Transcript:
        transcript = self._sessions.get(session_id)
        if transcript is None:
            raise missing_session(session_id)
        return transcript

    # -- messages ----------------------------------------------------------------------------------

    @_locked
    def append_messages(
        self, session_id: str, messages: Sequence[Message], *, touch_at: datetime | None = None
    ) -> list[Message]:
        """Append atomically and idempotently by platform message id."""
        transcript = self._transcript(session_id)
        stored = self._append(transcript, messages)
        if touch_at is not None:
            for key in self._keys_by_session.get(session_id, ()):
                self._entries[key] = touched_entry(self._entries[key], touch_at)
        return stored

    def _append(self, transcript: _Transcript, messages: Sequence[Message]) -> list[Message]:
        # Validation cannot fail part-way (models are already valid), so this is all-or-nothing.
        stored: list[Message] = []
        batch: dict[str, Message] = {}
        added = 0
        tools = 0
        for message in messages:
            platform_id = message.platform_message_id
            if platform_id is not None:
                known = transcript.by_platform_id.get(platform_id)
                if known is not None:
                    stored.append(transcript.messages[known])
                    continue
                if platform_id in batch:
                    stored.append(batch[platform_id])
                    continue
            new = stamped(message, message_id=transcript.next_id, session_id=transcript.record.id)
            transcript.next_id += 1
            transcript.messages[new.id] = new  # type: ignore[index]  # id was just set
            if platform_id is not None:
                transcript.by_platform_id[platform_id] = new.id  # type: ignore[assignment]
                batch[platform_id] = new
            self._index_message(new)
            if new.active:
                added += 1
                tools += tool_call_count(new)
            stored.append(new)
        record = transcript.record
        transcript.record = attrs.evolve(
            record,
            message_count=record.message_count + added,
            tool_call_count=record.tool_call_count + tools,
            last_active_at=later(record.last_active_at, (m.timestamp for m in stored)),
        )
        return stored

    @_locked
    def get_messages(
        self,
        session_id: str,
        *,
        after_id: int | None = None,
        before_id: int | None = None,
        limit: int | None = None,
        include_inactive: bool = False,
        from_end: bool = False,
    ) -> list[Message]:
        """Return messages in insertion order, optionally a window of them."""
        selected = [
            message
            for message_id, message in self._transcript(session_id).messages.items()
            if (after_id is None or message_id > after_id)
            and (before_id is None or message_id < before_id)
            and (include_inactive or message.active)
        ]
        if limit is not None:
            selected = selected[-limit:] if from_end else selected[:limit]
            if limit == 0:
                selected = []
        return selected

    @_locked
    def get_message(self, session_id: str, message_id: int) -> Message | None:
        """Return one message (active or not), or ``None``."""
        transcript = self._sessions.get(session_id)
        return None if transcript is None else transcript.messages.get(message_id)

    @_locked
    def find_message(self, session_id: str, platform_message_id: str) -> Message | None:
        """Return the message with this platform id in the session, or ``None``."""
        transcript = self._sessions.get(session_id)
        if transcript is None:
            return None
        message_id = transcript.by_platform_id.get(platform_message_id)
        return None if message_id is None else transcript.messages[message_id]

    @_locked
    def replace_message(self, session_id: str, message_id: int, message: Message) -> Message:
        """Replace one message's fields, keeping its id; re-index it."""
        transcript = self._transcript(session_id)
        old = transcript.messages.get(message_id)
        if old is None:
            raise SessionNotFoundError(
                session_id=session_id, hint=f"it has no message {message_id}"
            )
        new = attrs.evolve(message, id=message_id, session_id=session_id)
        if old.platform_message_id is not None:
            transcript.by_platform_id.pop(old.platform_message_id, None)
        if new.platform_message_id is not None:
            transcript.by_platform_id[new.platform_message_id] = message_id
        transcript.messages[message_id] = new
        self._unindex(session_id, message_id)
        self._index_message(new)
        self._recount(transcript)
        return new

    @_locked
    def replace_messages(self, session_id: str, messages: Sequence[Message]) -> list[Message]:
        """Replace the whole transcript atomically (new ids)."""
        transcript = self._transcript(session_id)
        for message_id in transcript.messages:
            self._unindex(session_id, message_id)
        transcript.messages.clear()
        transcript.by_platform_id.clear()
        transcript.record = attrs.evolve(transcript.record, message_count=0, tool_call_count=0)
        return self._append(transcript, messages)

    @_locked
    def set_active(self, session_id: str, message_ids: Sequence[int], *, active: bool) -> int:
        """Soft-delete or restore messages; return how many changed."""
        transcript = self._transcript(session_id)
        changed = 0
        for message_id in set(message_ids):
            message = transcript.messages.get(message_id)
            if message is not None and message.active != active:
                transcript.messages[message_id] = attrs.evolve(message, active=active)
                changed += 1
        self._recount(transcript)
        return changed

    @_locked
    def delete_messages(self, session_id: str, message_ids: Sequence[int]) -> int:
        """Delete messages for good; return how many were deleted."""
        transcript = self._transcript(session_id)
        deleted = 0
        for message_id in set(message_ids):
            message = transcript.messages.pop(message_id, None)
            if message is None:
                continue
            deleted += 1
            if message.platform_message_id is not None:
                transcript.by_platform_id.pop(message.platform_message_id, None)
            self._unindex(session_id, message_id)
        self._recount(transcript)
        return deleted

    @staticmethod
    def _recount(transcript: _Transcript) -> None:
        active = [m for m in transcript.messages.values() if m.active]
        transcript.record = attrs.evolve(
            transcript.record,
            message_count=len(active),
            tool_call_count=sum(tool_call_count(m) for m in active),
        )

    # -- the atomic rotation -----------------------------------------------------------------------

    @_locked
    def apply(self, plan: RotationPlan) -> list[SessionEntry]:
        """Commit ``plan`` atomically: every precondition first, then every change."""
        self._check_plan(plan)
        if plan.create is not None:
            self.create_session(plan.create)
            self._append(self._sessions[plan.create.id], plan.messages)
        for session_id in plan.reopen:
            self.reopen_session(session_id)
        written: list[SessionEntry] = []
        for source, target in plan.repoint:
            for key in sorted(self._keys_by_session.get(source, ())):
                entry = self._entries[key]
                written.append(
                    self._store_entry(attrs.evolve(entry, session_id=target), entry.revision)
                )
        for write in plan.entries:
            current = self._entries.get(write.entry.session_key)
            expected = write.expected_revision
            if current is not None and expected is not None and current.revision != expected:
                # a repoint in this same plan moved the key; the caller's read still holds
                expected = current.revision
            written.append(self._store_entry(write.entry, expected))
        for session_id, reason in plan.end:
            if not self._keys_by_session.get(session_id):
                self.end_session(session_id, reason, at=plan.at)
        return written

    def _check_plan(self, plan: RotationPlan) -> None:
        for write in plan.entries:
            self._check_revision(write.entry.session_key, write.expected_revision)
        for session_id in plan.require_open:
            record = self._transcript(session_id).record
            if record.is_ended:
                raise ConflictError(session_id=session_id)
        created = plan.create.id if plan.create is not None else None
        needed = [w.entry.session_id for w in plan.entries] + [t for _, t in plan.repoint]
        needed += list(plan.reopen) + [s for s, _ in plan.end]
        for session_id in needed:
            if session_id != created and session_id not in self._sessions:
                raise missing_session(session_id)

    # -- leases ------------------------------------------------------------------------------------

    @_locked
    def acquire_lease(self, resource: str, holder: str, *, ttl: timedelta, now: datetime) -> bool:
        """Take or renew an exclusive lease until ``now + ttl``."""
        current = self._leases.get(resource)
        if current is not None and current[0] != holder and current[1] > now:
            return False
        self._leases[resource] = (holder, now + ttl)
        return True

    @_locked
    def release_lease(self, resource: str, holder: str) -> None:
        """Release ``holder``'s lease on ``resource``."""
        current = self._leases.get(resource)
        if current is not None and current[0] == holder:
            del self._leases[resource]

    # -- search ------------------------------------------------------------------------------------

    def _index_message(self, message: Message) -> None:
        assert message.session_id is not None  # noqa: S101
        assert message.id is not None  # noqa: S101
        document = self._next_document
        self._next_document += 1
        self._documents[document] = (message.session_id, message.id)
        self._document_ids[message.session_id, message.id] = document
        self._index.add(document, text.searchable_text(message))

    def _unindex(self, session_id: str, message_id: int) -> None:
        document = self._document_ids.pop((session_id, message_id), None)
        if document is not None:
            del self._documents[document]
            self._index.remove(document)

    @_locked
    def search(self, query: SearchQuery) -> list[SearchHit]:
        """Search every message with the shared text engine."""
        parsed = text.parse_query(query.text)
        if parsed.is_empty:
            return []

        def accept(document: int) -> bool:
            session_id, message_id = self._documents[document]
            transcript = self._sessions[session_id]
            return query.accepts_session(transcript.record) and query.accepts_message(
                transcript.messages[message_id]
            )

        scored = self._index.search(parsed, accept=accept)
        hits = [(self._message_of(document), score) for document, score in scored]
        return rank_hits(hits, query, parsed, self._record_of)

    def _message_of(self, document: int) -> Message:
        session_id, message_id = self._documents[document]
        return self._sessions[session_id].messages[message_id]

    def _record_of(self, session_id: str) -> SessionRecord:
        return self._sessions[session_id].record
