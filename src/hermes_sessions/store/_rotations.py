"""Rotations: when a key's session changes, and the :class:`RotationPlan` that changes it.

Every change of a key's session — first contact, automatic resets, ``/new``, resume, branch,
compression — is one plan, built here from what the store read. The store applies it, retries
when another writer won the race (:func:`retrying`) and tells ``on_rotate`` callbacks.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, Final, Literal, TypeAlias, TypeVar

import attrs

from hermes_sessions import backoff
from hermes_sessions.exceptions import ConflictError, LeaseHeldError
from hermes_sessions.ids import new_session_id
from hermes_sessions.models import (
    EndReason,
    Message,
    ResetDecision,
    ResetReason,
    RotateReason,
    SessionEntry,
    SessionRecord,
    SessionSource,
)
from hermes_sessions.policy import evaluate_reset
from hermes_sessions.protocols import EntryWrite, RotationPlan
from hermes_sessions.state import SessionState
from hermes_sessions.store._lineage import BRANCH_MARKER, COMPRESSION

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from datetime import datetime

    from hermes_sessions.keys import KeyPolicy
    from hermes_sessions.policy import ResetPolicies, ResetPolicy
    from hermes_sessions.protocols import Backend, Clock
    from hermes_sessions.store._session_store import SessionStore

__all__ = [
    "MAX_ATTEMPTS",
    "EndingSession",
    "RotateEvent",
    "SessionLookup",
    "SwitchReason",
    "back_off",
    "branch_child",
    "call_each",
    "compression_child",
    "compression_plan",
    "copy",
    "ending",
    "events",
    "expiry",
    "first_contact_plan",
    "gave_up",
    "leased",
    "new_entry",
    "new_record",
    "new_session_plan",
    "policy_for",
    "reset_decision",
    "retrying",
    "source_of",
    "switch_plan",
    "taking_turns",
    "update_entry",
]

MAX_ATTEMPTS: Final = 16
"""How often an operation re-reads and retries after losing a compare-and-swap race."""
MAX_TURN_WAITS: Final = 64
"""How often a command polls for its turn on a key (:func:`taking_turns`) before going ahead."""
TURN_TTL: Final = timedelta(seconds=30)
"""How long a turn lasts at most (a process that died holding one blocks nobody for longer)."""

T = TypeVar("T")

SwitchReason: TypeAlias = ResetReason | Literal["session_reset", "session_switch", "branched"]
"""Why a key leaves its session for another: both the rotate reason and the end reason."""


@attrs.frozen(kw_only=True)
class SessionLookup:
    """What :meth:`SessionStore.get_or_create` found.

    ``created`` is true on first contact, after an automatic reset and with ``force_new``;
    ``reset`` says why an automatic reset happened (``idle``, ``daily`` or ``suspended``);
    ``state`` is the session's state in its four scopes, read with the lookup; ``redelivered``
    is the stored copy when the lookup's ``platform_message_id`` was seen before.

    .. versionadded:: 0.1.0
    """

    entry: SessionEntry
    created: bool
    reset: ResetDecision | None = None
    state: SessionState = attrs.field(factory=SessionState)
    redelivered: Message | None = None
    """The message as stored the first time, when this lookup is for a redelivery (its
    ``session_id`` says where); nothing was rotated or touched, so the host answers nothing."""

    @property
    def session_id(self) -> str:
        """The current session id of the key."""
        return self.entry.session_id


@attrs.frozen(kw_only=True)
class RotateEvent:
    """A key's session id changed (passed to ``on_rotate`` callbacks).

    .. versionadded:: 0.1.0
    """

    session_key: str
    old_session_id: str | None
    new_session_id: str
    reason: RotateReason
    """``created``, ``idle``, ``daily``, ``suspended``, ``retention``, ``size``,
    ``session_reset``, ``session_switch``, ``branched`` or ``compression``."""
    entry: SessionEntry | None = None
    """The key's routing entry as the rotation wrote it."""


@attrs.frozen(kw_only=True)
class EndingSession:
    """A session a rotation is about to end (passed to ``before_rotate`` callbacks).

    The session is still open and its key still points at it, so a host can read its
    transcript and state (to flush memory from it) before the rotation goes ahead.

    .. versionadded:: 0.1.0
    """

    session_key: str | None
    """The key the rotation moves off the session (``None`` for a session without one)."""
    session_id: str
    """The session that ends."""
    reason: EndReason | str
    """Why it ends: ``idle``, ``daily``, ``suspended``, ``retention``, ``size``, ``session_reset``,
    ``session_switch``, ``branched`` or ``compression`` (the end reason the session gets)."""


def ending(plan: RotationPlan, session_key: str | None) -> list[EndingSession]:
    """The sessions ``plan`` ends, as ``before_rotate`` callbacks hear about them."""
    return [
        EndingSession(session_key=session_key, session_id=session_id, reason=reason)
        for session_id, reason in plan.end
    ]


