"""The storage protocols every backend implements, and the values they exchange.

A backend is two layers with different lifetimes plus one write that spans both:

* :class:`RoutingIndex` — session key → current :class:`~hermes_sessions.models.SessionEntry`.
  Small, changes on every message. Writes are compare-and-swap on ``revision``; recording
  activity is the one exception (it only moves ``updated_at`` forward).
* :class:`TranscriptStore` — session records and their messages. Append-mostly and canonical.
* :class:`StateStore` — JSON state in scopes (:mod:`hermes_sessions.state`), changed alone or
  with an append, and the per-session ``revision`` that every change of a session bumps.
* :meth:`Backend.apply` — a :class:`RotationPlan` (end sessions, create one, reopen some,
  re-point keys) committed atomically or not at all: every rotation goes through it.

Optional abilities are separate protocols, checked with ``isinstance`` (``SupportsSearch``,
``SupportsScrub``, ``SupportsReindex``, the others below, and ``SupportsLedger``, defined in
:mod:`hermes_sessions.ledger`; :class:`SearchableBackend` is a backend that searches).
``hermes_sessions.testing`` states these contracts as tests; ``docs/backends.md`` shows how.

Conventions for every method: a missing entry or session is ``None`` for lookups and
``SessionNotFoundError`` for writes; every method is thread-safe; after :meth:`Backend.close`
every method raises ``BackendClosedError``; storage failures are wrapped in ``StorageError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

import attrs

from hermes_sessions._rotation import EntryWrite, RotationPlan
from hermes_sessions.ledger import SupportsLedger

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from datetime import datetime, timedelta
    from types import TracebackType

    from hermes_sessions.checks import CheckReport
    from hermes_sessions.models import EndReason, Message, SessionEntry, SessionRecord
    from hermes_sessions.queries import SearchHit, SearchQuery, SessionPage, SessionQuery
    from hermes_sessions.results import AppendResult
    from hermes_sessions.usage import Usage

__all__ = [
    "Backend",
    "Capabilities",
    "Clock",
    "EntryWrite",
    "ReindexProgress",
    "RotationPlan",
    "RoutingIndex",
    "SearchableBackend",
    "StateStore",
    "SupportsCheck",
    "SupportsLedger",
    "SupportsReindex",
    "SupportsScrub",
    "SupportsSearch",
    "SupportsStateScopes",
    "SupportsUserKeys",
    "SupportsWriteBatches",
    "TranscriptStore",
]


class Clock(Protocol):
    """Where the store gets the time. Inject a fake one in tests (``testing.FrozenClock``).

    .. versionadded:: 0.1.0
    """

    def now(self) -> datetime:
        """Return the current time as an aware datetime."""
        ...


@attrs.frozen(kw_only=True)
class Capabilities:
    """What a backend can do; the conformance suite runs the tests that apply.

    Optional methods are not flags here: a backend that searches implements
    :class:`SupportsSearch`, one that scrubs :class:`SupportsScrub`.

    .. versionadded:: 0.1.0
    """

    persistent: bool
    """Data survives closing and reopening (and crashes)."""
    multiprocess: bool
    """Several processes may open the same data at once."""


# -- the two layers --------------------------------------------------------------------------------


class RoutingIndex(Protocol):
    """Session key → routing entry, with compare-and-swap writes.

    .. versionadded:: 0.1.0
    """

    def get_entry(self, key: str) -> SessionEntry | None:
        """Return the entry of ``key``, or ``None``."""
        ...

    def put_entry(self, entry: SessionEntry, *, expected_revision: int | None) -> SessionEntry:
        """Store ``entry`` if its key's current revision is ``expected_revision``.

        ``None`` means the key must have no entry yet. The stored entry (returned) has revision
        ``expected_revision + 1`` (or 1). A mismatch raises ``ConflictError`` and writes nothing;
        an entry pointing at an unknown session raises ``SessionNotFoundError``.
        """
        ...

    def delete_entry(self, key: str, *, expected_revision: int) -> None:
        """Remove the entry of ``key`` if its revision is ``expected_revision``.

        A missing entry or another revision raises ``ConflictError``.
        """
        ...

    def entries(self, *, session_id: str | None = None) -> list[SessionEntry]:
        """Return all entries, or those pointing at ``session_id``, in key order."""
        ...

    def record_activity(
        self, key: str, at: datetime, *, last_prompt_tokens: int | None = None
    ) -> SessionEntry | None:
        """Move the entry's ``updated_at`` forward to ``at`` (never back); no revision check.

        ``last_prompt_tokens``, if given, is stored too. The revision is *not* bumped, so
        activity never makes a concurrent compare-and-swap fail. Returns the entry, or ``None``
        if the key has none.
        """
        ...


class TranscriptStore(Protocol):
    """Session records and their messages.

    Message ids are assigned by the backend, unique within a session, and increase in insertion
    order. ``message_count`` counts active messages and ``tool_call_count`` their tool calls;
    the backend keeps both exact through every write. ``last_active_at`` is the newest
    message timestamp (``started_at`` until there is one).

    .. versionadded:: 0.1.0
    """

    def create_session(self, record: SessionRecord) -> SessionRecord:
        """Store a new session; idempotent (an existing id returns the stored record unchanged).

        Counters and ``last_active_at`` of ``record`` are ignored: a new session has no messages.
        """
        ...

    def get_session(self, session_id: str) -> SessionRecord | None:
        """Return the record of ``session_id``, or ``None``."""
        ...

    def update_session(
        self,
        session_id: str,
        *,
        values: Mapping[str, Any] | None = None,
        increments: Mapping[str, int | float] | None = None,
    ) -> SessionRecord:
        """Set fields and add to counters atomically; return the updated record.

        ``values`` may set ``title``, ``user_id``, ``model``, ``model_config``,
        ``system_prompt``, ``archived`` and ``metadata``. ``increments`` may add to the token
        counters and ``estimated_cost_usd``; concurrent increments never lose updates. Other
        field names raise ``ValueError``.
        """
        ...

    def end_session(
        self, session_id: str, reason: EndReason | str, *, at: datetime
    ) -> SessionRecord:
        """End a session; if it already ended, the first reason and time stay.

        ``reason`` is one of :data:`~hermes_sessions.models.EndReason` or a host's own string.
        """
        ...

    def reopen_session(self, session_id: str) -> SessionRecord:
        """Clear a session's end reason and end time."""
        ...

    def delete_session(self, session_id: str) -> bool:
        """Delete a session, its messages and their search rows; orphan its children.

        Children keep existing with ``parent_session_id=None``. Returns whether it existed.
        Unconditional: the store never calls it on a session a key points to, and retention
        deletes through :attr:`RotationPlan.drop`, which re-checks that in its transaction.
        """
        ...

    def list_sessions(self, query: SessionQuery) -> SessionPage:
        """Return one page of sessions matching ``query`` (see :meth:`SessionQuery.page`)."""
        ...

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
        """Append messages atomically and idempotently; return them as stored.

        All or none are written, in one transaction. If the batch's first message that carries
        a ``platform_message_id`` is already in the session (active or not), the batch is a
        redelivery: nothing is written (not even ``touch_at``) and the result is ``duplicate``
        (:func:`hermes_sessions.backends.rules.plan_append` is the rule, written once).
        Otherwise a later message whose platform id is already stored is not stored again: the
        stored one is returned in its place. Messages without a platform id are always appended.
        ``session_id`` on the messages is ignored. With ``touch_at``, every key pointing at the
        session records activity at that time, and ``usage`` is added to the session's counters
        (as ``update_session`` with ``usage.values()`` and ``usage.increments()``), both in the
        same transaction; a redelivery applies neither.

        ``state`` (scope id → changes, see :meth:`StateStore.update_state`) is merged in the same
        transaction. A write that stores a message or changes state bumps the session's
        ``revision`` by one; with ``if_revision``, a session whose revision differs raises
        ``ConflictError`` and nothing is written (a redelivery is recognised first: it is
        ``duplicate``, never a conflict). ``StateTooLargeError`` also writes nothing.
        """
        ...

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
        """Return messages in insertion order, optionally a window of them.

        ``after_id``/``before_id`` are exclusive bounds. ``limit`` keeps the first ``limit``
        messages of the range, or the last ones with ``from_end=True`` (the result is still in
        insertion order). An unknown session raises ``SessionNotFoundError``.
        """
        ...

    def get_message(self, session_id: str, message_id: int) -> Message | None:
        """Return one message (active or not), or ``None``."""
        ...

    def find_message(self, session_id: str, platform_message_id: str) -> Message | None:
        """Return the message with this platform id in the session (active or not), or ``None``."""
        ...

    def replace_message(self, session_id: str, message_id: int, message: Message) -> Message:
        """Replace one message's fields (content, tool calls, ...) keeping its id; re-index it.

        This and the other rewrites below (when they change something) bump the revision.

        Unknown messages raise ``SessionNotFoundError``; a platform message id that another
        message of the session already has raises ``ValueError``.
        """
        ...

    def replace_messages(self, session_id: str, messages: Sequence[Message]) -> list[Message]:
        """Replace the whole transcript atomically (new ids); return the stored messages."""
        ...

    def set_active(self, session_id: str, message_ids: Sequence[int], *, active: bool) -> int:
        """Soft-delete (``active=False``) or restore messages; return how many changed."""
        ...

    def delete_messages(self, session_id: str, message_ids: Sequence[int]) -> int:
        """Delete messages for good (and their search rows); return how many were deleted."""
        ...


