"""Statements on the PostgreSQL ``state`` table, run inside the caller's transaction.

A merge first makes sure every scope it changes has a row (``INSERT ... ON CONFLICT DO
NOTHING``), then locks those rows in scope order (``SELECT ... FOR UPDATE``), reads them, and
writes the merged values: two hosts changing one scope queue on its row, so no update is lost,
and a fixed lock order means no deadlock. Callers that also change a session lock its row first.
Only row locks are used, so this works behind a transaction-mode pooler.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from hermes_sessions.backends.postgres._rows import dec, dumps, enc
from hermes_sessions.backends.rules import merged_states, session_scope

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import psycopg

    from hermes_sessions.backends.postgres._pool import Connections

__all__ = ["copy", "forget", "get", "merge", "scopes"]


def get(
    pool: Connections, connection: psycopg.Connection[Any], scope_ids: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """The stored value of every scope of ``scope_ids`` that holds one."""
    wanted = {enc(scope): scope for scope in scope_ids}
    rows = connection.execute(
        pool.q("SELECT scope, value FROM {s}.state WHERE scope = ANY(%s::text[])"),
        (list(wanted),),
    ).fetchall()
    return {wanted[row[0]]: json.loads(row[1]) for row in rows}


def scopes(pool: Connections, connection: psycopg.Connection[Any]) -> list[str]:
    """Every scope id that holds a value, sorted (as Python sorts them)."""
    rows = connection.execute(pool.q("SELECT scope FROM {s}.state")).fetchall()
    return sorted(str(dec(row[0])) for row in rows)


def merge(
    pool: Connections, connection: psycopg.Connection[Any], changes: Mapping[str, Mapping[str, Any]]
) -> None:
    """Apply ``changes`` to the stored scopes (``StateTooLargeError`` rolls everything back)."""
    if not changes:
        return
    scopes = sorted(changes)
    encoded = [enc(scope) for scope in scopes]
    connection.execute(
        pool.q(
            "INSERT INTO {s}.state (scope, value) SELECT unnest(%s::text[]), '{{}}' "
            "ON CONFLICT (scope) DO NOTHING"
        ),
        (encoded,),
    )
    rows = connection.execute(
        pool.q(
            "SELECT scope, value FROM {s}.state WHERE scope = ANY(%s::text[]) "
            "ORDER BY scope FOR UPDATE"
        ),
        (encoded,),
    ).fetchall()
    current = dict(zip(scopes, (json.loads(row[1]) for row in rows), strict=True))
    values = merged_states(changes, current)
    kept = [(enc(scope), dumps(value)) for scope, value in values.items() if value]
    emptied = [enc(scope) for scope, value in values.items() if not value]
    if kept:
        connection.execute(
            pool.q(
                "UPDATE {s}.state AS t SET value = v.value FROM "
                "unnest(%s::text[], %s::text[]) AS v (scope, value) WHERE t.scope = v.scope"
            ),
            ([k for k, _ in kept], [v for _, v in kept]),
        )
    if emptied:
        connection.execute(
            pool.q("DELETE FROM {s}.state WHERE scope = ANY(%s::text[])"), (emptied,)
        )


def copy(
    pool: Connections, connection: psycopg.Connection[Any], source_id: str, target_id: str
) -> None:
    """Give ``target_id`` a copy of ``source_id``'s session state (if it has any)."""
    connection.execute(
        pool.q(
            "INSERT INTO {s}.state (scope, value) SELECT %s, value FROM {s}.state "
            "WHERE scope = %s ON CONFLICT (scope) DO UPDATE SET value = excluded.value"
        ),
        (enc(session_scope(target_id)), enc(session_scope(source_id))),
    )


def forget(pool: Connections, connection: psycopg.Connection[Any], session_id: str) -> None:
    """Delete a session's own state (with the session)."""
    connection.execute(
        pool.q("DELETE FROM {s}.state WHERE scope = %s"), (enc(session_scope(session_id)),)
    )