def call_each(callbacks: Sequence[Callable[[T], object]], items: Iterable[T], hook: str) -> None:
    """Call every callback with every item; one that raises is logged and the rest still run."""
    for item in items:
        for callback in callbacks:
            try:
                callback(item)
            except Exception:
                import logging  # noqa: PLC0415  # loaded when a callback fails, not per process

                logging.getLogger(__name__).exception(
                    "%s callback %r failed for %s", hook, callback, item
                )


def back_off(lost: int) -> None:
    """Wait a random while after the ``lost``-th race lost in a row (0-based).

    The pause is :func:`hermes_sessions.backoff.pause`, so writers racing on one key spread out
    instead of colliding again at once.
    """
    time.sleep(backoff.pause(lost))


def gave_up(key: str, last: ConflictError | None) -> ConflictError:
    """The error of a command that lost :data:`MAX_ATTEMPTS` races in a row (``last``: the last)."""
    if last is None:
        return ConflictError(key, attempts=MAX_ATTEMPTS)
    return ConflictError(
        last.key,
        expected_revision=last.expected_revision,
        actual_revision=last.actual_revision,
        session_id=last.session_id,
        attempts=MAX_ATTEMPTS,
    )


def retrying(key: str, attempt: Callable[[], T]) -> T:
    """Run ``attempt`` until it does not lose a race (``ConflictError``), a bounded number of times.

    It backs off between attempts; after the last one it raises the last conflict, with the count.
    """
    last: ConflictError | None = None
    for lost in range(MAX_ATTEMPTS):
        try:
            return attempt()
        except ConflictError as error:
            last = error
        if lost + 1 < MAX_ATTEMPTS:
            back_off(lost)
    raise gave_up(key, last) from last


def update_entry(
    store: SessionStore, key: str, change: Callable[[SessionEntry], SessionEntry]
) -> SessionEntry:
    """Change a key's flags by compare-and-swap, re-reading after a lost race."""

    def attempt() -> SessionEntry:
        entry = store.entry(key)
        return store.backend.put_entry(change(entry), expected_revision=entry.revision)

    return retrying(key, attempt)


def events(
    written: Sequence[SessionEntry], old_session_id: str | None, reason: RotateReason
) -> list[RotateEvent]:
    """What ``on_rotate`` callbacks hear about the entries a plan wrote."""
    return [
        RotateEvent(
            session_key=entry.session_key,
            old_session_id=old_session_id,
            new_session_id=entry.session_id,
            reason=reason,
            entry=entry,
        )
        for entry in written
    ]


@contextlib.contextmanager
def leased(
    backend: Backend, resource: str, holder: str, ttl: timedelta, now: datetime
) -> Iterator[None]:
    """Hold ``holder``'s lease on ``resource`` for the block; ``LeaseHeldError`` if taken."""
    if not backend.acquire_lease(resource, holder, ttl=ttl, now=now):
        raise LeaseHeldError(resource, holder)
    try:
        yield
    finally:
        backend.release_lease(resource, holder)


@contextlib.contextmanager
def taking_turns(backend: Backend, resource: str, clock: Clock) -> Iterator[None]:
    """Run the block while holding a short lease on ``resource``, one writer at a time.

    Commands whose attempts are slow next to the write (a branch reads the lineage's titles)
    lose every race to a queue of writers on one key; holding a turn makes the one holder's
    compare-and-swap win. The turn is waited for with back-off, :data:`MAX_TURN_WAITS` polls
    at most; then the block runs anyway and races as before (still bounded by
    :func:`retrying`).
    """
    holder = uuid.uuid4().hex
    for waited in range(MAX_TURN_WAITS):
        if backend.acquire_lease(resource, holder, ttl=TURN_TTL, now=clock.now()):
            break
        back_off(min(waited, 5))
    else:
        yield
        return
    try:
        yield
    finally:
        backend.release_lease(resource, holder)


# -- the reset policy ------------------------------------------------------------------------------


def policy_for(resets: ResetPolicies, entry: SessionEntry, source: SessionSource) -> ResetPolicy:
    """The policy governing ``entry``: its own platform and chat type, else the source's."""
    return resets.for_source(entry.platform or source.platform, entry.chat_type or source.chat_type)


def expiry(
    policy: ResetPolicy,
    entry: SessionEntry,
    now: datetime,
    active_work: Callable[[str], bool] | None,
) -> ResetReason | None:
    """Why ``entry``'s session must be reset at ``now``, or ``None`` (``suspended`` wins)."""
    if entry.suspended:
        return "suspended"
    reason = evaluate_reset(policy, last_activity=entry.updated_at, now=now)
    if reason is not None and active_work is not None and active_work(entry.session_key):
        reason = evaluate_reset(policy, last_activity=entry.updated_at, now=now, active_work=True)
    return reason


def reset_decision(
    reason: ResetReason, entry: SessionEntry, policy: ResetPolicy, platform: str
) -> ResetDecision:
    """What the host is told about an automatic reset of ``entry``."""
    return ResetDecision(
        reason=reason, previous_session_id=entry.session_id, notify=policy.notifies(platform)
    )


