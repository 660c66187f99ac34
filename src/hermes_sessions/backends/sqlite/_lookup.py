"""The lookup of every message in one statement: a key's entry with the state of its scopes.

``SessionStore.get_or_create`` needs the key's routing entry and then the state of the four
scopes of a turn (app, user, lane and the entry's session). Read one after the other they are
two statements and two round trips through the backend; here the session scope is taken from the
entry row inside the statement, so both come from one statement (and one snapshot).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from hermes_sessions.backends.sqlite._entries import ENTRY_COLUMNS
from hermes_sessions.backends.sqlite._rows import entry_from_row

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

    from hermes_sessions.models import SessionEntry

__all__ = ["entry_with_state"]

_SQL: dict[int, str] = {}


def _statement(scopes: int) -> str:
    sql = _SQL.get(scopes)
    if sql is None:
        # A session id holds neither "%" nor "|", so its scope id is "session|" + the id
        # (hermes_sessions.state.scope_id encodes nothing in it).
        wanted = ", ".join(["?"] * scopes + ["'session|' || e.session_id"])
        sql = _SQL[scopes] = (
            f"SELECT {ENTRY_COLUMNS}, (SELECT json_group_array(json_array(t.scope, t.value)) "
            f"FROM state AS t WHERE t.scope IN ({wanted})) "
            "FROM entries AS e WHERE e.session_key = ?"
        )
    return sql


def entry_with_state(
    connection: sqlite3.Connection, key: str, scope_ids: Sequence[str]
) -> tuple[SessionEntry | None, dict[str, dict[str, Any]]]:
    """``key``'s entry (or ``None``) and the stored value of each scope that holds one.

    The scopes are ``scope_ids`` and the session scope of the entry's session.
    """
    row = connection.execute(_statement(len(scope_ids)), (*scope_ids, key)).fetchone()
    if row is None:
        return None, {}
    entry = entry_from_row(row[:-1])
    found = row[-1]
    if found == "[]":  # the usual case: no scope holds anything
        return entry, {}
    return entry, {scope: json.loads(value) for scope, value in json.loads(found)}
