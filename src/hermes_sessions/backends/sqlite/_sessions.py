"""Statements on the ``sessions`` table: records, their lifecycle, and listings.

Every function runs inside the caller's transaction on the connection it is given; none of them
commits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from hermes_sessions.backends.rules import (
    apply_update,
    check_title_free,
    fresh_record,
    missing_session,
)
from hermes_sessions.backends.sqlite._rows import (
    SQLITE,
    record_from_row,
    record_row,
    to_us,
)
from hermes_sessions.backends.sqlrows import session_columns
from hermes_sessions.titles import lineage_key, title_key

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Mapping, Sequence
    from datetime import datetime

    from hermes_sessions.models import SessionRecord
    from hermes_sessions.queries import SessionPage, SessionQuery
    from hermes_sessions.usage import Usage

__all__ = [
    "SESSION_COLUMNS",
    "create",
    "delete",
    "end",
    "ended",
    "existing",
    "page",
    "record",
    "reopen",
    "seq_of",
    "update",
    "update_fields",
    "usage_sql",
]

SESSION_COLUMNS: Final = session_columns()
"""The columns :func:`~._rows.record_from_row` reads, from ``sessions AS s``."""


def record(connection: sqlite3.Connection, session_id: str) -> SessionRecord | None:
    """The record of ``session_id``, or ``None``."""
    row = connection.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions AS s WHERE s.id = ?", (session_id,)
    ).fetchone()
    return None if row is None else record_from_row(row)


def _check_title(connection: sqlite3.Connection, candidate: SessionRecord) -> None:
    """Refuse ``candidate``'s title if another session of its owner holds it (in the write)."""
    if candidate.title is None:
        return
    rows = connection.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions AS s "
        "WHERE s.lineage_key = ? AND s.title_key = ? AND s.id <> ?",  # the lineage is indexed
        (lineage_key(candidate.title), title_key(candidate.title), candidate.id),
    ).fetchall()
    check_title_free(candidate, [record_from_row(row) for row in rows])


def ended(connection: sqlite3.Connection, session_id: str) -> bool | None:
    """Whether ``session_id`` has ended, or ``None`` when there is no such session."""
    row = connection.execute(
        "SELECT end_reason FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    return None if row is None else row[0] is not None


def existing(connection: sqlite3.Connection, session_id: str) -> SessionRecord:
    """The record of ``session_id``; ``SessionNotFoundError`` if there is none."""
    found = record(connection, session_id)
    if found is None:
        raise missing_session(session_id)
    return found


def seq_of(connection: sqlite3.Connection, session_id: str) -> int:
    """The internal row number of a session; ``SessionNotFoundError`` if it does not exist."""
    row = connection.execute("SELECT seq FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if row is None:
        raise missing_session(session_id)
    return int(row[0])


def create(connection: sqlite3.Connection, new: SessionRecord) -> SessionRecord:
    """Store a new session (an existing id returns the stored record unchanged)."""
    found = record(connection, new.id)
    if found is not None:
        return found
    stored = fresh_record(new)
    _check_title(connection, stored)
    row = record_row(stored)
    names = ", ".join(row)
    marks = ", ".join("?" * len(row))
    connection.execute(f"INSERT INTO sessions ({names}) VALUES ({marks})", list(row.values()))
    return stored


def update(connection: sqlite3.Connection, updated: SessionRecord, names: Sequence[str]) -> None:
    """Write the columns ``names`` of ``updated`` (the derived title keys with ``title``)."""
    row = record_row(updated)
    columns = [*names, "title_key", "lineage_key"] if "title" in names else list(names)
    assignments = ", ".join(f"{name} = ?" for name in columns)
    connection.execute(
        f"UPDATE sessions SET {assignments} WHERE id = ?",
        [row[name] for name in columns] + [updated.id],
    )


def update_fields(
    connection: sqlite3.Connection,
    session_id: str,
    changes: Mapping[str, Any],
    amounts: Mapping[str, int | float],
) -> SessionRecord:
    """Set fields and add to counters of one session (``update_session``'s rule)."""
    current = existing(connection, session_id)
    updated = apply_update(current, changes, amounts)
    if "title" in changes:
        _check_title(connection, updated)
    if changes or amounts:
        update(connection, updated, [*changes, *amounts])
    return updated


def usage_sql(usage: Usage | None) -> tuple[str, list[Any]]:
    """A turn's usage as assignments to add to the append's ``UPDATE sessions SET ...``.

    On the hot path: the append's counters statement carries them (one statement per turn).
    The same change as ``update_fields(values=usage.values(), increments=usage.increments())``
    without reading the record first: ``", name = coalesce(name, 0) + ?, ..."`` and its
    parameters, empty without usage.
    """
    if usage is None:
        return "", []
    increments, values = usage.increments(), usage.values()
    assignments = [f", {name} = coalesce({name}, 0) + ?" for name in increments]
    assignments += [f", {name} = ?" for name in values]
    return "".join(assignments), [*increments.values(), *values.values()]


def end(
    connection: sqlite3.Connection, session_id: str, reason: str, at: datetime
) -> SessionRecord:
    """End a session unless it has ended (the first reason wins)."""
    connection.execute(
        "UPDATE sessions SET end_reason = ?, ended_at = ? WHERE id = ? AND end_reason IS NULL",
        (reason, to_us(at), session_id),
    )
    return existing(connection, session_id)


def reopen(connection: sqlite3.Connection, session_id: str) -> SessionRecord:
    """Clear a session's end."""
    connection.execute(
        "UPDATE sessions SET end_reason = NULL, ended_at = NULL WHERE id = ?", (session_id,)
    )
    return existing(connection, session_id)


def delete(connection: sqlite3.Connection, seq: int, session_id: str) -> None:
    """Delete the session row ``seq`` (its messages are the caller's) and orphan its children."""
    connection.execute("DELETE FROM sessions WHERE seq = ?", (seq,))
    connection.execute(
        "UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id = ?",
        (session_id,),
    )


# -- listings --------------------------------------------------------------------------------------


def page(connection: sqlite3.Connection, query: SessionQuery) -> SessionPage:
    """One page of :meth:`TranscriptStore.list_sessions`, with a cursor when more follow."""
    sql, params = SQLITE.listing(query)
    return SQLITE.page(query, connection.execute(sql, params).fetchall())
