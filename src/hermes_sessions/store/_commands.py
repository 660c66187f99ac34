"""The commands that move a key: the lookup, ``/new``, ``/resume``, ``/branch``, compression.

The lookup may reset a key; a forced delete moves keys away first.

Each works on a key that already has a session and, given the message's ``source``, on one that
has none yet (first contact): the command then creates the key's entry itself, so no empty
session is created only to be ended at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from hermes_sessions.exceptions import (
    ConflictError,
    InvalidArgumentError,
    SessionInUseError,
    SessionNotFoundError,
    TitleConflictError,
)
from hermes_sessions.models import ResetDecision, stamped
from hermes_sessions.policy import exceeds_size
from hermes_sessions.protocols import EntryWrite, RotationPlan
from hermes_sessions.store import _incognito, _rotations, _state, _titles, _views
from hermes_sessions.store._lineage import COMPRESSION
from hermes_sessions.store._rotations import SessionLookup
from hermes_sessions.store._targets import ResumeFilter, TargetResolver
from hermes_sessions.titles import sanitize_title
from hermes_sessions.window import estimate_tokens

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from hermes_sessions.models import (
        Message,
        SessionEntry,
        SessionRecord,
        SessionSource,
    )
    from hermes_sessions.policy import ResetPolicy
    from hermes_sessions.protocols import Backend
    from hermes_sessions.state import SessionState
    from hermes_sessions.store._session_store import SessionStore

__all__ = ["branch", "compress", "delete", "get_or_create", "reset", "resume"]

DEFAULT_BRANCH_TITLE = "branch"


def _current(store: SessionStore, key: str, source: SessionSource | None) -> SessionEntry | None:
    """The key's entry; ``None`` on first contact with a ``source``; else not found."""
    if source is not None and store.key_for(source) != key:
        raise InvalidArgumentError(
            f"source= builds the key {store.key_for(source)!r}, not {key!r}; pass the source of "
            "the message that carried the command"
        )
    entry = store.backend.get_entry(key)
    if entry is None and source is None:
        raise SessionNotFoundError(
            key=key, hint="it has no session yet; pass source= (or call get_or_create first)"
        )
    return entry


def _lane_titles(store: SessionStore, key: str | None) -> Backend:
    """Where the titles of ``key``'s lane are unique: in memory for an incognito lane."""
    return _incognito.lane_side(store.backend, key)


def _first_session(
    store: SessionStore, key: str, source: SessionSource, title: str | None
) -> SessionEntry:
    """Create the key's first session, titled; ``ConflictError`` if the key got an entry."""
    now = store.clock.now()
    record = _rotations.new_record(store.keys, key, source, now, title=title)
    entry = _rotations.new_entry(key, record.id, source, now)
    plan = RotationPlan(
        at=now, create=record, entries=[EntryWrite(entry=entry, expected_revision=None)]
    )
    return store._rotate_one(plan, None, "created")  # noqa: SLF001  # the store's own helper


def reset(
    store: SessionStore, key: str, *, source: SessionSource | None, title: str | None
) -> SessionEntry:
    """``/new``: a new session under ``key``; the old one (if any) ends ``session_reset``."""
    clean = sanitize_title(title)

    def attempt() -> SessionEntry:
        entry = _current(store, key, source)
        origin = source if entry is None else entry.origin or source
        if origin is None and entry is not None:
            origin = _rotations.source_of(store.session(entry.session_id))
        assert origin is not None  # noqa: S101  # _current refuses a missing entry without source
        if clean is not None:
            owner = _titles.owner_of_new(store.keys, key, origin)
            _titles.check_title_free(_lane_titles(store, key), clean, owner, exclude=None)
        if entry is None:
            return _first_session(store, key, origin, clean)
        return store._rotate(  # noqa: SLF001  # the store's own helper
            entry, origin, store.clock.now(), "session_reset", title=clean
        )

    return _rotations.retrying(key, attempt)


