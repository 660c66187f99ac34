"""Statements on the ``ledger`` table: the turn ledger's rows (``SupportsLedger``).

The shared SQL is in :mod:`~hermes_sessions.backends.sqlledger`. A write checks
every row's ``version`` against the stored one inside the caller's transaction (after the
append it rides with), so a lost race rolls the whole write back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_sessions.backends.rules import (
    check_ledger_versions,
    check_ledger_write,
    check_message_sizes,
    written_ledger_rows,
)
from hermes_sessions.backends.sqlite import _entries as entries_sql
from hermes_sessions.backends.sqlite import _messages as messages_sql
from hermes_sessions.backends.sqlite._guard import guarded
from hermes_sessions.backends.sqlite._rows import SQLITE
from hermes_sessions.backends.sqlledger import (
    LEDGER_COLUMNS,
    forget_sql,
    ledger_from_row,
    ledger_values,
    select_sql,
    unique_ids,
    version_sql,
)

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence
    from datetime import datetime

    from hermes_sessions.backends.sqlite._backend import SQLiteBackend
    from hermes_sessions.ledger import LedgerKind, LedgerRow
    from hermes_sessions.models import Message
    from hermes_sessions.results import AppendResult
    from hermes_sessions.usage import Usage

__all__ = ["forget", "ledger_rows", "ledger_write", "select", "store"]


def select(
    connection: sqlite3.Connection,
    kind: str,
    ids: Sequence[str] | None,
    status: str | None,
    session_key: str | None,
) -> list[LedgerRow]:
    """The rows of ``kind`` passing the filters, by ``(updated_at, id)``."""
    statement = select_sql(SQLITE, kind, ids, status, session_key)
    if statement is None:
        return []
    found = connection.execute(*statement).fetchall()
    return [ledger_from_row(SQLITE, values) for values in found]


def store(
    connection: sqlite3.Connection, written: Sequence[LedgerRow], result: AppendResult
) -> None:
    """Check the versions of ``written`` and store them (the caller's transaction)."""
    stored: dict[tuple[str, str], int] = {}
    for row in written:
        found = connection.execute(version_sql(SQLITE), (row.kind, row.id)).fetchone()
        if found is not None:
            stored[row.kind, row.id] = found[0]
    check_ledger_versions(written, stored)
    connection.executemany(
        f"INSERT OR REPLACE INTO ledger ({LEDGER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [ledger_values(SQLITE, row) for row in written_ledger_rows(written, result)],
    )


def forget(connection: sqlite3.Connection, session_id: str) -> None:
    """Delete a session's rows (with the session)."""
    connection.execute(forget_sql(SQLITE), (session_id,))


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
    wanted = unique_ids(ids)
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
