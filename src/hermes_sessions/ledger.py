"""The turn ledger's values: what a gateway accepted, who answers it, which replies went out.

The ledger is opt-in (``SessionStore(..., ledger=True)``, ``docs/ledger.md``). It keeps two
kinds of rows beside the transcript:

* an :class:`Inbound` per accepted message, keyed by its lane (session key) and platform
  message id: ``accepted`` (held by a *holder* until ``lease_until``), then ``answered`` (the
  reply stored in the same commit) or ``failed`` (with a reason);
* an :class:`Outbound` per reply to send, keyed by a stable idempotency key: ``pending`` from
  the commit that stored the reply, then ``sent`` (with the platform's message id) or
  ``failed``. A pending intent whose holder's lease ran out is *unknown after send*: the
  process died between the platform call and the mark, so the host reconciles it.

A backend stores rows as :class:`LedgerRow` values (opaque ``data``, compare-and-swap on
``version``) through :class:`SupportsLedger` (also in ``hermes_sessions.protocols``); the
rules of the statuses live in the store (``hermes_sessions.store._ledger``), written once.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, runtime_checkable

import attrs

from hermes_sessions.clock import require_aware
from hermes_sessions.exceptions import CorruptRecordError, InvalidArgumentError
from hermes_sessions.serde import dump_datetime, load_datetime

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hermes_sessions.models import Message
    from hermes_sessions.results import AppendResult
    from hermes_sessions.usage import Usage

__all__ = [
    "INBOUND",
    "OUTBOUND",
    "Inbound",
    "InboundStatus",
    "LedgerKind",
    "LedgerRow",
    "Outbound",
    "OutboundStatus",
    "SupportsLedger",
    "inbound_id",
    "intent_key",
]

LedgerKind = Literal["inbound", "outbound"]
"""The two kinds of ledger rows.

.. versionadded:: 0.1.0
"""
InboundStatus = Literal["accepted", "answered", "failed"]
"""Where an accepted message stands.

.. versionadded:: 0.1.0
"""
OutboundStatus = Literal["pending", "sent", "failed"]
"""Where a reply to send stands (a pending one past its lease is *unknown after send*).