def resume(
    store: SessionStore,
    key: str,
    target: str,
    *,
    source: SessionSource | None,
    requester: SessionSource | None,
    allow: ResumeFilter | None,
) -> SessionEntry:
    """``/resume``: point ``key`` at ``target``; the session left ends ``session_switch``."""

    def attempt() -> SessionEntry:
        entry = _current(store, key, source)
        origin = source if entry is None else entry.origin
        resolver = TargetResolver(
            backend=store.backend,
            keys=store.keys,
            key=key,
            requester=requester or origin,
            allow=allow,
        )
        record = resolver.resolve(target)
        now = store.clock.now()
        reopen = [record.id] if record.is_ended else []
        if entry is None:
            assert source is not None  # noqa: S101  # _current refuses a missing entry without it
            created = _rotations.new_entry(key, record.id, source, now)
            plan = RotationPlan(
                at=now,
                entries=[EntryWrite(entry=created, expected_revision=None)],
                reopen=reopen,
            )
            return store._rotate_one(plan, None, "session_switch")  # noqa: SLF001
        if record.id == entry.session_id:
            return store.touch(key)
        moved = attrs.evolve(
            entry, session_id=record.id, updated_at=max(now, entry.updated_at), suspended=False
        )
        plan = _rotations.switch_plan(entry, moved, "session_switch", now, reopen=reopen)
        return store._rotate_one(plan, entry.session_id, "session_switch")  # noqa: SLF001

    return _rotations.retrying(key, attempt)


def get_or_create(
    store: SessionStore,
    source: SessionSource,
    *,
    force_new: bool,
    platform_message_id: str | None = None,
) -> SessionLookup:
    """The key's current session and its state, created or rotated if the policy says so.

    With ``platform_message_id``, a message already stored in the key's redelivery window is
    reported as ``redelivered`` before the policy is evaluated: a redelivery never rotates.
    """
    key = store.key_for(source)
    given: object = platform_message_id  # checked at the edge: callers may pass anything
    if given is not None and (not isinstance(given, str) or not given):
        raise InvalidArgumentError(
            "platform_message_id must be the id the message is stored under, a non-empty "
            f"string (or None to skip the redelivery check), got {platform_message_id!r}"
        )

    def attempt() -> SessionLookup:
        now = store.clock.now()
        entry, state = _state.lookup(
            store.backend, store.keys.namespace, key, source.platform, source.user_id
        )
        if entry is None:
            plan = _rotations.first_contact_plan(store.keys, key, source, now)
            created = store._rotate_one(plan, None, "created")  # noqa: SLF001
            return _lookup(store, source, created, created=True)
        if platform_message_id is not None:
            copy = _views.stored_copy(store.backend, entry, platform_message_id)
            if copy is not None:  # checked before the policy: a redelivery rotates nothing
                return _unchanged(store, source, entry, state, redelivered=copy)
        policy = _rotations.policy_for(store.resets, entry, source)
        if entry.pending_reset is not None and not force_new:
            return _reset_while_silent(store, source, entry, policy, now)
        reason = _rotations.expiry(policy, entry, now, store.active_work)
        if reason is None and not force_new:
            if not _oversize(store, policy, entry):
                return _unchanged(store, source, entry, state)
            reason = "size"
        rotated = (
            _size_rotation(store, entry, now)
            if reason == "size"
            else store._rotate(entry, source, now, reason or "session_reset")  # noqa: SLF001
        )
        decision = None
        if reason is not None:
            decision = _rotations.reset_decision(reason, entry, policy, source.platform)
        return _lookup(store, source, rotated, created=True, reset=decision)

    return _rotations.retrying(key, attempt)


def _oversize(store: SessionStore, policy: ResetPolicy, entry: SessionEntry) -> bool:
    """Whether ``entry``'s live session reached ``policy``'s size limits (read only if set)."""
    if policy.max_messages is None and policy.max_tokens is None:
        return False
    record = store.session(entry.session_id)
    tokens = 0
    if policy.max_tokens is not None:  # the session is capped, so reading it is bounded
        tokens = sum(estimate_tokens(m) for m in store.transcript(entry.session_id))
    return exceeds_size(policy, messages=record.message_count, tokens=tokens)