# -- new sessions and entries ----------------------------------------------------------------------


def new_record(
    keys: KeyPolicy, key: str, source: SessionSource, now: datetime, *, title: str | None = None
) -> SessionRecord:
    """A new session created under ``key`` for ``source``, started ``now``."""
    return SessionRecord(
        id=new_session_id(now),
        source=source.platform,
        session_key=key,
        user_id=keys.canonical(source.platform, source.participant),
        started_at=now,
        title=title,
    )


def new_entry(key: str, session_id: str, source: SessionSource, now: datetime) -> SessionEntry:
    """A new routing entry pointing ``key`` at ``session_id``."""
    names = [name for name in (source.user_name, source.chat_name) if name]
    return SessionEntry(
        session_key=key,
        session_id=session_id,
        created_at=now,
        updated_at=now,
        origin=source,
        display_name=" @ ".join(names) or None,
        platform=source.platform,
        chat_type=source.chat_type,
    )


def source_of(record: SessionRecord) -> SessionSource:
    """The source a session was created for, as far as its record tells."""
    return SessionSource(platform=record.source, user_id=record.user_id)


def _child_of(parent: SessionRecord, now: datetime, title: str | None) -> SessionRecord:
    """A new open session continuing ``parent``, started ``now``."""
    return attrs.evolve(
        parent,
        id=new_session_id(now),
        parent_session_id=parent.id,
        started_at=now,
        ended_at=None,
        end_reason=None,
        title=title,
    )


def branch_child(parent: SessionRecord, now: datetime, title: str) -> SessionRecord:
    """The child ``/branch`` creates: unarchived, naming its parent under the branch marker."""
    return attrs.evolve(
        _child_of(parent, now, title),
        model_config={**parent.model_config, BRANCH_MARKER: parent.id},
        archived=False,
    )


def compression_child(parent: SessionRecord, now: datetime, title: str | None) -> SessionRecord:
    """The child that holds ``parent``'s compressed transcript."""
    return _child_of(parent, now, title)


def copy(message: Message) -> Message:
    """A message ready to be stored in another session (no id, no session)."""
    return attrs.evolve(message, id=None, session_id=None)


# -- plans -----------------------------------------------------------------------------------------


def first_contact_plan(
    keys: KeyPolicy, key: str, source: SessionSource, now: datetime
) -> RotationPlan:
    """Create the first session of ``key`` and its entry, unless the key got one meanwhile."""
    record = new_record(keys, key, source, now)
    entry = new_entry(key, record.id, source, now)
    return RotationPlan(
        at=now, create=record, entries=[EntryWrite(entry=entry, expected_revision=None)]
    )


def new_session_plan(
    keys: KeyPolicy,
    entry: SessionEntry,
    source: SessionSource,
    now: datetime,
    reason: SwitchReason,
    *,
    title: str | None,
) -> RotationPlan:
    """Give ``entry``'s key a new session (keeping the entry's origin); the old one ends."""
    record = new_record(keys, entry.session_key, source, now, title=title)
    target = attrs.evolve(
        new_entry(entry.session_key, record.id, source, now), origin=entry.origin or source
    )
    return switch_plan(entry, target, reason, now, create=record)


def switch_plan(
    entry: SessionEntry,
    target: SessionEntry,
    reason: SwitchReason,
    now: datetime,
    *,
    create: SessionRecord | None = None,
    messages: Sequence[Message] = (),
    reopen: Sequence[str] = (),
    copy_state_from: str | None = None,
    copy_messages_from: str | None = None,
) -> RotationPlan:
    """Move ``entry``'s key to ``target`` and end the session it leaves with ``reason``.

    ``create``, ``messages`` and ``reopen`` add a session to create (with the transcript of
    ``copy_messages_from`` and ``messages`` as its first messages, and the session state of
    ``copy_state_from``) and sessions to reopen. The write fails if
    the key moved on since ``entry`` was read.
    """
    if target.session_id != entry.session_id:
        target = attrs.evolve(target, previous_session_id=entry.session_id)
    return RotationPlan(
        at=now,
        entries=[EntryWrite(entry=target, expected_revision=entry.revision)],
        end=[(entry.session_id, reason)],
        create=create,
        messages=messages,
        reopen=reopen,
        copy_state_from=copy_state_from,
        copy_messages_from=copy_messages_from,
    )


def compression_plan(
    parent: SessionRecord, child: SessionRecord, messages: Sequence[Message], now: datetime
) -> RotationPlan:
    """Create ``child`` with ``messages``, move every key of ``parent`` to it, end ``parent``.

    The child starts with ``parent``'s session state. ``parent`` must still be open, so two
    compressions can never fork two children.
    """
    return RotationPlan(
        at=now,
        create=child,
        copy_state_from=parent.id,
        messages=messages,
        repoint=[(parent.id, child.id)],
        end=[(parent.id, COMPRESSION)],
        require_open=[parent.id],
    )
