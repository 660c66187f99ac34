"""Rules every backend applies the same way, kept in one place.

The second half holds the in-memory building blocks shared by the backends that keep their data
in process memory (``InMemoryBackend``, and ``JSONLBackend`` as its cache): the entry table, the
transcript of one session, the search index over messages and the resolution of a rotation plan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import attrs

from hermes_sessions import text
from hermes_sessions.exceptions import ConflictError, SessionNotFoundError
from hermes_sessions.models import Message, SessionEntry, SessionRecord, stamped
from hermes_sessions.queries import SearchHit, SessionPage, SessionSummary, make_preview

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from datetime import datetime

    from hermes_sessions.protocols import RotationPlan
    from hermes_sessions.queries import SearchQuery, SessionQuery

__all__ = [
    "INCREMENTABLE_FIELDS",
    "SETTABLE_FIELDS",
    "EntryTable",
    "MessageIndex",
    "ResolvedPlan",
    "Transcript",
    "apply_update",
    "check_plan",
    "check_revision",
    "check_update",
    "fresh_record",
    "later",
    "lease_is_free",
    "make_hit",
    "missing_session",
    "rank_hits",
    "resolve_plan",
    "session_page",
    "tool_call_count",
    "touched_entry",
]

SETTABLE_FIELDS: Final = frozenset(
    {"title", "user_id", "model", "model_config", "system_prompt", "archived", "metadata"}
)
"""Record fields that ``update_session(values=...)`` may set."""

INCREMENTABLE_FIELDS: Final = frozenset(
    {
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
        "estimated_cost_usd",
    }
)
"""Record fields that ``update_session(increments=...)`` may add to."""


def check_update(
    values: Mapping[str, Any] | None, increments: Mapping[str, int | float] | None
) -> tuple[dict[str, Any], dict[str, int | float]]:
    """Validate the field names of an ``update_session`` call and return plain dicts."""
    values = dict(values or {})
    increments = dict(increments or {})
    bad = sorted(set(values) - SETTABLE_FIELDS) + sorted(set(increments) - INCREMENTABLE_FIELDS)
    if bad:
        raise ValueError(
            f"update_session cannot change {bad}; settable: {sorted(SETTABLE_FIELDS)}, "
            f"incrementable: {sorted(INCREMENTABLE_FIELDS)}"
        )
    for name, amount in increments.items():
        if isinstance(amount, bool) or not isinstance(amount, int | float):
            raise TypeError(f"increment of {name} must be a number, got {type(amount).__name__}")
    return values, increments


def apply_update(
    record: SessionRecord, values: Mapping[str, Any], increments: Mapping[str, int | float]
) -> SessionRecord:
    """Return ``record`` with ``values`` set and ``increments`` added (validated by attrs)."""
    changes = dict(values)
    for name, amount in increments.items():
        current = getattr(record, name)
        changes[name] = (current or 0) + amount
    return attrs.evolve(record, **changes)


def fresh_record(record: SessionRecord) -> SessionRecord:
    """The record as a new session stores it: no messages yet, active since it started."""
    return attrs.evolve(
        record, message_count=0, tool_call_count=0, last_active_at=record.started_at
    )


def tool_call_count(message: Message) -> int:
    """How many tool calls a message carries."""
    return len(message.tool_calls) if message.tool_calls else 0


def later(current: datetime | None, candidates: Iterable[datetime | None]) -> datetime | None:
    """The latest of ``current`` and ``candidates`` (``None`` values ignored)."""
    best = current
    for candidate in candidates:
        if candidate is not None and (best is None or candidate > best):
            best = candidate
    return best


def touched_entry(
    entry: SessionEntry, at: datetime, last_prompt_tokens: int | None = None
) -> SessionEntry:
    """``entry`` after activity at ``at``: ``updated_at`` only moves forward, revision unchanged."""
    changes: dict[str, Any] = {}
    if at > entry.updated_at:
        changes["updated_at"] = at
    if last_prompt_tokens is not None:
        changes["last_prompt_tokens"] = last_prompt_tokens
    return attrs.evolve(entry, **changes) if changes else entry


def missing_session(session_id: str) -> SessionNotFoundError:
    """The error for a write to a session that does not exist."""
    return SessionNotFoundError(
        session_id=session_id, hint="create it first, or check the id (ids are case-sensitive)"
    )


def make_hit(
    message: Message, session: SessionRecord, score: float, query: text.Query
) -> SearchHit:
    """A search hit with its snippet, built from the message's original searchable text."""
    snippet = text.make_snippet(text.searchable_text(message), query)
    return SearchHit(
        message=message, session=session, score=score, snippet=snippet.text, spans=snippet.spans
    )


def _time_key(message: Message) -> float:
    return message.timestamp.timestamp() if message.timestamp is not None else 0.0