def _size_rotation(store: SessionStore, entry: SessionEntry, now: datetime) -> SessionEntry:
    """Move ``entry``'s key to a child of its full session, like compression but empty.

    The child names the full session as its parent, takes its session state and the next title
    of its lineage; the full session ends ``size``.
    """
    parent = store.session(entry.session_id)
    title = None
    if parent.title is not None:
        titles = _lane_titles(store, parent.session_key)
        title = _titles.next_title(titles, parent.title, _titles.owner(parent))
    child = _rotations.compression_child(parent, now, title)
    moved = attrs.evolve(entry, session_id=child.id, updated_at=max(now, entry.updated_at))
    plan = _rotations.switch_plan(
        entry, moved, "size", now, create=child, copy_state_from=parent.id
    )
    try:
        return store._rotate_one(plan, entry.session_id, "size")  # noqa: SLF001
    except TitleConflictError as error:  # the lineage's next number was taken: re-read, again
        raise ConflictError(session_id=error.other_session_id) from error


def _reset_while_silent(
    store: SessionStore,
    source: SessionSource,
    entry: SessionEntry,
    policy: ResetPolicy,
    now: datetime,
) -> SessionLookup:
    """The first lookup after a reset made while the chat was silent (retention): say so once.

    The key already points at its new, empty session; the flag is cleared (compare-and-swap,
    so of racing lookups exactly one reports the reset) and activity recorded.
    """
    assert entry.pending_reset is not None  # noqa: S101  # the caller checked
    assert entry.previous_session_id is not None  # noqa: S101  # set with the flag
    cleared = attrs.evolve(entry, pending_reset=None, updated_at=max(now, entry.updated_at))
    written = store.backend.put_entry(cleared, expected_revision=entry.revision)
    decision = ResetDecision(
        reason=entry.pending_reset,
        previous_session_id=entry.previous_session_id,
        notify=policy.notifies(source.platform),
    )
    return _lookup(store, source, written, created=True, reset=decision)


def _unchanged(
    store: SessionStore,
    source: SessionSource,
    entry: SessionEntry,
    state: SessionState | None,
    *,
    redelivered: Message | None = None,
) -> SessionLookup:
    """The lookup of a key that stays where it is (``state``: read with the entry, if it was)."""
    if state is None:
        return _lookup(store, source, entry, created=False, redelivered=redelivered)
    return SessionLookup(entry=entry, created=False, state=state, redelivered=redelivered)


def _lookup(
    store: SessionStore,
    source: SessionSource,
    entry: SessionEntry,
    *,
    created: bool,
    reset: ResetDecision | None = None,
    redelivered: Message | None = None,
) -> SessionLookup:
    state = _state.read(
        store.backend,
        store.keys.namespace,
        session_key=entry.session_key,
        session_id=entry.session_id,
        platform=source.platform,
        user_id=source.user_id,
    )
    return SessionLookup(
        entry=entry, created=created, reset=reset, state=state, redelivered=redelivered
    )