.. versionadded:: 0.1.0
"""
INBOUND: Final = "inbound"
OUTBOUND: Final = "outbound"
_KINDS: Final = frozenset({INBOUND, OUTBOUND})


def _aware(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    require_aware(value, attribute.name)


def _optional_aware(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        _aware(instance, attribute, value)


def _kind(_instance: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in _KINDS:
        raise InvalidArgumentError(f"a ledger row's kind is 'inbound' or 'outbound', not {value!r}")


def _non_negative(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(f"LedgerRow.{attribute.name} must be an int >= 0, got {value!r}")


def _data(value: Any) -> dict[str, Any]:
    return dict(value)


@attrs.frozen(kw_only=True)
class LedgerRow:
    """One ledger row as a backend stores it (:class:`SupportsLedger`).

    ``kind``, ``id``, ``session_id``, ``session_key``, ``status`` and ``updated_at`` are the
    columns a backend lists by; ``data`` is a JSON object the backend keeps as it is (the
    encrypted wrapper seals it). ``version`` is the stored version when read; in a write it is
    the version the writer read (``0``: the row must not exist yet), and the row is stored with
    ``version + 1``. ``message_index`` (writes only) asks the backend to record, as
    ``data["message_id"]``, the id the write's message at that index was stored under.

    .. versionadded:: 0.1.0
    """

    kind: LedgerKind = attrs.field(validator=_kind)
    id: str = attrs.field(validator=attrs.validators.instance_of(str))
    session_id: str
    session_key: str
    status: str
    updated_at: datetime = attrs.field(validator=_aware)
    data: dict[str, Any] = attrs.field(factory=dict, converter=_data)
    version: int = attrs.field(default=0, validator=_non_negative)
    message_index: int | None = None

    def written(self, message_id: int | None = None) -> LedgerRow:
        """The row as a write stores it: the next version, the bound message id if any."""
        data = self.data if message_id is None else {**self.data, "message_id": message_id}
        return attrs.evolve(self, data=data, version=self.version + 1, message_index=None)


def inbound_id(session_key: str, platform_message_id: str) -> str:
    """The row id of an inbound message: its lane and platform id, unambiguously joined.

    .. versionadded:: 0.1.0
    """
    return f"{len(session_key)}:{session_key}:{platform_message_id}"


def intent_key(session_key: str, platform_message_id: str, index: int) -> str:
    """The idempotency key of the ``index``-th reply to a message: stable across retries.

    .. versionadded:: 0.1.0
    """
    digest = hashlib.sha256(f"{inbound_id(session_key, platform_message_id)}#{index}".encode())
    return f"hs-{digest.hexdigest()[:32]}"


def _time(value: datetime | None) -> str | None:
    return None if value is None else dump_datetime(value)


def _load(data: dict[str, Any], name: str) -> datetime | None:
    value = data.get(name)
    return None if value is None else load_datetime(value)


def _required(data: dict[str, Any], name: str, row: LedgerRow) -> Any:
    if data.get(name) is None:
        raise CorruptRecordError(f"ledger row {row.id!r} lacks {name!r}")
    return data[name]


def _status(row: LedgerRow, allowed: tuple[str, ...]) -> Any:
    if row.status not in allowed:
        raise CorruptRecordError(f"ledger row {row.id!r} has status {row.status!r}")
    return row.status


@attrs.frozen(kw_only=True)
class Inbound:
    """An accepted inbound message and where its turn stands.

    .. versionadded:: 0.1.0
    """

    session_key: str
    platform_message_id: str
    session_id: str
    """The session the message was stored in (its reply goes there too)."""
    status: InboundStatus
    accepted_at: datetime = attrs.field(validator=_aware)
    updated_at: datetime = attrs.field(validator=_aware)
    message_id: int | None = None
    """The stored message's id in ``session_id``."""
    holder: str | None = None
    """Who answers it (a worker's name); ``None`` once it is answered or failed."""
    lease_until: datetime | None = attrs.field(default=None, validator=_optional_aware)
    """Until when ``holder`` holds it; after that another worker may take it over."""
    reason: str | None = None
    """Why it failed."""
    version: int = 0

    def age(self, now: datetime) -> timedelta:
        """How long ago it was accepted."""
        return now - self.accepted_at

    def held(self, now: datetime) -> bool:
        """Whether a holder's lease on it is still running."""
        return self.status == "accepted" and self.lease_until is not None and now < self.lease_until

    def to_row(self) -> LedgerRow:
        """The backend's row of this value."""
        data = {
            "platform_message_id": self.platform_message_id,
            "accepted_at": _time(self.accepted_at),
            "message_id": self.message_id,
            "holder": self.holder,
            "lease_until": _time(self.lease_until),
            "reason": self.reason,
        }
        return LedgerRow(
            kind=INBOUND,
            id=inbound_id(self.session_key, self.platform_message_id),
            session_id=self.session_id,
            session_key=self.session_key,
            status=self.status,
            updated_at=self.updated_at,
            data={name: value for name, value in data.items() if value is not None},
            version=self.version,
        )

    @classmethod
    def from_row(cls, row: LedgerRow) -> Inbound:
        """The value of a stored row (``CorruptRecordError`` for a damaged one)."""
        data = row.data
        return cls(
            session_key=row.session_key,
            platform_message_id=_required(data, "platform_message_id", row),
            session_id=row.session_id,
            status=_status(row, ("accepted", "answered", "failed")),
            accepted_at=load_datetime(_required(data, "accepted_at", row)),
            updated_at=row.updated_at,
            message_id=data.get("message_id"),
            holder=data.get("holder"),
            lease_until=_load(data, "lease_until"),
            reason=data.get("reason"),
            version=row.version,
        )


