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
from hermes_sessions.backends.sqlite._clauses import in_list, session_filters
from hermes_sessions.backends.sqlite._rows import (
    SESSION_FIELDS,
    preview_of,
    record_from_row,
    record_row,
    to_us,
)
from hermes_sessions.queries import SessionPage, SessionSummary, decode_cursor, encode_cursor
from hermes_sessions.titles import lineage_key, title_key

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Mapping, Sequence
    from datetime import datetime

    from hermes_sessions.models import SessionRecord
    from hermes_sessions.queries import SessionQuery
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

SESSION_COLUMNS: Final = ", ".join(f"s.{name}" for name in SESSION_FIELDS)
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


def _listing_filters(query: SessionQuery, params: list[Any]) -> list[str]:  # noqa: C901  # one per filter
    where = session_filters(query, params)
    if query.parent_session_id is not None:
        where.append("s.parent_session_id = ?")
        params.append(query.parent_session_id)
    if query.ended is not None:
        where.append("s.end_reason IS NOT NULL" if query.ended else "s.end_reason IS NULL")
    if query.exclude_end_reasons:
        excluded = in_list("s.end_reason", query.exclude_end_reasons, params, negate=True)
        where.append(f"(s.end_reason IS NULL OR {excluded})")
    if query.min_messages:
        where.append("s.message_count >= ?")
        params.append(query.min_messages)
    for column, after, before in (
        ("s.started_at", query.started_after, query.started_before),
        ("s.last_active_at", query.active_after, query.active_before),
    ):
        if after is not None:
            where.append(f"{column} >= ?")
            params.append(to_us(after))
        if before is not None:
            where.append(f"{column} < ?")
            params.append(to_us(before))
    if query.id_prefix is not None:
        where.append("substr(s.id, 1, length(?)) = ?")
        params += [query.id_prefix, query.id_prefix]
    if query.title is not None:
        where.append("s.title_key = ?")
        params.append(title_key(query.title))
    if query.title_lineage is not None:
        where.append("s.lineage_key = ?")
        params.append(lineage_key(query.title_lineage))
    return where


def _listing(query: SessionQuery) -> tuple[str, list[Any]]:
    """The SQL of one page of :meth:`TranscriptStore.list_sessions` and its parameters.

    It selects :data:`SESSION_COLUMNS`, then the body of the first active user message (the
    preview), at most ``limit + 1`` rows (the extra one says whether a next page exists).
    """
    params: list[Any] = []
    where = _listing_filters(query, params)
    column = "s.started_at" if query.order == "started" else "s.last_active_at"
    direction = "DESC" if query.descending else "ASC"
    if query.cursor is not None:
        position, session_id = decode_cursor(query.cursor)
        where.append(f"({column}, s.id) {'<' if query.descending else '>'} (?, ?)")
        params += [to_us(position), session_id]
    sql = (
        f"SELECT {SESSION_COLUMNS}, (SELECT m.body FROM messages AS m "
        "WHERE m.session_seq = s.seq AND m.active = 1 AND m.role = 'user' "
        "ORDER BY m.id LIMIT 1) FROM sessions AS s"
    )
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" ORDER BY {column} {direction}, s.id {direction}"
    if query.limit is not None:
        sql += " LIMIT ?"
        params.append(query.limit + 1)
    return sql, params


def page(connection: sqlite3.Connection, query: SessionQuery) -> SessionPage:
    """One page of :meth:`TranscriptStore.list_sessions`, with a cursor when more follow."""
    sql, params = _listing(query)
    rows = connection.execute(sql, params).fetchall()
    more = query.limit is not None and len(rows) > query.limit
    rows = rows[: query.limit] if more else rows
    width = len(SESSION_FIELDS)
    items = [
        SessionSummary(record=record_from_row(row), preview=preview_of(row[width])) for row in rows
    ]
    cursor = None
    if more:
        last = items[-1].record
        cursor = encode_cursor(query.sort_value(last), last.id)
    return SessionPage(items=items, next_cursor=cursor)
