"""The JSONL backend's turn ledger (``SupportsLedger``): rows kept as reserved state scopes.

A row is the scope ``ledger|<kind>|<id>`` whose value holds its columns and ``data``, so it
rides on the journal records that already carry state: with the ``write`` record announcing the
messages it speaks of (applied exactly when they all arrived), or alone as a ``state`` record.
Compaction and repair keep them like any scope; deleting a session drops its rows
(``_cache.apply`` and ``_repair``). ``state_scopes`` leaves them out: they are not state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import attrs

from hermes_sessions.backends.jsonl._journal import StateChange
from hermes_sessions.backends.jsonl._session_records import MessageLine, Update
from hermes_sessions.backends.jsonl._state import session_file
from hermes_sessions.backends.rules import (
    check_ledger_versions,
    check_ledger_write,
    check_message_sizes,
    ledger_order,
    ledger_row_matches,
    written_ledger_rows,
)
from hermes_sessions.exceptions import CorruptRecordError, HermesSessionsError, StorageError
from hermes_sessions.ids import validate_session_id
from hermes_sessions.ledger import LedgerRow
from hermes_sessions.serde import dump_datetime, load_datetime

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import datetime

    from hermes_sessions.backends.jsonl._backend import JSONLBackend
    from hermes_sessions.backends.jsonl._cache import State
    from hermes_sessions.backends.jsonl._engine import DirectoryEngine
    from hermes_sessions.ledger import LedgerKind
    from hermes_sessions.models import JSONObject, Message
    from hermes_sessions.results import AppendResult
    from hermes_sessions.usage import Usage

__all__ = [
    "PREFIX",
    "is_ledger_scope",
    "ledger_rows",
    "ledger_write",
    "rows_of_session",
    "select",
    "store",
]

PREFIX: Final = "ledger|"
"""The reserved scope-id prefix of ledger rows (no ``StateScope`` kind starts so)."""


def is_ledger_scope(scope_id: str) -> bool:
    """Whether a scope id is a ledger row's."""
    return scope_id.startswith(PREFIX)


def _scope(kind: str, row_id: str) -> str:
    return f"{PREFIX}{kind}|{row_id}"


def _value(row: LedgerRow) -> JSONObject:
    return {
        "kind": row.kind,
        "id": row.id,
        "session_id": row.session_id,
        "session_key": row.session_key,
        "status": row.status,
        "updated_at": dump_datetime(row.updated_at),
        "data": row.data,
        "version": row.version,
    }


def _row(scope_id: str, value: Mapping[str, Any]) -> LedgerRow:
    try:
        return LedgerRow(
            kind=value["kind"],
            id=value["id"],
            session_id=value["session_id"],
            session_key=value["session_key"],
            status=value["status"],
            updated_at=load_datetime(value["updated_at"]),
            data=value["data"],
            version=value["version"],
        )
    except (KeyError, TypeError, ValueError) as error:
        raise CorruptRecordError(f"ledger row {scope_id!r}: {error}") from error


def select(
    state: State,
    kind: str,
    ids: Sequence[str] | None,
    status: str | None,
    session_key: str | None,
) -> list[LedgerRow]:
    """The rows of ``kind`` passing the filters, by ``(updated_at, id)`` (copies)."""
    scopes = state.scopes
    if ids is not None:
        places = [_scope(kind, row_id) for row_id in dict.fromkeys(ids)]
        found = [_row(place, scopes[place]) for place in places if place in scopes]
    else:
        found = [_row(s, v) for s, v in scopes.items() if s.startswith(f"{PREFIX}{kind}|")]
    return ledger_order(r for r in found if ledger_row_matches(r, kind, None, status, session_key))


def rows_of_session(scopes: Mapping[str, JSONObject], session_id: str) -> list[str]:
    """The scope ids of ``session_id``'s rows (dropped with the session)."""
    return [
        scope_id
        for scope_id, value in scopes.items()
        if scope_id.startswith(PREFIX) and value.get("session_id") == session_id
    ]


def store(
    engine: DirectoryEngine,
    session_id: str,
    written: Sequence[LedgerRow],
    messages: Sequence[Message],
    *,
    touch_at: datetime | None,
    usage: Usage | None,
) -> AppendResult:
    """``ledger_write`` with the directory lock held: one journal record, all or nothing."""
    state = engine.state
    session_file(state, session_id)  # SessionNotFoundError for an unknown session
    transcript = state.transcript(session_id)
    plan = transcript.prepare(messages)
    if plan.result.duplicate:
        return plan.result
    scopes = state.scopes
    stored = {
        (row.kind, row.id): scopes[place]["version"]
        for row in written
        if (place := _scope(row.kind, row.id)) in scopes
    }
    check_ledger_versions(written, stored)
    values = {_scope(r.kind, r.id): _value(r) for r in written_ledger_rows(written, plan.result)}
    tx = engine.next_tx
    lines: list[MessageLine | Update] = [MessageLine(tx, m) for m in plan.new]
    if lines:
        if usage is not None and (usage.values() or usage.increments()):
            lines.append(Update(tx, usage.values(), usage.increments()))
        engine.write(session_id, lines, touch=touch_at, state=values)
    elif values:
        engine.log(StateChange(tx, values))
    stored_transcript = engine.state.transcript(session_id)
    return attrs.evolve(
        plan.result,
        messages=[stored_transcript.messages[m.id or 0] for m in plan.result],
        revision=stored_transcript.record.revision,
    )


def ledger_rows(
    backend: JSONLBackend,
    kind: LedgerKind,
    *,
    ids: Sequence[str] | None = None,
    status: str | None = None,
    session_key: str | None = None,
) -> list[LedgerRow]:
    """``JSONLBackend.ledger_rows``: the rows of ``kind`` passing the filters."""
    try:
        with backend._engine.reading() as state:  # noqa: SLF001  # the backend's own engine
            return select(state, kind, ids, status, session_key)
    except HermesSessionsError:
        raise
    except OSError as error:
        raise StorageError(f"JSONL backend: {error}") from error


def ledger_write(
    backend: JSONLBackend,
    session_id: str,
    rows: Sequence[LedgerRow],
    *,
    messages: Sequence[Message] = (),
    touch_at: datetime | None = None,
    usage: Usage | None = None,
) -> AppendResult:
    """``JSONLBackend.ledger_write``: the messages and rows as one journal record."""
    validate_session_id(session_id)
    check_message_sizes(messages, backend.max_message_bytes)
    check_ledger_write(session_id, rows, len(messages))
    engine = backend._engine  # noqa: SLF001  # the backend's own engine
    try:
        with engine.writing():
            return store(engine, session_id, rows, messages, touch_at=touch_at, usage=usage)
    except HermesSessionsError:
        raise
    except OSError as error:
        raise StorageError(f"JSONL backend: {error}") from error
