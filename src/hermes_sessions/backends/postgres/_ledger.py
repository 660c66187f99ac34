"""Statements on the ``ledger`` table: the turn ledger's rows (``SupportsLedger``).

A write is compare-and-swap per row without reading first: a new row (version 0) is an
``INSERT ... ON CONFLICT DO NOTHING`` (a concurrent insert of the same row waits for the other
transaction, then finds the row), a changed one an ``UPDATE ... WHERE version = %s``. A row that
did not change raises ``LedgerConflictError`` and the caller's transaction rolls back.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from hermes_sessions.backends.postgres._rows import dec, enc
from hermes_sessions.backends.rules import written_ledger_rows
from hermes_sessions.exceptions import CorruptRecordError, LedgerConflictError
from hermes_sessions.ledger import LedgerRow
from hermes_sessions.serde import compact_json

if TYPE_CHECKING:
    from collections.abc import Sequence

    import psycopg

    from hermes_sessions.backends.postgres._pool import Connections
    from hermes_sessions.results import AppendResult

__all__ = ["forget", "rows", "write"]

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


def rows(  # noqa: PLR0917  # the filters of ledger_rows, passed through
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


def write(
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
