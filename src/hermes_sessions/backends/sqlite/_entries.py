"""Statements on the ``entries`` table: the routing index (session key → entry).

Every function runs inside the caller's transaction on the connection it is given; none of them
commits. Revision checks are the caller's, except in :func:`check_revision`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from hermes_sessions.backends import rules
from hermes_sessions.backends.sqlite._rows import ENTRY_FIELDS, SQLITE, entry_from_row, to_us

if TYPE_CHECKING:
    import sqlite3
    from datetime import datetime

    from hermes_sessions.models import SessionEntry

__all__ = [
    "ENTRY_COLUMNS",
    "check_revision",
    "delete",
    "entry",
    "listing",
    "points_at",
    "revision",
    "store",
    "touch",
    "touch_session",
]

ENTRY_COLUMNS: Final = ", ".join(ENTRY_FIELDS)
"""The columns :func:`~._rows.entry_from_row` reads, from ``entries``."""
_INSERT: Final = (
    f"INSERT OR REPLACE INTO entries ({ENTRY_COLUMNS}) "
    f"VALUES ({', '.join('?' * len(ENTRY_FIELDS))})"
)


def entry(connection: sqlite3.Connection, key: str) -> SessionEntry | None:
    """The entry of ``key``, or ``None``."""
    row = connection.execute(
        f"SELECT {ENTRY_COLUMNS} FROM entries WHERE session_key = ?", (key,)
    ).fetchone()
    return None if row is None else entry_from_row(row)


def listing(connection: sqlite3.Connection, session_id: str | None) -> list[SessionEntry]:
    """Every entry, or those pointing at ``session_id``, in key order."""
    sql = f"SELECT {ENTRY_COLUMNS} FROM entries"
    params: tuple[str, ...] = ()
    if session_id is not None:
        sql += " WHERE session_id = ?"
        params = (session_id,)
    sql += " ORDER BY session_key"
    return [entry_from_row(row) for row in connection.execute(sql, params).fetchall()]


def revision(connection: sqlite3.Connection, key: str) -> int | None:
    """The current revision of ``key`` (``None``: no entry)."""
    row = connection.execute(
        "SELECT revision FROM entries WHERE session_key = ?", (key,)
    ).fetchone()
    return None if row is None else int(row[0])


def check_revision(connection: sqlite3.Connection, key: str, expected: int | None) -> None:
    """Raise ``ConflictError`` unless the key's revision is ``expected``."""
    rules.check_revision(key, expected, revision(connection, key))


def points_at(connection: sqlite3.Connection, session_id: str) -> bool:
    """Whether any key points at ``session_id``."""
    row = connection.execute(
        "SELECT 1 FROM entries WHERE session_id = ? LIMIT 1", (session_id,)
    ).fetchone()
    return row is not None


def store(connection: sqlite3.Connection, new: SessionEntry, expected: int | None) -> SessionEntry:
    """Write ``new`` with revision ``expected + 1`` (checks are the caller's)."""
    stored = attrs.evolve(new, revision=(expected or 0) + 1)
    connection.execute(_INSERT, SQLITE.entry_values(stored, stored.revision))
    return stored


def delete(connection: sqlite3.Connection, key: str) -> None:
    """Remove the entry of ``key``."""
    connection.execute("DELETE FROM entries WHERE session_key = ?", (key,))


def touch(
    connection: sqlite3.Connection, key: str, at: datetime, last_prompt_tokens: int | None
) -> SessionEntry | None:
    """Move the entry's ``updated_at`` forward to ``at``; return it (``None``: no entry)."""
    row = connection.execute(
        "UPDATE entries SET updated_at = max(updated_at, ?), "
        "last_prompt_tokens = coalesce(?, last_prompt_tokens) WHERE session_key = ? "
        f"RETURNING {ENTRY_COLUMNS}",
        (to_us(at), last_prompt_tokens, key),
    ).fetchone()
    return None if row is None else entry_from_row(row)


def touch_session(connection: sqlite3.Connection, session_id: str, at: datetime) -> None:
    """Move ``updated_at`` forward to ``at`` on every entry pointing at ``session_id``."""
    connection.execute(
        "UPDATE entries SET updated_at = max(updated_at, ?) WHERE session_id = ?",
        (to_us(at), session_id),
    )
