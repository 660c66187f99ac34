"""Automatic retention: a :class:`RetentionPolicy` and the engine that enforces it.

:meth:`SessionStore.maintain` and :meth:`SessionStore.prune` both end here, so there is one
deletion path. The rules run in a fixed order — age, then sessions per key, then store size —
and each removes the least recently active *ended* session first. Never removed:

* a session a routing key points to (its key's live session, suspended keys' included) — checked
  again by the backend in the transaction that deletes (:attr:`RotationPlan.drop`), so a
  ``/resume`` that lands between the choice and the delete keeps its session, and so does a
  message or state change (the session's revision moved on);
* a session ended ``suspended`` (kept so the user can ``/resume`` it);
* a session under active work: its key is busy (the store's ``active_work`` callback, or a turn
  or lock held in the :class:`~hermes_sessions.aio.AsyncSessionStore` that runs the pass, asked
  when the session is chosen and again just before its delete), or someone holds its
  compression lease. The engine holds that lease on each session it removes until the pass
  ends, so a compression cannot start on it meanwhile.

A session spared at delete time is listed in ``spared``, not in ``removed``.

Sizes are estimates: the UTF-8 length of the JSON encoding of the record and its messages
(inactive ones included), the same measure on every backend; files may shrink later or less.
The size rule reads every transcript: a pass is a maintenance job, not part of a turn. A dry run
deletes nothing (it takes and releases the leases, to report exactly what a real pass would).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

import attrs

from hermes_sessions import serde
from hermes_sessions.exceptions import ConflictError, InvalidArgumentError, SessionNotFoundError
from hermes_sessions.keys import KeyPolicy
from hermes_sessions.policy import ResetPolicies, evaluate_reset
from hermes_sessions.protocols import RotationPlan
from hermes_sessions.queries import SessionQuery
from hermes_sessions.store import _rotations

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime

    from hermes_sessions.models import Message, SessionEntry, SessionRecord
    from hermes_sessions.policy import ResetPolicy
    from hermes_sessions.protocols import Backend
    from hermes_sessions.queries import SessionPage
    from hermes_sessions.store._session_store import SessionStore

__all__ = [
    "RetentionPolicy",
    "RetentionRemoval",
    "RetentionReport",
    "RetentionRule",
    "enforce",
    "maintain",
]

RetentionRule: TypeAlias = Literal["max_age", "max_sessions_per_key", "max_store_bytes"]
"""Which rule of a :class:`RetentionPolicy` removed a session.

