"""InMemoryBackend: dicts and a lock. The reference behaviour, for tests and ephemeral bots.

Nothing is persisted and only one process sees the data. Every method takes one re-entrant lock,
so each call is atomic and the backend is thread-safe. Search uses the shared text engine's
in-memory index, so it matches exactly what every other backend matches.
"""

from __future__ import annotations

import copy
import json
import threading
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import attrs

from hermes_sessions import options
from hermes_sessions.backends.memtables import (
    EntryTable,
    MessageIndex,
    Transcript,
    resolve_plan,
    session_page,
)
from hermes_sessions.backends.rules import (
    apply_update,
    check_ledger_versions,
    check_ledger_write,
    check_message_sizes,
    check_session_revision,
    check_state_target,
    check_title_free,
    check_update,
    first_messages,
    fresh_record,
    lease_is_free,
    ledger_order,
    ledger_row_matches,
    merged_states,
    missing_session,
    revision_step,
    session_scope,
    written_ledger_rows,
)
from hermes_sessions.checks import make_report
from hermes_sessions.closing import ClosesOnExit
from hermes_sessions.exceptions import BackendClosedError
from hermes_sessions.ledger import LedgerRow
from hermes_sessions.protocols import Capabilities
from hermes_sessions.serde import compact_json

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from hermes_sessions.checks import CheckReport
    from hermes_sessions.ledger import LedgerKind
    from hermes_sessions.models import Message, SessionEntry, SessionRecord
    from hermes_sessions.protocols import RotationPlan
    from hermes_sessions.queries import SearchHit, SearchQuery, SessionPage, SessionQuery
    from hermes_sessions.results import AppendResult
    from hermes_sessions.usage import Usage

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