def rank_hits(
    scored: list[tuple[Message, float]],
    query: SearchQuery,
    parsed: text.Query,
    record_of: Callable[[str], SessionRecord],
) -> list[SearchHit]:
    """Order ``(message, score)`` pairs as ``query`` asks, cut its page, and build the hits.

    ``rank`` puts the best score first (newer first on ties); ``newest``/``oldest`` order by
    message time. For backends that score in Python (in-memory, JSONL).
    """
    if query.order == "rank":
        scored.sort(key=lambda pair: (-pair[1], -_time_key(pair[0])))
    else:
        scored.sort(key=lambda pair: _time_key(pair[0]), reverse=query.order == "newest")
    end = None if query.limit is None else query.offset + query.limit
    hits = []
    for message, score in scored[query.offset : end]:
        assert message.session_id is not None  # noqa: S101  # stored messages have one
        hits.append(make_hit(message, record_of(message.session_id), score, parsed))
    return hits


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
        actual = None if current is None else current.revision
        if actual != expected:
            raise ConflictError(key, expected_revision=expected, actual_revision=actual)

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

    def prepare(self, messages: Iterable[Message]) -> tuple[list[Message], list[Message]]:
        """What appending ``messages`` stores, without changing anything.

        Returns ``(returned, new)``: ``returned`` has one message per input (the stored copy
        for a platform id already in the session or earlier in the batch), ``new`` the
        messages to store, numbered from :attr:`next_id`.
        """
        returned: list[Message] = []
        new: list[Message] = []
        batch: dict[str, Message] = {}
        next_id = self.next_id
        for message in messages:
            platform_id = message.platform_message_id
            if platform_id is not None:
                known = self.by_platform_id.get(platform_id)
                earlier = self.messages[known] if known is not None else batch.get(platform_id)
                if earlier is not None:
                    returned.append(earlier)
                    continue
            numbered = stamped(message, message_id=next_id, session_id=self.record.id)
            next_id += 1
            if platform_id is not None:
                batch[platform_id] = numbered
            new.append(numbered)
            returned.append(numbered)
        return returned, new

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
            last_active_at=later(record.last_active_at, times)
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
            raise ValueError(
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


# -- the rotation plan and leases ------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ResolvedPlan:
    """What a :class:`RotationPlan` does to the routing index, worked out before writing."""

    written: list[SessionEntry]
    """Every entry stored, in order, with its new revision (a key may appear twice)."""
    end: list[tuple[str, str]]
    """``(session_id, reason)`` of sessions no key points at after the plan, in plan order."""


def check_revision(key: str, expected: int | None, actual: int | None) -> None:
    """Raise ``ConflictError`` unless the key's ``actual`` revision is the ``expected`` one."""
    if actual != expected:
        raise ConflictError(key, expected_revision=expected, actual_revision=actual)


def check_plan(
    plan: RotationPlan,
    revision_of: Callable[[str], int | None],
    record_of: Callable[[str], SessionRecord | None],
) -> None:
    """Check a plan's preconditions; raise ``ConflictError`` or ``SessionNotFoundError``.

    ``revision_of`` gives a key's current revision (``None``: no entry) and ``record_of`` a
    session's record (``None``: no such session), as the backend holds them now.
    """
    for write in plan.entries:
        key = write.entry.session_key
        check_revision(key, write.expected_revision, revision_of(key))
    for session_id in plan.require_open:
        record = record_of(session_id)
        if record is None:
            raise missing_session(session_id)
        if record.is_ended:
            raise ConflictError(session_id=session_id)
    created = plan.create.id if plan.create is not None else None
    if created is not None and record_of(created) is not None:
        raise ConflictError(session_id=created)
    needed = [w.entry.session_id for w in plan.entries] + [t for _, t in plan.repoint]
    needed += list(plan.reopen) + [s for s, _ in plan.end]
    for session_id in dict.fromkeys(needed):
        if session_id != created and record_of(session_id) is None:
            raise missing_session(session_id)


@attrs.define
class _PlannedIndex:
    """The entry table as a plan leaves it, worked out on an overlay (the table is untouched)."""

    table: EntryTable
    overlay: dict[str, SessionEntry] = attrs.Factory(dict)
    members: dict[str, set[str]] = attrs.Factory(dict)
    written: list[SessionEntry] = attrs.Factory(list)

    def current(self, key: str) -> SessionEntry | None:
        return self.overlay[key] if key in self.overlay else self.table.get(key)

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

    check_plan(plan, revision_of, record_of)
    planned = _PlannedIndex(table)
    for source, target in plan.repoint:
        for key in sorted(planned.keys_at(source)):
            entry = planned.current(key)
            assert entry is not None  # noqa: S101  # listed by keys_at
            planned.store(attrs.evolve(entry, session_id=target), entry.revision)
    for write in plan.entries:
        now = planned.current(write.entry.session_key)
        expected = write.expected_revision
        if now is not None and expected is not None and now.revision != expected:
            # a repoint in this same plan moved the key; the caller's read still holds
            expected = now.revision
        planned.store(write.entry, expected)
    end = [
        (session_id, reason) for session_id, reason in plan.end if not planned.keys_at(session_id)
    ]
    return ResolvedPlan(written=planned.written, end=end)


def lease_is_free(current: tuple[str, datetime] | None, holder: str, now: datetime) -> bool:
    """Whether ``holder`` may take a lease currently held as ``current`` (holder, until)."""
    return current is None or current[0] == holder or current[1] <= now