.. versionadded:: 0.1.0
"""

HOLDER: Final = "hermes-sessions:retention"
"""The lease holder of a retention pass (on ``compress:<session id>``)."""


def _optional_age(_instance: object, _attribute: object, value: timedelta | None) -> None:
    candidate: object = value
    if candidate is not None and (not isinstance(candidate, timedelta) or candidate < timedelta(0)):
        raise InvalidArgumentError(f"max_age must be a timedelta >= 0 or None, got {value!r}")


def _optional_count(minimum: int) -> Callable[[object, attrs.Attribute[int | None], object], None]:
    def check(_instance: object, attribute: attrs.Attribute[int | None], value: object) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise InvalidArgumentError(
                f"{attribute.name} must be an int >= {minimum} or None, got {value!r}"
            )

    return check


def _sources(value: Iterable[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise TypeError("sources takes a sequence of platform names; wrap a single one in a tuple")
    return tuple(value)


@attrs.frozen(kw_only=True)
class RetentionPolicy:
    """How much history a store keeps; enforced by :meth:`SessionStore.maintain`.

    Args:
        max_age: Remove ended sessions last active longer ago than this (0: every ended one).
        max_sessions_per_key: Keep at most this many sessions per session key (open ones
            count; the oldest ended ones go).
        max_store_bytes: Remove the oldest ended sessions, across keys, until the estimated
            size of all sessions is at most this.
        sources: Only remove sessions of these platforms (``None``: every platform). Sizes and
            counts still include the others.

    A rule left ``None`` is off; a policy with every rule off removes nothing.

    .. versionadded:: 0.1.0
    """

    max_age: timedelta | None = attrs.field(default=None, validator=_optional_age)
    max_sessions_per_key: int | None = attrs.field(default=None, validator=_optional_count(1))
    max_store_bytes: int | None = attrs.field(default=None, validator=_optional_count(0))
    sources: tuple[str, ...] | None = attrs.field(default=None, converter=_sources)


@attrs.frozen
class RetentionRemoval:
    """One session a retention pass removed (or would remove), and the rule that did.

    .. versionadded:: 0.1.0
    """

    session_id: str
    rule: RetentionRule


@attrs.frozen(kw_only=True)
class RetentionReport:
    """What a retention pass removed, or would remove with ``dry_run``.

    .. versionadded:: 0.1.0
    """

    dry_run: bool
    removed: tuple[RetentionRemoval, ...]
    """In the order the rules chose them."""
    messages: int
    """Messages in the removed sessions (inactive ones included)."""
    bytes: int
    """Estimated bytes freed: the JSON encoding of the removed records and messages."""
    spared: tuple[str, ...] = ()
    """Sessions a rule would have removed but that are protected (see ``docs/retention.md``)."""
    spared_reasons: dict[str, str] = attrs.field(factory=dict)
    """Why each of ``spared`` stayed: ``suspended``, ``live`` (a key's live session, not expired,
    under a count or size rule), ``shared`` (several keys point at it), ``active_work``,
    ``lease`` (someone holds its compression lease) or ``changed`` (resumed, written to or its
    key moved between the choice and the delete)."""
    store_bytes: int | None = None
    """Estimated size of what remains, when the policy has ``max_store_bytes``."""

    @property
    def session_ids(self) -> tuple[str, ...]:
        """The removed session ids, in order."""
        return tuple(r.session_id for r in self.removed)


def _size(value: Message | SessionRecord) -> int:
    return len(json.dumps(serde.unstructure(value), ensure_ascii=False).encode())


def _idle(_key: str) -> bool:
    """No key is busy (the default of ``busy``)."""
    return False


def _oldest_first(records: Iterable[SessionRecord]) -> list[SessionRecord]:
    return sorted(records, key=lambda r: (r.last_active, r.id))


class _Pass:
    """The state of one pass: what it chose, what it spared and why, the leases it holds."""

    def __init__(
        self,
        backend: Backend,
        policy: RetentionPolicy,
        *,
        now: datetime,
        busy: Callable[[str], bool],
        lease_ttl: timedelta,
        lifecycle: Lifecycle,
    ) -> None:
        self.backend = backend
        self.policy = policy
        self.now = now
        self.busy = busy
        self.lease_ttl = lease_ttl
        self.lifecycle = lifecycle
        self.pointing: dict[str, list[SessionEntry]] = {}
        for entry in backend.entries():
            self.pointing.setdefault(entry.session_id, []).append(entry)
        self.expired = {
            entry.session_id
            for entries in self.pointing.values()
            for entry in entries
            if lifecycle.expired(entry, now)
        }
        self.doomed: dict[str, RetentionRule] = {}
        self.spared: dict[str, str] = {}
        self.leased: list[str] = []
        self.weights: dict[str, tuple[int, int]] = {}

    def weigh(self, record: SessionRecord) -> tuple[int, int]:
        """``(messages, bytes)`` of a session, measured once."""
        if record.id not in self.weights:
            transcript = self.backend.get_messages(record.id, include_inactive=True)
            size = sum(_size(m) for m in transcript) + _size(record)
            self.weights[record.id] = (len(transcript), size)
        return self.weights[record.id]

    def activity(self, record: SessionRecord) -> datetime:
        """A session's last activity: its newest message, or its keys' later activity."""
        return max([record.last_active, *(e.updated_at for e in self.pointing.get(record.id, []))])

    def removable(self, record: SessionRecord, rule: RetentionRule) -> bool:
        """Whether ``rule`` may weigh ``record`` (not chosen yet, of the policy's sources).

        It must have ended or expired (the age rule: any state), and never be the empty session
        an earlier pass left a key with (its next message will use it).
        """
        sources = self.policy.sources
        if record.id in self.doomed or (sources is not None and record.source not in sources):
            return False
        entries = self.pointing.get(record.id, [])
        if record.message_count == 0 and any(e.pending_reset for e in entries):
            return False
        return rule == "max_age" or record.ended_at is not None or record.id in self.expired

    def replacement(self, record: SessionRecord) -> int:
        """Bytes of the empty session a key moved off ``record`` gets.

        Estimated from above by ``record``'s own record, which has every field the new one has.
        """
        return _size(record) if record.id in self.pointing else 0

    def spare(self, record: SessionRecord, why: str) -> bool:
        """Keep ``record``, saying why (the first reason stays)."""
        self.spared.setdefault(record.id, why)
        return False

    def take(self, record: SessionRecord, rule: RetentionRule) -> bool:
        """Remove ``record`` by ``rule`` unless it is protected; whether it was taken."""
        entries = self.pointing.get(record.id, [])
        keys = {e.session_key for e in entries} | {record.session_key} - {None}
        if record.end_reason == "suspended" or any(e.suspended for e in entries):
            return self.spare(record, "suspended")
        if entries and rule != "max_age" and record.id not in self.expired:
            return self.spare(record, "live")
        if len(entries) > 1:
            return self.spare(record, "shared")
        if any(self.busy(key) for key in keys if key is not None):
            return self.spare(record, "active_work")
        lease = f"compress:{record.id}"
        if not self.backend.acquire_lease(lease, HOLDER, ttl=self.lease_ttl, now=self.now):
            return self.spare(record, "lease")
        self.leased.append(record.id)
        self.doomed[record.id] = rule
        return True

    def drop(self, record: SessionRecord) -> bool | None:
        """Delete a chosen session if it is still as chosen; a key on it is moved off first.

        The key's active work is asked again just before; the rest is checked by the backend in
        the transaction that deletes (:attr:`RotationPlan.drop`): no key points at the session
        (but the one the same plan moves to a new session) and its revision is the one read
        when it was chosen. Returns whether it was deleted, or ``None`` when another pass
        deleted it meanwhile.
        """
        entries = self.pointing.get(record.id, [])
        keys = {e.session_key for e in entries} | {record.session_key} - {None}
        if any(self.busy(key) for key in keys if key is not None):
            return self.spare(record, "active_work")
        if entries and self.backend.get_entry(entries[0].session_key) != entries[0]:
            return self.spare(record, "changed")  # the chat spoke (or moved) since the choice
        try:
            if entries:
                self.lifecycle.retire(entries[0], record, self.now)
            else:
                self.backend.apply(RotationPlan(at=self.now, drop=[(record.id, record.revision)]))
        except ConflictError:  # a resume, a message or a state change got there first
            return self.spare(record, "changed")
        except SessionNotFoundError:
            return None
        return True


@attrs.frozen
class Lifecycle:
    """What a pass needs of the store to judge and move keys: its policies and rotation."""

    rotate: Callable[[RotationPlan, str], object]
    """Applies a plan moving a key off a session (the store's tells its ``on_rotate``)."""
    keys: KeyPolicy = attrs.field(factory=KeyPolicy)
    resets: ResetPolicies = attrs.field(factory=ResetPolicies)

    def policy(self, entry: SessionEntry) -> ResetPolicy:
        """The reset policy of ``entry``'s key."""
        origin = entry.origin
        platform = entry.platform or (origin.platform if origin is not None else "")
        chat_type = entry.chat_type or (origin.chat_type if origin is not None else None)
        return self.resets.for_source(platform, chat_type or "")

    def expired(self, entry: SessionEntry, now: datetime) -> bool:
        """Whether ``entry``'s policy has expired its session: a pure function of both."""
        if entry.pending_reset is not None:
            return False
        return (
            evaluate_reset(self.policy(entry), last_activity=entry.updated_at, now=now) is not None
        )

    def retire(self, entry: SessionEntry, record: SessionRecord, now: datetime) -> None:
        """Move ``entry``'s key to a new, empty session and delete ``record``, in one plan.

        The old session ends ``retention``; the key's next lookup says so
        (``SessionLookup.reset.reason == "retention"``) and uses the new session.
        """
        source = entry.origin or _rotations.source_of(record)
        plan = _rotations.new_session_plan(self.keys, entry, source, now, "retention", title=None)
        (write,) = plan.entries
        flagged = attrs.evolve(write.entry, pending_reset="retention")
        plan = attrs.evolve(
            plan,
            entries=[attrs.evolve(write, entry=flagged)],
            drop=[(record.id, record.revision)],
        )
        self.rotate(plan, entry.session_id)


def enforce(
    backend: Backend,
    policy: RetentionPolicy,
    *,
    now: datetime,
    dry_run: bool,
    busy: Callable[[str], bool] | None = None,
    cutoff: datetime | None = None,
    lease_ttl: timedelta = timedelta(minutes=10),
    lifecycle: Lifecycle | None = None,
) -> RetentionReport:
    """Apply ``policy`` (``cutoff`` overrides ``now - max_age``); see the module docstring.

    ``lifecycle`` gives the store's policies and rotation (default: the default policies, the
    backend's ``apply``).
    """
    records = [item.record for item in backend.list_sessions(SessionQuery(limit=None)).items]
    if lifecycle is None:
        lifecycle = Lifecycle(rotate=lambda plan, _old: backend.apply(plan))
    run = _Pass(
        backend, policy, now=now, busy=busy or _idle, lease_ttl=lease_ttl, lifecycle=lifecycle
    )
    try:
        _choose(run, records, cutoff)
        for record in records:  # measured before anything goes
            if record.id in run.doomed:
                run.weigh(record)
        if not dry_run:
            by_id = {record.id: record for record in records}
            for session_id in list(run.doomed):
                if run.drop(by_id[session_id]) is not True:
                    del run.doomed[session_id]
        removed = tuple(RetentionRemoval(i, rule) for i, rule in run.doomed.items())
        weights = [run.weigh(r) for r in records if r.id in run.doomed]
        remaining = None
        if policy.max_store_bytes is not None:
            remaining = sum(
                run.weigh(r)[1] if r.id not in run.doomed else run.replacement(r) for r in records
            )
    finally:
        for session_id in run.leased:
            backend.release_lease(f"compress:{session_id}", HOLDER)
    return RetentionReport(
        dry_run=dry_run,
        removed=removed,
        messages=sum(w[0] for w in weights),
        bytes=sum(w[1] for w in weights),
        spared=tuple(i for i in run.spared if i not in run.doomed),
        spared_reasons={i: why for i, why in run.spared.items() if i not in run.doomed},
        store_bytes=remaining,
    )


def _choose(run: _Pass, records: list[SessionRecord], cutoff: datetime | None) -> None:
    policy = run.policy
    if cutoff is None and policy.max_age is not None:
        cutoff = run.now - policy.max_age
    if cutoff is not None:
        for record in _oldest_first(records):
            if run.removable(record, "max_age") and run.activity(record) < cutoff:
                run.take(record, "max_age")
    if policy.max_sessions_per_key is not None:
        _per_key(run, records, policy.max_sessions_per_key)
    if policy.max_store_bytes is not None:
        _by_size(run, records, policy.max_store_bytes)


def _per_key(run: _Pass, records: list[SessionRecord], limit: int) -> None:
    by_key: dict[str, list[SessionRecord]] = {}
    for record in records:
        if record.session_key is not None and record.id not in run.doomed:
            by_key.setdefault(record.session_key, []).append(record)
    for group in by_key.values():
        excess = len(group) - limit
        for record in _oldest_first(group):
            if excess <= 0:
                break
            if record.id in run.pointing:  # moving the key off would leave as many sessions
                continue
            if run.removable(record, "max_sessions_per_key") and run.take(
                record, "max_sessions_per_key"
            ):
                excess -= 1


def _by_size(run: _Pass, records: list[SessionRecord], limit: int) -> None:
    total = sum(run.weigh(r)[1] if r.id not in run.doomed else run.replacement(r) for r in records)
    for record in _oldest_first(records):
        if total <= limit:
            break
        if run.removable(record, "max_store_bytes") and run.take(record, "max_store_bytes"):
            total -= run.weigh(record)[1] - run.replacement(record)


def maintain(
    store: SessionStore,
    policy: RetentionPolicy | None,
    *,
    dry_run: bool,
    busy: Callable[[str], bool] | None = None,
) -> RetentionReport:
    """:meth:`SessionStore.maintain`; ``busy`` adds keys under active work to ``active_work``."""
    chosen = policy if policy is not None else store.retention
    if chosen is None:
        raise InvalidArgumentError(
            "maintain() needs a RetentionPolicy: pass one, or open the store with retention=..."
        )
    return enforce(
        store.backend,
        chosen,
        now=store.clock.now(),
        dry_run=dry_run,
        busy=busy_keys(store, busy),
        lease_ttl=store.lease_ttl,
        lifecycle=lifecycle_of(store),
    )


def lifecycle_of(store: SessionStore) -> Lifecycle:
    """The store's policies, and its rotation (which tells its ``on_rotate`` callbacks)."""
    return Lifecycle(
        rotate=lambda plan, old: store._rotate_one(plan, old, "retention"),  # noqa: SLF001
        keys=store.keys,
        resets=store.resets,
    )


def mark_expired(store: SessionStore, page: SessionPage) -> SessionPage:
    """``page`` with each open session its key's policy has expired marked ``expired``."""
    lifecycle, now = lifecycle_of(store), store.clock.now()
    items = []
    for item in page.items:
        if item.record.end_reason is None and item.record.session_key is not None:
            entry = store.backend.get_entry(item.record.session_key)
            if entry is not None and entry.session_id == item.record.id:
                item = attrs.evolve(item, expired=lifecycle.expired(entry, now))  # noqa: PLW2901
        items.append(item)
    return attrs.evolve(page, items=items)


def busy_keys(
    store: SessionStore, busy: Callable[[str], bool] | None
) -> Callable[[str], bool] | None:
    """Keys under active work: the store's ``active_work`` callback, or ``busy``, says so."""
    checks = [c for c in (store.active_work, busy) if c is not None]
    if not checks:
        return None
    return lambda key: any(check(key) for check in checks)