def branch(
    store: SessionStore, key: str, *, source: SessionSource | None, title: str | None
) -> SessionEntry:
    """``/branch``: copy the key's transcript into a child session and switch to it."""

    def attempt() -> SessionEntry:
        entry = _current(store, key, source)
        clean = sanitize_title(title)
        if entry is None:
            assert source is not None  # noqa: S101  # _current refuses a missing entry without it
            owner = _titles.owner_of_new(store.keys, key, source)
            if clean is None:
                clean = _titles.next_title(_lane_titles(store, key), DEFAULT_BRANCH_TITLE, owner)
            else:
                _titles.check_title_free(_lane_titles(store, key), clean, owner, exclude=None)
            return _first_session(store, key, source, clean)
        parent = store.session(entry.session_id)
        owner, titles = _titles.owner(parent), _lane_titles(store, key)
        if clean is None:
            clean = _titles.next_title(titles, parent.title or DEFAULT_BRANCH_TITLE, owner)
        else:
            _titles.check_title_free(titles, clean, owner, exclude=None)
        now = store.clock.now()
        child = _rotations.branch_child(parent, now, clean)
        moved = attrs.evolve(entry, session_id=child.id, updated_at=max(now, entry.updated_at))
        plan = _rotations.switch_plan(
            entry,
            moved,
            "branched",
            now,
            create=child,
            copy_messages_from=parent.id,
            copy_state_from=parent.id,
        )
        try:
            return store._rotate_one(plan, entry.session_id, "branched")  # noqa: SLF001
        except TitleConflictError as error:
            if title is not None:
                raise
            # another branch took the lineage's next number meanwhile: re-read and number again
            raise ConflictError(session_id=error.other_session_id) from error

    with _rotations.taking_turns(store.backend, f"branch:{key}", store.clock):
        return _rotations.retrying(key, attempt)


def delete(store: SessionStore, session_id: str, *, force: bool) -> tuple[str, ...]:
    """Delete a session; with ``force``, first move every key pointing at it to a new session.

    Returns the keys that were moved on. Without ``force`` a session a key points to is refused
    with ``SessionInUseError``; children are orphaned, not deleted. The delete itself is
    conditional (:attr:`RotationPlan.drop`): a key that reaches the session after the check (a
    ``/resume``) keeps it, and the check runs again.
    """
    moved: list[str] = []
    last: ConflictError | None = None
    for attempt in range(_rotations.MAX_ATTEMPTS):
        try:
            record = store.session(session_id)
        except SessionNotFoundError:
            if not moved:
                raise
            return tuple(moved)  # ending it deleted it (an incognito lane keeps no ended session)
        entries = store.backend.entries(session_id=record.id)
        if entries and not force:
            raise SessionInUseError(record.id, [e.session_key for e in entries])
        try:
            for entry in entries:
                source = entry.origin or _rotations.source_of(record)
                store._rotate(  # noqa: SLF001  # the store's own helper
                    entry, source, store.clock.now(), "session_reset"
                )
                if entry.session_key not in moved:
                    moved.append(entry.session_key)
            if not entries:
                plan = RotationPlan(at=store.clock.now(), drop=[(record.id, record.revision)])
                store.backend.apply(plan)
                return tuple(moved)
        except ConflictError as error:  # a key moved or reached the session meanwhile: again
            last = error
            _rotations.back_off(attempt)
    raise _rotations.gave_up(session_id, last) from last  # pragma: no cover  # lost every race


def compress(
    store: SessionStore, session_id: str, messages: Sequence[Message], *, holder: str
) -> SessionRecord:
    """Replace an open session by a compressed child holding ``messages``, under the lease."""
    with store.compression_lease(session_id, holder):
        parent = store.session(session_id)
        if parent.is_ended:
            raise ConflictError(session_id=session_id)
        titles = _lane_titles(store, parent.session_key)
        now = store.clock.now()
        prepared = [
            store.redact(_rotations.copy(stamped(m, timestamp=m.timestamp or now)))
            for m in messages
        ]

        store._before(  # noqa: SLF001  # the store's own helper
            RotationPlan(at=now, end=[(parent.id, COMPRESSION)]), parent.session_key
        )
        for lost in range(_rotations.MAX_ATTEMPTS):
            title = None
            if parent.title is not None:
                title = _titles.next_title(titles, parent.title, _titles.owner(parent))
            child = _rotations.compression_child(parent, now, title)
            try:
                written = store.backend.apply(
                    _rotations.compression_plan(parent, child, prepared, now)
                )
                break
            except TitleConflictError:  # the next number was taken meanwhile: number again
                if title is None or lost + 1 == _rotations.MAX_ATTEMPTS:
                    raise
                _rotations.back_off(lost)
    store._notify(_rotations.events(written, parent.id, "compression"))  # noqa: SLF001
    return store.session(child.id)
