"""The turn ledger's rules: accept, claim, answer or fail, and the replies' send intents.

``store.ledger`` (a :class:`Ledger`, when the store was made with ``ledger=True``) applies them
on any backend with :class:`~hermes_sessions.protocols.SupportsLedger`; the backend only keeps
rows with compare-and-swap versions, atomically with the messages they speak of. Every change
here is one backend write: accepting stores the message and its row together (a redelivery,
even one arriving while the first delivery is being answered, finds the row: it is a
duplicate); answering stores the replies, the row's new status and an intent per reply to send
together. A lost race surfaces as ``LedgerConflictError`` inside, which is resolved by reading
the row again.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final, cast

import attrs

from hermes_sessions.exceptions import (
    ClaimLostError,
    InvalidArgumentError,
    LedgerConflictError,
    LedgerUnavailableError,
    SessionNotFoundError,
)
from hermes_sessions.ledger import INBOUND, OUTBOUND, Inbound, Outbound, inbound_id, intent_key
from hermes_sessions.models import Message, stamped
from hermes_sessions.protocols import SupportsLedger
from hermes_sessions.store._rotations import SessionLookup

if TYPE_CHECKING:
    from datetime import datetime

    from hermes_sessions.models import SessionSource
    from hermes_sessions.store._session_store import SessionStore
    from hermes_sessions.usage import Usage

__all__ = ["DEFAULT_CLAIM_TTL", "Acceptance", "Answer", "Ledger", "LedgerMode"]

DEFAULT_CLAIM_TTL: Final = timedelta(minutes=2)
"""How long a claim lasts unless the call names its own ``ttl`` (renew it with ``claim``).

.. versionadded:: 0.1.0
"""


@attrs.frozen(kw_only=True)
class Acceptance:
    """What :meth:`Ledger.accept` did with an inbound message.

    .. versionadded:: 0.1.0
    """

    inbound: Inbound | None
    """The message's ledger row: new (``accepted``, held by the caller) unless ``duplicate``.
    ``None`` for a duplicate stored without the ledger (its turn is not tracked)."""
    duplicate: bool
    """A redelivery: the message was accepted before (nothing was stored now)."""
    message: Message | None = None
    """The message as stored (a new acceptance), else the stored copy when it was looked up."""
    lookup: SessionLookup | None = None
    """The session lookup of a new acceptance (``created``, ``reset``, ``state``)."""

    @property
    def in_progress(self) -> bool:
        """A redelivery of a message still being answered: acknowledge it and drop it."""
        return self.duplicate and self.inbound is not None and self.inbound.status == "accepted"

    @property
    def session_id(self) -> str | None:
        """The session the message is stored in."""
        if self.inbound is not None:
            return self.inbound.session_id
        return None if self.message is None else self.message.session_id


@attrs.frozen(kw_only=True)
class Answer:
    """What :meth:`Ledger.answer` stored: the replies and the intent to send each.

    .. versionadded:: 0.1.0
    """

    inbound: Inbound
    replies: tuple[Message, ...]
    intents: tuple[Outbound, ...]
    """One per reply, in order, when the answer was to be sent (``send=True``)."""


def _lease(ttl: timedelta | None) -> timedelta:
    """A claim's time to live: ``ttl`` (zero is a lease that has run out already) or the default."""
    return DEFAULT_CLAIM_TTL if ttl is None else ttl


def _capable(store: SessionStore) -> SupportsLedger:
    backend = store.backend
    if not isinstance(backend, SupportsLedger):
        raise LedgerUnavailableError(
            f"{type(backend).__name__} does not implement SupportsLedger; use a bundled backend"
        )
    return backend


