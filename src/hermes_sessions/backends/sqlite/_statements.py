"""Session, routing-entry and rotation statements of the SQLite backend.

Every function runs inside the caller's transaction on the connection it is given; none of them
commits. ``apply_plan`` is the whole rotation: every precondition, then every change.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import attrs

from hermes_sessions import text
from hermes_sessions.backends.rules import fresh_record, missing_session
from hermes_sessions.backends.sqlite import _schema as schema
from hermes_sessions.backends.sqlite._messages import append
from hermes_sessions.backends.sqlite._rows import (
    ENTRY_COLUMNS,
    SESSION_COLUMNS,
    entry_body,
    entry_from_row,
    message_from_row,
    record_from_row,
    record_row,
)
from hermes_sessions.exceptions import ConflictError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hermes_sessions.models import SessionEntry, SessionRecord
    from hermes_sessions.protocols import RotationPlan

__all__ = [
    "apply_plan",
    "build_index",
    "check_revision",
    "create",
    "end",
    "entry",
    "existing",
    "index_problems",
    "migrate",
    "record",
    "reopen",
    "store_entry",
]


# -- schema ----------------------------------------------------------------------------------------


def migrate(connection: sqlite3.Connection, *, version: int) -> None:
    """Apply migration ``version`` unless another process already did."""
    current = schema.applied_version(connection)
    schema.check_version(current, "the database")
    if current < version:
        schema.apply_migration(connection, version, datetime.now(UTC))


def build_index(connection: sqlite3.Connection) -> int:
    """Create or refill the FTS5 table unless it is ready; return how many messages it indexed."""
    if schema.fts_state(connection) == "ready":  # another process built it meanwhile
        return 0

    def tokens(row: Sequence[Any]) -> str:
        return schema.message_tokens(text.searchable_text(message_from_row(row, "unused")))

    return schema.rebuild_fts(connection, tokens)


_COUNTS: Final = """
    SELECT s.id, s.message_count, s.tool_call_count, count(m.id), coalesce(sum(m.tool_calls), 0)
    FROM sessions AS s LEFT JOIN messages AS m ON m.session_seq = s.seq AND m.active = 1
    GROUP BY s.seq
    HAVING s.message_count != count(m.id) OR s.tool_call_count != coalesce(sum(m.tool_calls), 0)
"""


def index_problems(connection: sqlite3.Connection, *, fts: bool) -> list[str]:
    """What ``integrity_check`` reports beyond SQLite's own check."""
    problems = [
        f"session {row[0]}: stored counts {row[1]}/{row[2]}, actual {row[3]}/{row[4]}"
        for row in connection.execute(_COUNTS)
    ]
    problems.extend(
        f"routing entry {row[0]!r} points at missing session {row[1]!r}"
        for row in connection.execute(
            "SELECT session_key, session_id FROM entries "
            "WHERE session_id NOT IN (SELECT id FROM sessions)"
        )
    )
    if not fts:
        return problems
    table = schema.FTS_TABLE
    try:
        connection.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")
    except sqlite3.DatabaseError as error:
        problems.append(f"full-text index: {error}; run rebuild_index()")
    missing = connection.execute(
        f"SELECT count(*) FROM messages WHERE id NOT IN (SELECT rowid FROM {table})"
    ).fetchone()[0]
    orphans = connection.execute(
        f"SELECT count(*) FROM {table} WHERE rowid NOT IN (SELECT id FROM messages)"
    ).fetchone()[0]
    if missing or orphans:
        problems.append(
            f"full-text index: {missing} messages unindexed, {orphans} rows without a message; "
            "run rebuild_index()"
        )
    return problems


# -- sessions --------------------------------------------------------------------------------------


def record(connection: sqlite3.Connection, session_id: str) -> SessionRecord | None:
    """The record of ``session_id``, or ``None``."""
    row = connection.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions AS s WHERE s.id = ?", (session_id,)
    ).fetchone()
    return None if row is None else record_from_row(row)


def existing(connection: sqlite3.Connection, session_id: str) -> SessionRecord:
    """The record of ``session_id``; ``SessionNotFoundError`` if there is none."""
    found = record(connection, session_id)
    if found is None:
        raise missing_session(session_id)
    return found


def create(connection: sqlite3.Connection, new: SessionRecord) -> SessionRecord:
    """Store a new session (an existing id returns the stored record unchanged)."""
    found = record(connection, new.id)
    if found is not None:
        return found
    stored = fresh_record(new)
    row = record_row(stored)
    names = ", ".join(row)
    marks = ", ".join("?" * len(row))
    connection.execute(f"INSERT INTO sessions ({names}) VALUES ({marks})", list(row.values()))
    return stored