class StateStore(Protocol):
    """JSON state in scopes, and the per-session revision.

    Scopes are opaque strings to a backend (:attr:`hermes_sessions.state.StateScope.id`); a
    scope's value is a JSON object, absent while empty. Every backend merges with
    :func:`hermes_sessions.state.merge_state` (sets, :data:`~hermes_sessions.state.DELETE`
    removes, 64 KiB per scope). Deleting a session deletes its session scope
    (``StateScope.session(id)``); :attr:`RotationPlan.copy_state_from` copies one.

    .. versionadded:: 0.1.0
    """

    def get_state(self, scope_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Return the value of every scope in ``scope_ids`` that holds one, in one read."""
        ...

    def update_state(
        self,
        changes: Mapping[str, Mapping[str, Any]],
        *,
        session_id: str | None = None,
        if_revision: int | None = None,
    ) -> SessionRecord | None:
        """Merge ``changes`` (scope id → ``{key: value or DELETE}``) atomically.

        With ``session_id`` the change is made through that session: ``if_revision`` is checked
        against its revision (``ConflictError`` when it differs), the revision is bumped, and the
        updated record is returned; an unknown session raises ``SessionNotFoundError``. Without
        it, ``if_revision`` must be ``None`` and the result is ``None``. A scope that would grow
        over the limit raises ``StateTooLargeError``; on any error nothing is written.
        """
        ...


@runtime_checkable
class Backend(RoutingIndex, TranscriptStore, StateStore, Protocol):
    """A complete storage backend: both layers, the atomic rotation, leases and lifecycle.

    .. versionadded:: 0.1.0
    """

    def capabilities(self) -> Capabilities:
        """What this backend can do."""
        ...

    def apply(self, plan: RotationPlan) -> list[SessionEntry]:
        """Commit ``plan`` atomically (see :class:`RotationPlan`); return the entries written."""
        ...

    def acquire_lease(self, resource: str, holder: str, *, ttl: timedelta, now: datetime) -> bool:
        """Take or renew an exclusive lease on ``resource`` until ``now + ttl``.

        Succeeds if the resource is free, its lease expired, or ``holder`` already holds it.
        Leases guard slow work done outside the backend (summarising for compression).
        """
        ...

    def release_lease(self, resource: str, holder: str) -> None:
        """Release ``holder``'s lease on ``resource`` (no-op if it is not the holder)."""
        ...

    def close(self) -> None:
        """Release every resource; later calls raise ``BackendClosedError``. Idempotent."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class SupportsSearch(Protocol):
    """Optional ability: full-text search with the shared query language.

    Every backend must agree on which messages a query matches (``hermes_sessions.text`` is
    the reference); scores are comparable only within one result list. The store and the
    conformance suite check for it with ``isinstance(backend, SupportsSearch)``.

    .. versionadded:: 0.1.0
    """

    def search(self, query: SearchQuery) -> list[SearchHit]:
        """Return hits for ``query``: best first (``rank``), or by message time."""
        ...


@runtime_checkable
class SupportsScrub(Protocol):
    """Optional ability: make deleted text unrecoverable from the backend's files.

    A backend that keeps deleted text in its files until maintenance (free pages, a write-ahead
    log, an index awaiting a merge) offers it; :meth:`SessionStore.erase_user` calls it last.

    .. versionadded:: 0.1.0
    """

    def scrub(self) -> None:
        """Remove the remains of deleted data from the files."""
        ...


@runtime_checkable
class SupportsWriteBatches(Protocol):
    """Optional ability: run whole calls, each making this backend's writes, as one commit.

    :class:`~hermes_sessions.aio.AsyncSessionStore` queues its writes (``append``,
    ``update_state``, ``record_usage``) for one writer thread, which hands every call queued
    since its last commit to :meth:`write_batch`. A call is a store method bound to its
    arguments; while it runs, every statement it makes through this backend (reads too) runs in
    the batch's transaction on the calling thread. The semantics are those of SQLite's group
    commit (``docs/sqlite.md``): as if the calls committed one after another in order, each in a
    savepoint (a call's own error rolls back only it), the database's errors failing them all,
    and nothing returned before the ``COMMIT`` holding every call that succeeded.

    .. versionadded:: 0.1.0
    """

    def write_batch(
        self, calls: Sequence[Callable[[], object]]
    ) -> list[tuple[object, BaseException | None]]:
        """Run ``calls`` in order in one transaction; each call's ``(result, error)``, committed."""
        ...


@attrs.frozen
class ReindexProgress:
    """How far :meth:`SupportsReindex.reindex` has come, reported after every batch.

    .. versionadded:: 0.1.0
    """

    done: int
    """Messages whose index rows hold the current token stream (earlier runs included)."""
    total: int
    """Messages in the store as far as the re-index knows (it grows if messages arrive)."""


@runtime_checkable
class SupportsCheck(Protocol):
    """Optional ability: verify the stored data without changing it.

    :meth:`check` reports what the medium's own checks find (SQLite's ``PRAGMA
    integrity_check`` and full-text index, the CRC32 of every JSONL line and the journal's line
    counts) and the library's invariants, checked the same way on every backend by
    :func:`hermes_sessions.checks.make_report`: every routing key points at an existing session,
    a key has at most one session not yet ended, and the counters of every record match its
    transcript. Damage is reported, never raised. Every bundled backend has it.

    .. versionadded:: 0.1.0
    """

    def check(self) -> CheckReport:
        """Read everything and return what is wrong (``report.ok`` when nothing is)."""
        ...


@runtime_checkable
class SupportsReindex(Protocol):
    """Optional ability: bring a stored search index up to the current token stream.

    A backend that stores :func:`~hermes_sessions.text.index_tokens` (SQLite's FTS5 table,
    PostgreSQL's ``tsvector`` rows) records :data:`~hermes_sessions.text.TOKENS_VERSION`
    beside them. While the recorded version is an older one, searches stay exact (the backend
    checks messages with the shared matcher, which is slower) and :meth:`reindex_needed` is
    true. :meth:`reindex` rewrites the rows in batches, each its own transaction, and records
    how far it got: killed at any point, the next call resumes there; other readers and writers
    keep working meanwhile. Backends that index in memory (in-memory, JSONL) need none of this.

    .. versionadded:: 0.1.0
    """

    def reindex_needed(self) -> bool:
        """Whether stored index rows may hold an older token stream (searches are slower)."""
        ...

    def reindex(
        self,
        *,
        progress: Callable[[ReindexProgress], None] | None = None,
        batch_size: int = 500,
    ) -> int:
        """Rewrite the index rows not yet current; return how many messages this call rewrote.

        ``progress`` is called after every batch of ``batch_size`` messages and once at the end
        (with ``done == total``). Returns 0 at once when nothing needs rewriting.
        """
        ...


@runtime_checkable
class SupportsStateScopes(Protocol):
    """Optional ability: list the state scopes holding a value (key rotation visits them all).

    .. versionadded:: 0.1.0
    """

    def state_scopes(self) -> list[str]:
        """Every scope id that holds a value, sorted."""
        ...


@runtime_checkable
class SupportsUserKeys(Protocol):
    """Optional ability: destroy users' own keys; ``SessionStore.erase_user`` calls it last.

    .. versionadded:: 0.1.0
    """

    def destroy_user_keys(self, platform: str, user_ids: Sequence[str]) -> int:
        """Destroy the keys of these users of ``platform``; return how many existed."""
        ...


@runtime_checkable
class SearchableBackend(Backend, SupportsSearch, Protocol):
    """A backend that also searches (what the conformance suite's search tests run against).

    .. versionadded:: 0.1.0
    """
