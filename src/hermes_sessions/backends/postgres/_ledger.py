"""Statements on the ``ledger`` table: the turn ledger's rows (``SupportsLedger``).

The shared SQL is in :mod:`~hermes_sessions.backends.sqlledger`. A write is
compare-and-swap per row without reading first: a new row (version 0) is an ``INSERT ...
ON CONFLICT DO NOTHING`` (a concurrent insert of the same row waits for the other transaction,
then finds the row), a changed one an ``UPDATE ... WHERE version = %s``. A row that did not
change raises ``LedgerConflictError`` and the caller's transaction rolls back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from hermes_sessions.backends.postgres import _messages as writes
from hermes_sessions.backends.postgres._pool import guarded
from hermes_sessions.backends.postgres._rows import POSTGRES, enc
from hermes_sessions.backends.rules import (
    check_ledger_write,
    check_message_sizes,
    written_ledger_rows,
)
from hermes_sessions.backends.sqlledger import (
    LEDGER_COLUMNS,
    forget_sql,
    ledger_from_row,
    ledger_values,
    select_sql,
    unique_ids,
    version_sql,
)
from hermes_sessions.exceptions import LedgerConflictError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    import psycopg

    from hermes_sessions.backends.postgres._backend import PostgresBackend
    from hermes_sessions.backends.postgres._pool import Connections
    from hermes_sessions.ledger import LedgerKind, LedgerRow
    from hermes_sessions.models import Message
    from hermes_sessions.results import AppendResult
    from hermes_sessions.usage import Usage

__all__ = ["forget", "ledger_rows", "ledger_write", "select", "store"]

_INSERT: Final = (
    f"INSERT INTO {{s}}.ledger ({LEDGER_COLUMNS}) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (kind, id) DO NOTHING"
)
_UPDATE: Final = (
    "UPDATE {s}.ledger SET session_id = %s, session_key = %s, status = %s, "
    "updated_at = %s, data = %s, version = %s "
    "WHERE kind = %s AND id = %s AND version = %s"
)


def select(  # noqa: PLR0917  # the filters of ledger_rows, passed through
    pool: Connections,
    connection: psycopg.Connection[Any],
    kind: str,
    ids: Sequence[str] | None,
    status: str | None,
    session_key: str | None,
) -> list[LedgerRow]:
    """The rows of ``kind`` passing the filters, by ``(updated_at, id)``."""
    statement = select_sql(POSTGRES, kind, ids, status, session_key)
    if statement is None:
        return []
    query, params = statement
    found = connection.execute(pool.q(query), params).fetchall()
    return [ledger_from_row(POSTGRES, values) for values in found]


def store(
    pool: Connections,
    connection: psycopg.Connection[Any],
    written: Sequence[LedgerRow],
    result: AppendResult,
) -> None:
    """Store ``written`` if every version is the stored one (the caller's transaction)."""
    for expected, row in zip(written, written_ledger_rows(written, result), strict=True):
        values = ledger_values(POSTGRES, row)
        if expected.version == 0:
            cursor = connection.execute(pool.q(_INSERT), values)
        else:
            key = values[:2]  # (kind, id) as stored
            cursor = connection.execute(pool.q(_UPDATE), (*values[2:], *key, expected.version))
        if cursor.rowcount != 1:
            found = connection.execute(pool.q(version_sql(POSTGRES)), values[:2]).fetchone()
            raise LedgerConflictError(
                row.kind,
                row.id,
                expected_version=expected.version,
                actual_version=0 if found is None else found[0],
            )


def forget(pool: Connections, connection: psycopg.Connection[Any], session_id: str) -> None:
    """Delete a session's rows (with the session)."""
    connection.execute(pool.q(forget_sql(POSTGRES)), (enc(session_id),))


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
    wanted = unique_ids(ids)
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