@attrs.define(eq=False)
class InMemoryBackend(ClosesOnExit):
    """Keeps everything in process memory. Thread-safe; not persistent; single process.

    .. versionadded:: 0.1.0
    """

    max_message_bytes: int | None = attrs.field(
        default=options.DEFAULT_MAX_MESSAGE_BYTES, kw_only=True, validator=options.optional_size
    )
    """Messages larger than this (their JSON form, in UTF-8 bytes) are refused with
    ``MessageTooLargeError``; ``None``: no limit. 16 MiB by default, as on every backend."""
    _lock: threading.RLock = attrs.field(factory=threading.RLock, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _table: EntryTable = attrs.field(factory=EntryTable, init=False)
    _sessions: dict[str, Transcript] = attrs.field(factory=dict, init=False)
    _leases: dict[str, tuple[str, datetime]] = attrs.field(factory=dict, init=False)
    _index: MessageIndex = attrs.field(factory=MessageIndex, init=False)
    _state: dict[str, str] = attrs.field(factory=dict, init=False)
    _memory: dict[str, tuple[str, ...]] = attrs.field(factory=dict, init=False)
    """Scope id -> its value as JSON text (so no caller shares a mutable value with us)."""
    _ledger: dict[tuple[str, str], LedgerRow] = attrs.field(factory=dict, init=False)
    """The turn ledger: ``(kind, id)`` -> row (frozen values; ``data`` copied in and out)."""

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._sessions)} sessions"
        return f"<InMemoryBackend {state}>"

    # -- lifecycle ---------------------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        """Not persistent, single process, searchable."""
        return Capabilities(persistent=False, multiprocess=False)

    def check(self) -> CheckReport:
        """The library's invariants (:class:`~.protocols.SupportsCheck`); memory has no files."""
        if self._closed:
            raise BackendClosedError("in-memory backend")
        return make_report(self)

    def close(self) -> None:
        """Drop everything; later calls raise ``BackendClosedError``."""
        with self._lock:
            self._closed = True
            self._table = EntryTable()
            self._sessions.clear()
            self._index = MessageIndex()
            self._state.clear()
            self._ledger.clear()

    # -- routing index -----------------------------------------------------------------------------

    @_locked
    def get_entry(self, key: str) -> SessionEntry | None:
        """Return the entry of ``key``, or ``None``."""
        return self._table.get(key)

    @_locked
    def put_entry(self, entry: SessionEntry, *, expected_revision: int | None) -> SessionEntry:
        """Store ``entry`` if the key's revision is ``expected_revision`` (compare-and-swap)."""
        self._table.check_revision(entry.session_key, expected_revision)
        if entry.session_id not in self._sessions:
            raise missing_session(entry.session_id)
        return self._table.store(entry, expected_revision)

    @_locked
    def delete_entry(self, key: str, *, expected_revision: int) -> None:
        """Remove the entry of ``key`` if its revision is ``expected_revision``."""
        self._table.check_revision(key, expected_revision)
        self._table.delete(key)

    @_locked
    def entries(self, *, session_id: str | None = None) -> list[SessionEntry]:
        """Return all entries, or those pointing at ``session_id``, in key order."""
        return self._table.listing(session_id)

    @_locked
    def record_activity(
        self, key: str, at: datetime, *, last_prompt_tokens: int | None = None
    ) -> SessionEntry | None:
        """Move ``updated_at`` forward to ``at`` without a revision check."""
        return self._table.touch(key, at, last_prompt_tokens)

    # -- sessions ----------------------------------------------------------------------------------

    @_locked
    def create_session(self, record: SessionRecord) -> SessionRecord:
        """Store a new session; an existing id returns the stored record unchanged."""
        existing = self._sessions.get(record.id)
        if existing is not None:
            return existing.record
        stored = fresh_record(record)
        check_title_free(stored, (t.record for t in self._sessions.values()))
        self._sessions[record.id] = Transcript(stored)
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
        updated = apply_update(transcript.record, changes, amounts)
        if "title" in changes:
            check_title_free(updated, (t.record for t in self._sessions.values()))
        transcript.record = updated
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
        self._state.pop(session_scope(session_id), None)
        for place in [p for p, row in self._ledger.items() if row.session_id == session_id]:
            del self._ledger[place]
        for message_id in transcript.messages:
            self._index.remove(session_id, message_id)
        for child in self._sessions.values():
            if child.record.parent_session_id == session_id:
                child.record = attrs.evolve(child.record, parent_session_id=None)
        return True

    @_locked
    def list_sessions(self, query: SessionQuery) -> SessionPage:
        """Return one page of sessions matching ``query``."""
        return session_page(query, self._sessions.values())

    def _transcript(self, session_id: str) -> Transcript:
        transcript = self._sessions.get(session_id)
        if transcript is None:
            raise missing_session(session_id)
        return transcript

    # -- messages ----------------------------------------------------------------------------------

    @_locked
    def append_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        touch_at: datetime | None = None,
        usage: Usage | None = None,
        state: Mapping[str, Mapping[str, Any]] | None = None,
        if_revision: int | None = None,
    ) -> AppendResult:
        """Append atomically and idempotently by platform message id (the redelivery rule)."""
        transcript = self._transcript(session_id)
        check_message_sizes(messages, self.max_message_bytes)
        plan = transcript.prepare(messages)
        if plan.result.duplicate:
            return attrs.evolve(plan.result, revision=transcript.record.revision)
        check_session_revision(session_id, if_revision, transcript.record.revision)
        values = self._merged(state or {})  # may raise: nothing is changed before this
        self._add(transcript, plan.new)
        self._state_write(values)
        transcript.bump(revision_step(bool(plan.new), values))
        if usage is not None:
            transcript.record = apply_update(transcript.record, usage.values(), usage.increments())
        if touch_at is not None:
            for key in list(self._table.keys_of(session_id)):
                self._table.touch(key, touch_at)
        return attrs.evolve(plan.result, revision=transcript.record.revision)

    def _append(self, transcript: Transcript, messages: Sequence[Message]) -> AppendResult:
        # prepare() cannot fail part-way (models are already valid), so this is all-or-nothing.
        plan = transcript.prepare(messages)
        self._add(transcript, plan.new)
        return plan.result

    def _add(self, transcript: Transcript, messages: Sequence[Message]) -> None:
        transcript.add(messages)
        for message in messages:
            self._index.add(message)

    # -- the turn ledger ---------------------------------------------------------------------------

    @_locked
    def ledger_rows(
        self,
        kind: LedgerKind,
        *,
        ids: Sequence[str] | None = None,
        status: str | None = None,
        session_key: str | None = None,
    ) -> list[LedgerRow]:
        """The stored rows of ``kind`` passing the filters, by ``(updated_at, id)``."""
        wanted = None if ids is None else frozenset(ids)
        found = (
            attrs.evolve(row, data=copy.deepcopy(row.data))
            for row in self._ledger.values()
            if ledger_row_matches(row, kind, wanted, status, session_key)
        )
        return ledger_order(found)

    @_locked
    def ledger_write(
        self,
        session_id: str,
        rows: Sequence[LedgerRow],
        *,
        messages: Sequence[Message] = (),
        touch_at: datetime | None = None,
        usage: Usage | None = None,
    ) -> AppendResult:
        """Append ``messages`` and write ``rows`` atomically (versions checked first)."""
        transcript = self._transcript(session_id)
        check_ledger_write(session_id, rows, len(messages))
        check_message_sizes(messages, self.max_message_bytes)
        if transcript.prepare(messages).result.duplicate:
            return self.append_messages(session_id, messages)  # writes nothing
        places = [(row.kind, row.id) for row in rows]
        stored = {place: self._ledger[place].version for place in places if place in self._ledger}
        check_ledger_versions(rows, stored)
        result = self.append_messages(session_id, messages, touch_at=touch_at, usage=usage)
        for row in written_ledger_rows(rows, result):
            self._ledger[row.kind, row.id] = attrs.evolve(row, data=copy.deepcopy(row.data))
        return result

    # -- state -------------------------------------------------------------------------------------

    def _merged(self, changes: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        return merged_states(changes, self._get_state(list(changes)))

    def _get_state(self, scope_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        return {s: json.loads(self._state[s]) for s in dict.fromkeys(scope_ids) if s in self._state}

    def _state_write(self, values: Mapping[str, dict[str, Any]]) -> None:
        for scope_id, value in values.items():
            if value:
                self._state[scope_id] = compact_json(value)
            else:
                self._state.pop(scope_id, None)

    @_locked
    def memory_entries(self, scope_id: str) -> tuple[str, ...]:
        """The entries of one memory scope (``ScopedMemory(backend=...)``)."""
        return self._memory.get(scope_id, ())

    @_locked
    def change_memory(
        self, scope_id: str, plan: Callable[[tuple[str, ...]], tuple[str, ...] | None]
    ) -> tuple[str, ...]:
        """Change one memory scope under the backend's lock; the entries after."""
        current = self._memory.get(scope_id, ())
        new = plan(current)
        if new is None:
            return current
        if new:
            self._memory[scope_id] = tuple(new)
        else:
            self._memory.pop(scope_id, None)
        return tuple(new)

    @_locked
    def memory_scope_ids(self) -> list[str]:
        """Every memory scope holding entries."""
        return sorted(self._memory)

    @_locked
    def delete_memory(self, scope_id: str) -> bool:
        """Delete one memory scope; whether it held entries."""
        return self._memory.pop(scope_id, None) is not None

    @_locked
    def get_state(self, scope_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Return the value of every scope in ``scope_ids`` that holds one."""
        return self._get_state(scope_ids)

    @_locked
    def state_scopes(self) -> list[str]:
        """Every scope id that holds a value, sorted."""
        return sorted(self._state)

    @_locked
    def update_state(
        self,
        changes: Mapping[str, Mapping[str, Any]],
        *,
        session_id: str | None = None,
        if_revision: int | None = None,
    ) -> SessionRecord | None:
        """Merge ``changes`` atomically; through ``session_id``, check and bump its revision."""
        check_state_target(session_id, if_revision)
        transcript = None if session_id is None else self._transcript(session_id)
        if transcript is not None:
            check_session_revision(transcript.record.id, if_revision, transcript.record.revision)
        self._state_write(self._merged(changes))
        if transcript is None:
            return None
        transcript.bump()
        return transcript.record

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
        return self._transcript(session_id).select(
            after_id=after_id,
            before_id=before_id,
            limit=limit,
            include_inactive=include_inactive,
            from_end=from_end,
        )

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
        check_message_sizes([message], self.max_message_bytes)
        transcript = self._transcript(session_id)
        new = transcript.replace(message_id, message)
        transcript.bump()
        self._index.add(new)
        return new

    @_locked
    def replace_messages(self, session_id: str, messages: Sequence[Message]) -> list[Message]:
        """Replace the whole transcript atomically (new ids)."""
        transcript = self._transcript(session_id)
        check_message_sizes(messages, self.max_message_bytes)
        for message in transcript.clear():
            self._index.remove(session_id, message.id or 0)
        transcript.bump()
        return list(self._append(transcript, messages))

    @_locked
    def set_active(self, session_id: str, message_ids: Sequence[int], *, active: bool) -> int:
        """Soft-delete or restore messages; return how many changed."""
        transcript = self._transcript(session_id)
        changed = len(transcript.set_active(message_ids, active=active))
        transcript.bump(1 if changed else 0)
        return changed

    @_locked
    def delete_messages(self, session_id: str, message_ids: Sequence[int]) -> int:
        """Delete messages for good; return how many were deleted."""
        transcript = self._transcript(session_id)
        deleted = transcript.delete(message_ids)
        transcript.bump(1 if deleted else 0)
        for message in deleted:
            self._index.remove(session_id, message.id or 0)
        return len(deleted)

    # -- the atomic rotation -----------------------------------------------------------------------

    @_locked
    def apply(self, plan: RotationPlan) -> list[SessionEntry]:
        """Commit ``plan`` atomically: every precondition first, then every change."""
        check_message_sizes(plan.messages, self.max_message_bytes)
        resolved = resolve_plan(plan, self._table, self._record_or_none)
        copied = None
        if plan.copy_state_from is not None:
            copied = self._state.get(session_scope(plan.copy_state_from))
        first = list(plan.messages)
        if plan.copy_messages_from is not None:
            first = first_messages(plan, self._sessions[plan.copy_messages_from].active())
        if plan.create is not None:
            self.create_session(plan.create)
            self._append(self._sessions[plan.create.id], first)
            if copied is not None:
                self._state[session_scope(plan.create.id)] = copied
        for session_id in plan.reopen:
            self.reopen_session(session_id)
        for key in resolved.deleted:
            self._table.delete(key)
        for entry in resolved.written:
            self._table.put(entry)
        for session_id, key in plan.rekey:
            transcript = self._sessions[session_id]
            transcript.record = attrs.evolve(transcript.record, session_key=key)
        self._end_and_drop(plan, resolved.end)
        return resolved.written

    def _end_and_drop(self, plan: RotationPlan, end: list[tuple[str, str]]) -> None:
        """Steps 7 and 8 of a plan, its checks passed: end sessions, then drop those it drops."""
        for session_id, reason in end:
            self.end_session(session_id, reason, at=plan.at)
        for session_id, _ in plan.drop:
            self.delete_session(session_id)

    def _record_or_none(self, session_id: str) -> SessionRecord | None:
        transcript = self._sessions.get(session_id)
        return None if transcript is None else transcript.record

    # -- leases ------------------------------------------------------------------------------------

    @_locked
    def acquire_lease(self, resource: str, holder: str, *, ttl: timedelta, now: datetime) -> bool:
        """Take or renew an exclusive lease until ``now + ttl``."""
        if not lease_is_free(self._leases.get(resource), holder, now):
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

    @_locked
    def search(self, query: SearchQuery) -> list[SearchHit]:
        """Search every message with the shared text engine."""
        return self._index.search(query, self._sessions.__getitem__)
