"""Statements on the ``state`` table and the sessions' ``revision`` column.

One row per scope that holds something (``scope`` is :attr:`~hermes_sessions.state.StateScope.id`,
``value`` its JSON object); an emptied scope loses its row. Merges read the stored values and
write the results in the caller's write transaction (``BEGIN IMMEDIATE``), so no concurrent
change is lost. None of these functions commits.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from hermes_sessions.backends.rules import (
    check_session_revision,
    merged_states,
    missing_session,
    session_scope,
)
from hermes_sessions.backends.sqlite._clauses import CHUNK, in_list
from hermes_sessions.serde import compact_json

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Mapping, Sequence

__all__ = ["bump", "copy", "forget", "get", "merge", "revision_of"]


def get(connection: sqlite3.Connection, scope_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The stored value of every scope of ``scope_ids`` that holds one."""
    wanted = list(dict.fromkeys(scope_ids))
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(wanted), CHUNK):
        params: list[Any] = []
        sql = "SELECT scope, value FROM state WHERE " + in_list(
            "scope", wanted[start : start + CHUNK], params
        )
        found.update((scope, json.loads(value)) for scope, value in connection.execute(sql, params))
    return found


def merge(connection: sqlite3.Connection, changes: Mapping[str, Mapping[str, Any]]) -> None:
    """Apply ``changes`` to the stored scopes (``StateTooLargeError`` before any write)."""
    if not changes:
        return
    values = merged_states(changes, get(connection, list(changes)))
    kept = [(scope, compact_json(value)) for scope, value in values.items() if value]
    emptied = [(scope,) for scope, value in values.items() if not value]
    if kept:
        connection.executemany(
            "INSERT INTO state (scope, value) VALUES (?, ?) "
            "ON CONFLICT (scope) DO UPDATE SET value = excluded.value",
            kept,
        )
    if emptied:
        connection.executemany("DELETE FROM state WHERE scope = ?", emptied)


def revision_of(connection: sqlite3.Connection, session_id: str) -> int:
    """The session's revision; ``SessionNotFoundError`` if there is no such session."""
    row = connection.execute("SELECT revision FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if row is None:
        raise missing_session(session_id)
    return int(row[0])


def bump(connection: sqlite3.Connection, session_id: str, if_revision: int | None = None) -> None:
    """Check ``if_revision`` against the session's revision, then move it on by one."""
    check_session_revision(session_id, if_revision, revision_of(connection, session_id))
    connection.execute("UPDATE sessions SET revision = revision + 1 WHERE id = ?", (session_id,))


def copy(connection: sqlite3.Connection, source_id: str, target_id: str) -> None:
    """Give ``target_id`` a copy of ``source_id``'s session state (if it has any)."""
    connection.execute(
        "INSERT INTO state (scope, value) SELECT ?, value FROM state WHERE scope = ? "
        "ON CONFLICT (scope) DO UPDATE SET value = excluded.value",
        (session_scope(target_id), session_scope(source_id)),
    )


def forget(connection: sqlite3.Connection, session_id: str) -> None:
    """Delete a session's own state (with the session)."""
    connection.execute("DELETE FROM state WHERE scope = ?", (session_scope(session_id),))