@attrs.frozen(kw_only=True)
class Outbound:
    """A reply to send, recorded before the platform call under a stable idempotency key.

    .. versionadded:: 0.1.0
    """

    idempotency_key: str
    session_key: str
    session_id: str
    status: OutboundStatus
    created_at: datetime = attrs.field(validator=_aware)
    updated_at: datetime = attrs.field(validator=_aware)
    message_id: int | None = None
    """The stored reply's id in ``session_id`` (what to send)."""
    inbound: str | None = None
    """The platform id of the message it answers."""
    holder: str | None = None
    lease_until: datetime | None = attrs.field(default=None, validator=_optional_aware)
    """Until when ``holder`` is sending it; a pending intent past it is unknown after send."""
    sent_id: str | None = None
    """The platform's id of the sent message."""
    reason: str | None = None
    attempts: int = 1
    version: int = 0

    def unknown_after_send(self, now: datetime) -> bool:
        """Pending with no live holder: it may or may not have reached the platform."""
        return self.status == "pending" and (self.lease_until is None or now >= self.lease_until)

    def to_row(self) -> LedgerRow:
        """The backend's row of this value."""
        data = {
            "created_at": _time(self.created_at),
            "message_id": self.message_id,
            "inbound": self.inbound,
            "holder": self.holder,
            "lease_until": _time(self.lease_until),
            "sent_id": self.sent_id,
            "reason": self.reason,
            "attempts": self.attempts,
        }
        return LedgerRow(
            kind=OUTBOUND,
            id=self.idempotency_key,
            session_id=self.session_id,
            session_key=self.session_key,
            status=self.status,
            updated_at=self.updated_at,
            data={name: value for name, value in data.items() if value is not None},
            version=self.version,
        )

    @classmethod
    def from_row(cls, row: LedgerRow) -> Outbound:
        """The value of a stored row (``CorruptRecordError`` for a damaged one)."""
        data = row.data
        return cls(
            idempotency_key=row.id,
            session_key=row.session_key,
            session_id=row.session_id,
            status=_status(row, ("pending", "sent", "failed")),
            created_at=load_datetime(_required(data, "created_at", row)),
            updated_at=row.updated_at,
            message_id=data.get("message_id"),
            inbound=data.get("inbound"),
            holder=data.get("holder"),
            lease_until=_load(data, "lease_until"),
            sent_id=data.get("sent_id"),
            reason=data.get("reason"),
            attempts=data.get("attempts", 1),
            version=row.version,
        )


@runtime_checkable
class SupportsLedger(Protocol):
    """Optional ability: store the turn ledger's rows (``hermes_sessions.ledger``, opt-in).

    A row is a :class:`~hermes_sessions.ledger.LedgerRow`: ``(kind, id)`` names it, ``data`` is
    an opaque JSON object, ``version`` guards it (compare-and-swap). The store keeps the rules
    of the statuses; a backend keeps rows, atomically with the messages they speak of. Rows go
    with their session: ``delete_session`` deletes every row whose ``session_id`` it is. The
    store checks for it with ``isinstance(backend, SupportsLedger)``.

    .. versionadded:: 0.1.0
    """

    def ledger_rows(
        self,
        kind: LedgerKind,
        *,
        ids: Sequence[str] | None = None,
        status: str | None = None,
        session_key: str | None = None,
    ) -> list[LedgerRow]:
        """Return the stored rows of ``kind`` matching every filter given, by ``(updated_at, id)``.

        ``ids`` keeps the rows of those ids (unknown ids are left out).
        """
        ...

    def ledger_write(
        self,
        session_id: str,
        rows: Sequence[LedgerRow],
        *,
        messages: Sequence[Message] = (),
        touch_at: datetime | None = None,
        usage: Usage | None = None,
    ) -> AppendResult:
        """Append ``messages`` and write ``rows`` in one transaction; return the append's result.

        The messages go in as ``append_messages`` with ``touch_at`` and ``usage`` appends them.
        A redelivery is recognised first: then nothing is written (no row either) and the
        result is ``duplicate``. Then every row's ``version`` must be the stored one (``0``: no
        row of that kind and id), else :class:`~hermes_sessions.exceptions.LedgerConflictError`
        and nothing is written. Each row is stored as :meth:`LedgerRow.written` gives it:
        ``version + 1``, and with ``message_index`` set, ``data["message_id"]`` the id of
        ``messages[message_index]`` as stored. Every row must belong to ``session_id``
        (``InvalidArgumentError``); an unknown session raises ``SessionNotFoundError``.
        """
        ...