def end(
    connection: sqlite3.Connection, session_id: str, reason: str, at: datetime
) -> SessionRecord:
    """End a session unless it has ended (the first reason wins)."""
    connection.execute(
        "UPDATE sessions SET end_reason = ?, ended_at = ? WHERE id = ? AND end_reason IS NULL",
        (reason, schema.to_us(at), session_id),
    )
    return existing(connection, session_id)


def reopen(connection: sqlite3.Connection, session_id: str) -> SessionRecord:
    """Clear a session's end."""
    connection.execute(
        "UPDATE sessions SET end_reason = NULL, ended_at = NULL WHERE id = ?", (session_id,)
    )
    return existing(connection, session_id)


def _exists(connection: sqlite3.Connection, session_id: str) -> bool:
    return (
        connection.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone()
        is not None
    )


# -- routing entries -------------------------------------------------------------------------------


def entry(connection: sqlite3.Connection, key: str) -> SessionEntry | None:
    """The entry of ``key``, or ``None``."""
    row = connection.execute(
        f"SELECT {ENTRY_COLUMNS} FROM entries WHERE session_key = ?", (key,)
    ).fetchone()
    return None if row is None else entry_from_row(row)


def _revision(connection: sqlite3.Connection, key: str) -> int | None:
    row = connection.execute(
        "SELECT revision FROM entries WHERE session_key = ?", (key,)
    ).fetchone()
    return None if row is None else int(row[0])


def check_revision(connection: sqlite3.Connection, key: str, expected: int | None) -> None:
    """Raise ``ConflictError`` unless the key's revision is ``expected``."""
    actual = _revision(connection, key)
    if actual != expected:
        raise ConflictError(key, expected_revision=expected, actual_revision=actual)


def store_entry(
    connection: sqlite3.Connection, new: SessionEntry, expected: int | None
) -> SessionEntry:
    """Write ``new`` with revision ``expected + 1`` (checks are the caller's)."""
    stored = attrs.evolve(new, revision=(expected or 0) + 1)
    connection.execute(
        f"INSERT OR REPLACE INTO entries ({ENTRY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            stored.session_key,
            stored.session_id,
            stored.revision,
            schema.to_us(stored.created_at),
            schema.to_us(stored.updated_at),
            stored.last_prompt_tokens,
            entry_body(stored),
        ),
    )
    return stored


# -- the rotation ----------------------------------------------------------------------------------


def _check_plan(connection: sqlite3.Connection, plan: RotationPlan) -> None:
    for write in plan.entries:
        check_revision(connection, write.entry.session_key, write.expected_revision)
    for session_id in plan.require_open:
        if existing(connection, session_id).is_ended:
            raise ConflictError(session_id=session_id)
    created = plan.create.id if plan.create is not None else None
    if created is not None and _exists(connection, created):
        raise ConflictError(session_id=created)
    needed = [w.entry.session_id for w in plan.entries] + [t for _, t in plan.repoint]
    needed += list(plan.reopen) + [s for s, _ in plan.end]
    for session_id in dict.fromkeys(needed):
        if session_id != created and not _exists(connection, session_id):
            raise missing_session(session_id)


def apply_plan(
    connection: sqlite3.Connection, plan: RotationPlan, *, fts: bool
) -> list[SessionEntry]:
    """Check every precondition of ``plan``, then make every change (see ``RotationPlan``)."""
    _check_plan(connection, plan)
    if plan.create is not None:
        create(connection, plan.create)
        seq = connection.execute(
            "SELECT seq FROM sessions WHERE id = ?", (plan.create.id,)
        ).fetchone()[0]
        append(connection, seq, plan.create.id, plan.messages, fts=fts)
    for session_id in plan.reopen:
        reopen(connection, session_id)
    written: list[SessionEntry] = []
    for source, target in plan.repoint:
        rows = connection.execute(
            f"SELECT {ENTRY_COLUMNS} FROM entries WHERE session_id = ? ORDER BY session_key",
            (source,),
        ).fetchall()
        for row in rows:
            moved = attrs.evolve(entry_from_row(row), session_id=target)
            written.append(store_entry(connection, moved, moved.revision))
    for write in plan.entries:
        expected = write.expected_revision
        current = _revision(connection, write.entry.session_key)
        if current is not None and expected is not None and current != expected:
            expected = current  # a repoint in this same plan moved the key
        written.append(store_entry(connection, write.entry, expected))
    for session_id, reason in plan.end:
        pointed = connection.execute(
            "SELECT 1 FROM entries WHERE session_id = ? LIMIT 1", (session_id,)
        ).fetchone()
        if pointed is None:
            end(connection, session_id, reason, plan.at)
    return written
