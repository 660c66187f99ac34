"""Statements on the ``ledger`` table: the turn ledger's rows (``SupportsLedger``).

One row per ``(kind, id)``; ``data`` is the row's JSON object, kept as it is. A write checks
every row's ``version`` against the stored one inside the caller's transaction (after the
append it rides with), so a lost race rolls the whole write back.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from hermes_sessions.backends.rules import (
    check_ledger_versions,
    check_ledger_write,
    check_message_sizes,
    written_ledger_rows,
)
from hermes_sessions.backends.sqlite import _entries as entries_sql
from hermes_sessions.backends.sqlite import _messages as messages_sql
from hermes_sessions.backends.sqlite._guard import guarded
from hermes_sessions.backends.sqlite._rows import from_us, to_us
from hermes_sessions.exceptions import CorruptRecordError
from hermes_sessions.ledger import LedgerRow
from hermes_sessions.serde import compact_json

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence
    from datetime import datetime

    from hermes_sessions.backends.sqlite._backend import SQLiteBackend
    from hermes_sessions.ledger import LedgerKind
    from hermes_sessions.models import Message
    from hermes_sessions.results import AppendResult
    from hermes_sessions.usage import Usage

__all__ = ["forget", "ledger_rows", "ledger_write", "select", "store"]

_COLUMNS = "kind, id, session_id, session_key, status, updated_at, data, version"


def _row(values: Sequence[Any]) -> LedgerRow:
    try:
        data = json.loads(values[6])
        return LedgerRow(
            kind=values[0],
            id=values[1],
            session_id=values[2],
            session_key=values[3],
            status=values[4],
            updated_at=from_us(values[5]),
            data=data,
            version=values[7],
        )
    except (ValueError, TypeError) as error:
        raise CorruptRecordError(f"ledger row {values[1]!r}: {error}") from error


def select(
    connection: sqlite3.Connection,
    kind: str,
    ids: Sequence[str] | None,
    status: str | None,
    session_key: str | None,
) -> list[LedgerRow]:
    """The rows of ``kind`` passing the filters, by ``(updated_at, id)``."""
    clauses, params = ["kind = ?"], [kind]
    if ids is not None:
        if not ids:
            return []
        clauses.append(f"id IN ({', '.join('?' * len(ids))})")
        params.extend(ids)
    if status is not None:
        clauses.append("status = ?")
        params.append(status)
    if session_key is not None:
        clauses.append("session_key = ?")
        params.append(session_key)
    found = connection.execute(
        f"SELECT {_COLUMNS} FROM ledger WHERE {' AND '.join(clauses)} "  # fixed clauses
        "ORDER BY updated_at, id",
        params,
    ).fetchall()
    return [_row(values) for values in found]


def store(
    connection: sqlite3.Connection, written: Sequence[LedgerRow], result: AppendResult
) -> None:
    """Check the versions of ``written`` and store them (the caller's transaction)."""
    stored: dict[tuple[str, str], int] = {}
    for row in written:
        found = connection.execute(
            "SELECT version FROM ledger WHERE kind = ? AND id = ?", (row.kind, row.id)
        ).fetchone()
        if found is not None:
            stored[row.kind, row.id] = found[0]
    check_ledger_versions(written, stored)
    connection.executemany(
        f"INSERT OR REPLACE INTO ledger ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                row.kind,
                row.id,
                row.session_id,
                row.session_key,
                row.status,
                to_us(row.updated_at),
                compact_json(row.data),
                row.version,
            )
            for row in written_ledger_rows(written, result)
        ],
    )


def forget(connection: sqlite3.Connection, session_id: str) -> None:
    """Delete a session's rows (with the session)."""
    connection.execute("DELETE FROM ledger WHERE session_id = ?", (session_id,))


@guarded
def ledger_rows(
    backend: SQLiteBackend,
    kind: LedgerKind,
    *,
    ids: Sequence[str] | None = None,
    status: str | None = None,
    session_key: str | None = None,
) -> list[LedgerRow]:
    """``SQLiteBackend.ledger_rows``: the rows of ``kind`` passing the filters, in one read."""
    wanted = None if ids is None else list(dict.fromkeys(ids))
    return backend._read_once(lambda c: select(c, kind, wanted, status, session_key))  # noqa: SLF001


@guarded
def ledger_write(
    backend: SQLiteBackend,
    session_id: str,
    rows: Sequence[LedgerRow],
    *,
    messages: Sequence[Message] = (),
    touch_at: datetime | None = None,
    usage: Usage | None = None,
) -> AppendResult:
    """``SQLiteBackend.ledger_write``: the messages and rows in one transaction."""
    check_message_sizes(messages, backend.max_message_bytes)
    check_ledger_write(session_id, rows, len(messages))
    fts = backend._fts  # noqa: SLF001  # the backend's own state, read by its own method

    def work(connection: sqlite3.Connection) -> AppendResult:
        stored = messages_sql.append(connection, None, session_id, messages, fts=fts, usage=usage)
        if stored.duplicate:
            return stored
        store(connection, rows, stored)
        if touch_at is not None:
            entries_sql.touch_session(connection, session_id, touch_at)
        return stored

    return backend._write(work)  # noqa: SLF001
