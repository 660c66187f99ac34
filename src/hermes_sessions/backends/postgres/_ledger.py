"""Statements on the ``ledger`` table: the turn ledger's rows (``SupportsLedger``).

A write is compare-and-swap per row without reading first: a new row (version 0) is an
``INSERT ... ON CONFLICT DO NOTHING`` (a concurrent insert of the same row waits for the other
transaction, then finds the row), a changed one an ``UPDATE ... WHERE version = %s``. A row that
did not change raises ``LedgerConflictError`` and the caller's transaction rolls back.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from hermes_sessions.backends.postgres import _messages as writes
from hermes_sessions.backends.postgres._pool import guarded
from hermes_sessions.backends.postgres._rows import dec, enc
from hermes_sessions.backends.rules import (
    check_ledger_write,
    check_message_sizes,
    written_ledger_rows,
)
from hermes_sessions.exceptions import CorruptRecordError, LedgerConflictError
from hermes_sessions.ledger import LedgerRow
from hermes_sessions.serde import compact_json

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    import psycopg

    from hermes_sessions.backends.postgres._backend import PostgresBackend
    from hermes_sessions.backends.postgres._pool import Connections
    from hermes_sessions.ledger import LedgerKind
    from hermes_sessions.models import Message
    from hermes_sessions.results import AppendResult
    from hermes_sessions.usage import Usage

__all__ = ["forget", "ledger_rows", "ledger_write", "select", "store"]

_COLUMNS = "kind, id, session_id, session_key, status, updated_at, data, version"


def _row(values: Sequence[Any]) -> LedgerRow:
    try:
        return LedgerRow(
            kind=values[0],
            id=dec(values[1]) or "",
            session_id=dec(values[2]) or "",
            session_key=dec(values[3]) or "",
            status=values[4],
            updated_at=values[5],
            data=json.loads(values[6]),
            version=values[7],
        )
    except (ValueError, TypeError) as error:
        raise CorruptRecordError(f"ledger row {values[1]!r}: {error}") from error


def select(  # noqa: PLR0917  # the filters of ledger_rows, passed through
    pool: Connections,
    connection: psycopg.Connection[Any],
    kind: str,
    ids: Sequence[str] | None,
    status: str | None,
    session_key: str | None,
) -> list[LedgerRow]:
    """The rows of ``kind`` passing the filters, by ``(updated_at, id)``."""
    clauses, params = ["kind = %s"], [kind]
    if ids is not None:
        if not ids:
            return []
        clauses.append("id = ANY(%s)")
        params.append([enc(i) for i in ids])  # type: ignore[arg-type]  # a text[] parameter
    if status is not None:
        clauses.append("status = %s")
        params.append(status)
    if session_key is not None:
        clauses.append("session_key = %s")
        params.append(enc(session_key))
    query = pool.q(
        f"SELECT {_COLUMNS} FROM {{s}}.ledger WHERE {' AND '.join(clauses)} "  # fixed clauses
        "ORDER BY updated_at, id"
    )
    return [_row(values) for values in connection.execute(query, params).fetchall()]


def store(
    pool: Connections,
    connection: psycopg.Connection[Any],
    written: Sequence[LedgerRow],
    result: AppendResult,
) -> None:
    """Store ``written`` if every version is the stored one (the caller's transaction)."""
    for expected, row in zip(written, written_ledger_rows(written, result), strict=True):
        values = (
            enc(row.session_id),
            enc(row.session_key),
            row.status,
            row.updated_at,
            compact_json(row.data),
            row.version,
        )
        if expected.version == 0:
            cursor = connection.execute(
                pool.q(
                    f"INSERT INTO {{s}}.ledger ({_COLUMNS}) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (kind, id) DO NOTHING"
                ),
                (row.kind, enc(row.id), *values),
            )
        else:
            cursor = connection.execute(
                pool.q(
                    "UPDATE {s}.ledger SET session_id = %s, session_key = %s, status = %s, "
                    "updated_at = %s, data = %s, version = %s "
                    "WHERE kind = %s AND id = %s AND version = %s"
                ),
                (*values, row.kind, enc(row.id), expected.version),
            )
        if cursor.rowcount != 1:
            found = connection.execute(
                pool.q("SELECT version FROM {s}.ledger WHERE kind = %s AND id = %s"),
                (row.kind, enc(row.id)),
            ).fetchone()
            raise LedgerConflictError(
                row.kind,
                row.id,
                expected_version=expected.version,
                actual_version=0 if found is None else found[0],
            )


def forget(pool: Connections, connection: psycopg.Connection[Any], session_id: str) -> None:
    """Delete a session's rows (with the session)."""
    connection.execute(pool.q("DELETE FROM {s}.ledger WHERE session_id = %s"), (enc(session_id),))


@guarded
def ledger_rows(
    backend: PostgresBackend,
    kind: LedgerKind,
    *,
    ids: Sequence[str] | None = None,
    status: str | None = None,
    session_key: str | None = None,
) -> list[LedgerRow]:
    """``PostgresBackend.ledger_rows``: the rows of ``kind`` passing the filters, in one read."""
    wanted = None if ids is None else list(dict.fromkeys(ids))
    return backend._run(  # noqa: SLF001  # the backend's own transaction runner
        lambda c: select(backend, c, kind, wanted, status, session_key), write=False
    )


@guarded
def ledger_write(
    backend: PostgresBackend,
    session_id: str,
    rows: Sequence[LedgerRow],
    *,
    messages: Sequence[Message] = (),
    touch_at: datetime | None = None,
    usage: Usage | None = None,
) -> AppendResult:
    """``PostgresBackend.ledger_write``: the messages and rows in one transaction."""
    check_message_sizes(messages, backend.max_message_bytes)
    check_ledger_write(session_id, rows, len(messages))

    def work(connection: psycopg.Connection[Any]) -> AppendResult:
        result = writes.append(backend, connection, session_id, messages, touch_at=touch_at)
        if result.duplicate:
            return result
        if usage is not None:
            amounts = (usage.values(), usage.increments())
            backend._update(connection, session_id, *amounts)  # noqa: SLF001  # its own
        store(backend, connection, rows, result)
        return result

    return backend._run(work)  # noqa: SLF001  # the backend's own transaction runner
