"""The turn ledger on an encrypted store (``SupportsLedger`` of an inner backend that has it).

A row's id is a keyed hash of it; its ``data``, with the id, is one envelope sealed for that
id (under its session's user's key, with per-user keys). The lane, session id, status and time
of a row stay in the clear, as keys, ids and times do everywhere in an encrypted store; what a
row says (its platform ids, holder, reason) does not. Messages written with rows are sealed as
by ``append_messages``; the id of the message a row binds stays beside the envelope (message
ids are in the clear anyway).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import attrs

from hermes_sessions.backends.encrypted._codec import SEALED
from hermes_sessions.backends.rules import check_ledger_write, ledger_order, session_scope
from hermes_sessions.protocols import SupportsLedger
from hermes_sessions.results import AppendResult
from hermes_sessions.serde import compact_json

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from hermes_sessions.backends.encrypted._backend import EncryptedBackend
    from hermes_sessions.ledger import LedgerKind, LedgerRow
    from hermes_sessions.models import Message
    from hermes_sessions.usage import Usage

__all__ = ["ledger_rows", "ledger_write", "open_row", "seal_row"]


def _inner(backend: EncryptedBackend) -> SupportsLedger:
    inner = backend.inner
    assert isinstance(inner, SupportsLedger)  # noqa: S101  # the class is chosen by it
    return inner


def _stored_id(backend: EncryptedBackend, row_id: str) -> str:
    return "b:" + backend.cipher.blind(row_id, "ledger")


def seal_row(backend: EncryptedBackend, row: LedgerRow) -> LedgerRow:
    """The stored form of a row: its id hashed, its ``data`` (with the id) one envelope."""
    stored_id = _stored_id(backend, row.id)
    owner = backend.scope_owner(session_scope(row.session_id))
    plain = compact_json({"id": row.id, "data": row.data})
    envelope = backend.codec.seal(plain, "ledger", stored_id, "data", owner)
    return attrs.evolve(row, id=stored_id, data={SEALED: envelope})


def open_row(backend: EncryptedBackend, row: LedgerRow) -> LedgerRow:
    """A stored row, opened: its own id and ``data`` back (the bound message id kept)."""
    opened = json.loads(backend.codec.open(row.data.get(SEALED), "ledger", row.id, "data"))
    data = opened["data"]
    if "message_id" in row.data:  # bound by the inner backend beside the envelope
        data["message_id"] = row.data["message_id"]
    return attrs.evolve(row, id=opened["id"], data=data)


def ledger_rows(
    backend: EncryptedBackend,
    kind: LedgerKind,
    *,
    ids: Sequence[str] | None = None,
    status: str | None = None,
    session_key: str | None = None,
) -> list[LedgerRow]:
    """The inner backend's rows, opened (looked up by the keyed hashes of ``ids``)."""
    blinded = None if ids is None else [_stored_id(backend, row_id) for row_id in ids]
    found = _inner(backend).ledger_rows(kind, ids=blinded, status=status, session_key=session_key)
    return ledger_order(open_row(backend, row) for row in found)


def ledger_write(
    backend: EncryptedBackend,
    session_id: str,
    rows: Sequence[LedgerRow],
    *,
    messages: Sequence[Message] = (),
    touch_at: datetime | None = None,
    usage: Usage | None = None,
) -> AppendResult:
    """The inner backend's write of sealed rows and messages; the messages come back opened."""
    check_ledger_write(session_id, rows, len(messages))
    result = _inner(backend).ledger_write(
        session_id,
        [seal_row(backend, row) for row in rows],
        messages=backend._seal_messages(messages, session_id),  # noqa: SLF001  # the wrapper's
        touch_at=touch_at,
        usage=usage,
    )
    opening = backend._open_messages  # noqa: SLF001  # the wrapper's own
    return AppendResult(
        opening(result.messages, session_id),
        duplicate=result.duplicate,
        existing=opening(result.existing, session_id),
        revision=result.revision,
    )