class Ledger:
    """The turn ledger of a store (``store.ledger``): nothing accepted lost, nothing twice.

    Every method is one read and at most one commit (``accept`` also looks the session up, as
    ``get_or_create`` does). ``holder`` names the worker (a process and task name); ``ttl`` is
    how long its claim lasts (:data:`DEFAULT_CLAIM_TTL`), after which another worker may
    :meth:`claim` the message. ``docs/ledger.md`` shows the restart-safe gateway loop.

    .. versionadded:: 0.1.0
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.backend = _capable(store)

    def __repr__(self) -> str:
        return f"<Ledger of {self.store!r}>"

    def _now(self) -> datetime:
        return self.store.clock.now()

    def _prepared(self, message: Message, now: datetime) -> Message:
        return self.store.redact(
            message if message.timestamp is not None else stamped(message, timestamp=now)
        )

    # -- inbound -----------------------------------------------------------------------------------

    def get(self, key: str, platform_message_id: str) -> Inbound | None:
        """The ledger row of a message of lane ``key``, or ``None``."""
        rows = self.backend.ledger_rows(INBOUND, ids=[inbound_id(key, platform_message_id)])
        return Inbound.from_row(rows[0]) if rows else None

    def accept(
        self,
        source: SessionSource,
        message: Message,
        *,
        holder: str,
        ttl: timedelta | None = None,
    ) -> Acceptance:
        """Store an inbound message with its ledger row, or recognise it as a redelivery.

        One commit stores the message in its lane's session (looked up as by
        ``get_or_create``) and records it ``accepted``, held by ``holder`` until ``ttl`` from
        now. A message this lane accepted before — still being answered (``in_progress``),
        answered or failed — is a ``duplicate``: nothing is stored, and the host acknowledges
        the delivery and drops it. Two workers accepting one message at once: one wins.
        """
        pmid = message.platform_message_id
        if not pmid:
            raise InvalidArgumentError(
                "ledger.accept needs the message's platform_message_id (it recognises "
                "redeliveries by it); append messages without one with store.append"
            )
        key = self.store.key_for(source)
        known = self.get(key, pmid)
        if known is not None:
            return Acceptance(inbound=known, duplicate=True)
        lookup = self.store.get_or_create(source, platform_message_id=pmid)
        if lookup.redelivered is not None:  # stored without the ledger (or its row was pruned)
            return Acceptance(inbound=None, duplicate=True, message=lookup.redelivered)
        now = self._now()
        inbound = Inbound(
            session_key=key,
            platform_message_id=pmid,
            session_id=lookup.session_id,
            status="accepted",
            accepted_at=now,
            updated_at=now,
            holder=holder,
            lease_until=now + _lease(ttl),
        )
        row = attrs.evolve(inbound.to_row(), message_index=0)
        try:
            result = self.backend.ledger_write(
                lookup.session_id, [row], messages=[self._prepared(message, now)], touch_at=now
            )
        except LedgerConflictError:  # another worker accepted it first
            return Acceptance(inbound=self.get(key, pmid), duplicate=True)
        if result.duplicate:
            return Acceptance(inbound=self.get(key, pmid), duplicate=True, message=result[0])
        stored = Inbound.from_row(row.written(result[0].id))
        return Acceptance(inbound=stored, duplicate=False, message=result[0], lookup=lookup)

    def claim(
        self,
        key: str,
        platform_message_id: str,
        *,
        holder: str,
        ttl: timedelta | None = None,
    ) -> Inbound | None:
        """Take over (or renew) an accepted message; ``None`` if it is not ours to take.

        It is ours when ``holder`` holds it already or its holder's lease has run out (the
        holder died). Answered and failed messages, and those another holder still holds, give
        ``None``; so does a race lost to another claimer.
        """
        current = self.get(key, platform_message_id)
        now = self._now()
        if current is None or current.status != "accepted":
            return None
        if current.holder != holder and current.held(now):
            return None
        claimed = attrs.evolve(
            current, holder=holder, lease_until=now + _lease(ttl), updated_at=now
        )
        try:
            self.backend.ledger_write(current.session_id, [claimed.to_row()])
        except LedgerConflictError:
            return None
        return attrs.evolve(claimed, version=current.version + 1)

    def _held(self, key: str, platform_message_id: str, holder: str) -> Inbound:
        current = self.get(key, platform_message_id)
        if current is None or current.status != "accepted" or current.holder != holder:
            raise _claim_lost(key, platform_message_id, holder, current)
        return current

    def _lost(self, key: str, platform_message_id: str, holder: str) -> ClaimLostError:
        return _claim_lost(key, platform_message_id, holder, self.get(key, platform_message_id))

    def answer(
        self,
        key: str,
        platform_message_id: str,
        *replies: Message,
        holder: str,
        usage: Usage | None = None,
        send: bool = True,
        ttl: timedelta | None = None,
    ) -> Answer:
        """Store the replies, mark the message ``answered``, record an intent per reply; one commit.

        ``holder`` must hold the message (else :class:`ClaimLostError`, nothing written): a
        worker whose claim was taken over never answers twice. With ``send`` each reply gets a
        ``pending`` :class:`Outbound` under a stable idempotency key, held by ``holder`` for
        ``ttl``: send it, then :meth:`mark_sent` (or :meth:`mark_failed`).
        """
        current = self._held(key, platform_message_id, holder)
        now = self._now()
        answered = attrs.evolve(
            current, status="answered", holder=None, lease_until=None, updated_at=now
        )
        lease = now + _lease(ttl)
        intents = [
            Outbound(
                idempotency_key=intent_key(key, platform_message_id, index),
                session_key=key,
                session_id=current.session_id,
                status="pending",
                created_at=now,
                updated_at=now,
                inbound=platform_message_id,
                holder=holder,
                lease_until=lease,
            )
            for index in range(len(replies) if send else 0)
        ]
        rows = [
            answered.to_row(),
            *(attrs.evolve(i.to_row(), message_index=n) for n, i in enumerate(intents)),
        ]
        try:
            result = self.backend.ledger_write(
                current.session_id,
                rows,
                messages=[self._prepared(reply, now) for reply in replies],
                touch_at=now,
                usage=usage,
            )
        except LedgerConflictError:
            raise self._lost(key, platform_message_id, holder) from None
        written = [Outbound.from_row(row.written(result[n].id)) for n, row in enumerate(rows[1:])]
        return Answer(
            inbound=attrs.evolve(answered, version=current.version + 1),
            replies=tuple(result),
            intents=tuple(written),
        )

    def fail(self, key: str, platform_message_id: str, *, holder: str, reason: str) -> Inbound:
        """Mark a held message ``failed`` with ``reason`` (it leaves ``pending``); one commit."""
        current = self._held(key, platform_message_id, holder)
        failed = attrs.evolve(
            current,
            status="failed",
            holder=None,
            lease_until=None,
            reason=reason,
            updated_at=self._now(),
        )
        try:
            self.backend.ledger_write(current.session_id, [failed.to_row()])
        except LedgerConflictError:
            raise self._lost(key, platform_message_id, holder) from None
        return attrs.evolve(failed, version=current.version + 1)

    def pending(self, *, key: str | None = None) -> list[Inbound]:
        """Accepted messages not answered or failed yet (oldest change first).

        After a restart these are the turns to finish: :meth:`claim` each whose holder's lease
        has run out (``not inbound.held(now)``), then answer it.
        """
        rows = self.backend.ledger_rows(INBOUND, status="accepted", session_key=key)
        return [Inbound.from_row(row) for row in rows]

    # -- outbound ----------------------------------------------------------------------------------

    def intent(self, idempotency_key: str) -> Outbound | None:
        """The send intent of this key, or ``None``."""
        rows = self.backend.ledger_rows(OUTBOUND, ids=[idempotency_key])
        return Outbound.from_row(rows[0]) if rows else None

    def intents(self, *, key: str | None = None, status: str | None = None) -> list[Outbound]:
        """Send intents (of lane ``key``, in ``status``), oldest change first."""
        rows = self.backend.ledger_rows(OUTBOUND, status=status, session_key=key)
        return [Outbound.from_row(row) for row in rows]

    def unknown(self, *, key: str | None = None) -> list[Outbound]:
        """Intents left between send and mark: pending, with no live holder.

        Reconcile each with the platform (look for a message carrying its idempotency key),
        then :meth:`mark_sent`, or :meth:`retry` and send again under the same key.
        """
        now = self._now()
        return [i for i in self.intents(key=key, status="pending") if i.unknown_after_send(now)]

    def reply(self, intent: Outbound) -> Message:
        """The stored reply an intent sends (``SessionNotFoundError`` if it was deleted)."""
        found = None
        if intent.message_id is not None:
            found = self.store.backend.get_message(intent.session_id, intent.message_id)
        if found is None:
            raise SessionNotFoundError(
                session_id=intent.session_id,
                hint=f"the reply of send intent {intent.idempotency_key!r} is gone with it",
            )
        return found

    def _change(self, current: Outbound, changed: Outbound) -> Outbound | None:
        try:
            self.backend.ledger_write(current.session_id, [changed.to_row()])
        except LedgerConflictError:
            return None
        return attrs.evolve(changed, version=current.version + 1)

    def _intent(self, idempotency_key: str) -> Outbound:
        current = self.intent(idempotency_key)
        if current is None:
            raise InvalidArgumentError(
                f"no send intent {idempotency_key!r}: it is made by ledger.answer (or its "
                "session was deleted)"
            )
        return current

    def retry(
        self, idempotency_key: str, *, holder: str, ttl: timedelta | None = None
    ) -> Outbound | None:
        """Hold an unsent intent to send it (again) under the same key; ``None``: do not send.

        ``None`` when it was sent already or another holder's lease on it still runs. The
        returned intent counts the attempt (``attempts``).
        """
        current = self._intent(idempotency_key)
        now = self._now()
        live = current.lease_until is not None and now < current.lease_until
        if current.status == "sent" or (current.holder != holder and live):
            return None
        changed = attrs.evolve(
            current,
            status="pending",
            holder=holder,
            lease_until=now + _lease(ttl),
            attempts=current.attempts + 1,
            reason=None,
            updated_at=now,
        )
        return self._change(current, changed)

    def mark_sent(self, idempotency_key: str, platform_message_id: str | None = None) -> Outbound:
        """Record that the platform accepted the reply (with the id it gave, if any)."""
        return self._finish(
            idempotency_key, status="sent", sent_id=platform_message_id, reason=None
        )

    def mark_failed(self, idempotency_key: str, reason: str) -> Outbound:
        """Record that sending failed for good (a sent intent stays sent)."""
        return self._finish(idempotency_key, status="failed", reason=reason)

    def _finish(self, idempotency_key: str, **changes: Any) -> Outbound:
        """End an intent with ``changes`` (releasing its holder); a sent intent stays sent."""
        for _ in range(_ATTEMPTS):
            current = self._intent(idempotency_key)
            if current.status == "sent":
                return current
            changed = attrs.evolve(
                current, holder=None, lease_until=None, updated_at=self._now(), **changes
            )
            done = self._change(current, changed)
            if done is not None:
                return done
        return self._intent(idempotency_key)


def _claim_lost(
    key: str, platform_message_id: str, holder: str, current: Inbound | None
) -> ClaimLostError:
    return ClaimLostError(
        key,
        platform_message_id,
        holder=holder,
        current_holder=None if current is None else current.holder,
        status=None if current is None else current.status,
    )


class LedgerMode:
    """What ``ledger=True`` gives :class:`~hermes_sessions.store.SessionStore`: ``store.ledger``."""

    __slots__ = ()
    ledger_on: bool

    @property
    def ledger(self) -> Ledger:
        """The turn ledger (:class:`Ledger`) of a store made with ``ledger=True``.

        Without the turn ledger a turn is one commit, as it always was. ``LedgerUnavailableError``
        when the store was made without it, or when the backend does not implement
        :class:`~hermes_sessions.protocols.SupportsLedger`.
        """
        if not self.ledger_on:
            raise LedgerUnavailableError(
                "the store was opened without it; pass ledger=True to SessionStore (or open)"
            )
        return Ledger(cast("SessionStore", self))


_ATTEMPTS: Final = 8
"""How often a mark re-reads an intent that changed under it before returning what it finds."""
