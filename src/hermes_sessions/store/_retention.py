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
from datetime import timedelta
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

import attrs

from hermes_sessions import serde
from hermes_sessions.exceptions import ConflictError, InvalidArgumentError, SessionNotFoundError
from hermes_sessions.protocols import RotationPlan
from hermes_sessions.queries import SessionQuery

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from datetime import datetime

    from hermes_sessions.models import Message, SessionRecord
    from hermes_sessions.protocols import Backend
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
    """The state of one pass: what it chose, what it spared, the leases it holds."""

    def __init__(
        self,
        backend: Backend,
        policy: RetentionPolicy,
        *,
        now: datetime,
        busy: Callable[[str], bool],
        pointed: set[str],
        lease_ttl: timedelta,
    ) -> None:
        self.backend = backend
        self.policy = policy
        self.now = now
        self.busy = busy
        self.pointed = pointed
        self.lease_ttl = lease_ttl
        self.doomed: dict[str, RetentionRule] = {}
        self.spared: dict[str, None] = {}
        self.leased: list[str] = []
        self.weights: dict[str, tuple[int, int]] = {}

    def weigh(self, record: SessionRecord) -> tuple[int, int]:
        """``(messages, bytes)`` of a session, measured once."""
        if record.id not in self.weights:
            transcript = self.backend.get_messages(record.id, include_inactive=True)
            size = sum(_size(m) for m in transcript) + _size(record)
            self.weights[record.id] = (len(transcript), size)
        return self.weights[record.id]

    def removable(self, record: SessionRecord) -> bool:
        """Whether a rule may weigh ``record``: ended, not chosen yet, of the policy's sources."""
        sources = self.policy.sources
        return (
            record.ended_at is not None
            and record.id not in self.doomed
            and (sources is None or record.source in sources)
        )

    def take(self, record: SessionRecord, rule: RetentionRule) -> bool:
        """Remove ``record`` by ``rule`` unless it is protected; whether it was taken."""
        if (
            record.id in self.pointed
            or record.end_reason == "suspended"
            or (record.session_key is not None and self.busy(record.session_key))
            or not self.backend.acquire_lease(
                f"compress:{record.id}", HOLDER, ttl=self.lease_ttl, now=self.now
            )
        ):
            self.spared[record.id] = None
            return False
        self.leased.append(record.id)
        self.doomed[record.id] = rule
        return True

    def drop(self, record: SessionRecord) -> bool | None:
        """Delete a chosen session if it is still unreferenced and unchanged.

        The key's active work is asked again just before; the rest is checked by the backend in
        the transaction that deletes (:attr:`RotationPlan.drop`): no key points at the session
        and its revision is the one read when it was chosen. Returns whether it was deleted,
        or ``None`` when another pass deleted it meanwhile.
        """
        if record.session_key is not None and self.busy(record.session_key):
            return False
        try:
            self.backend.apply(RotationPlan(at=self.now, drop=[(record.id, record.revision)]))
        except ConflictError:  # a resume, a message or a state change got there first
            return False
        except SessionNotFoundError:
            return None
        return True


def enforce(
    backend: Backend,
    policy: RetentionPolicy,
    *,
    now: datetime,
    dry_run: bool,
    busy: Callable[[str], bool] | None = None,
    cutoff: datetime | None = None,
    lease_ttl: timedelta = timedelta(minutes=10),
) -> RetentionReport:
    """Apply ``policy`` (``cutoff`` overrides ``now - max_age``); see the module docstring."""
    records = [item.record for item in backend.list_sessions(SessionQuery(limit=None)).items]
    pointed = {e.session_id for e in backend.entries()}
    run = _Pass(backend, policy, now=now, busy=busy or _idle, pointed=pointed, lease_ttl=lease_ttl)
    try:
        _choose(run, records, cutoff)
        for record in records:  # measured before anything goes
            if record.id in run.doomed:
                run.weigh(record)
        if not dry_run:
            by_id = {record.id: record for record in records}
            for session_id in list(run.doomed):
                gone = run.drop(by_id[session_id])
                if gone is not True:
                    del run.doomed[session_id]
                    if gone is False:
                        run.spared[session_id] = None
        removed = tuple(RetentionRemoval(i, rule) for i, rule in run.doomed.items())
        weights = [run.weigh(r) for r in records if r.id in run.doomed]
        remaining = None
        if policy.max_store_bytes is not None:
            remaining = sum(run.weigh(r)[1] for r in records if r.id not in run.doomed)
    finally:
        for session_id in run.leased:
            backend.release_lease(f"compress:{session_id}", HOLDER)
    return RetentionReport(
        dry_run=dry_run,
        removed=removed,
        messages=sum(w[0] for w in weights),
        bytes=sum(w[1] for w in weights),
        spared=tuple(i for i in run.spared if i not in run.doomed),
        store_bytes=remaining,
    )


def _choose(run: _Pass, records: list[SessionRecord], cutoff: datetime | None) -> None:
    policy = run.policy
    if cutoff is None and policy.max_age is not None:
        cutoff = run.now - policy.max_age
    if cutoff is not None:
        for record in _oldest_first(records):
            if run.removable(record) and record.last_active < cutoff:
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
            if run.removable(record) and run.take(record, "max_sessions_per_key"):
                excess -= 1


def _by_size(run: _Pass, records: list[SessionRecord], limit: int) -> None:
    total = sum(run.weigh(r)[1] for r in records if r.id not in run.doomed)
    for record in _oldest_first(records):
        if total <= limit:
            break
        if run.removable(record) and run.take(record, "max_store_bytes"):
            total -= run.weigh(record)[1]


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
    )


def busy_keys(
    store: SessionStore, busy: Callable[[str], bool] | None
) -> Callable[[str], bool] | None:
    """Keys under active work: the store's ``active_work`` callback, or ``busy``, says so."""
    checks = [c for c in (store.active_work, busy) if c is not None]
    if not checks:
        return None
    return lambda key: any(check(key) for check in checks)
