"""Statements on the PostgreSQL ``memory`` table: one row per memory scope, its entries as JSON.

Every host of one database sees one memory. A change makes sure the scope has a row (``INSERT
... ON CONFLICT DO NOTHING``), locks it (``SELECT ... FOR UPDATE``), reads the entries, asks the
caller's plan for the new ones and writes them, all in one transaction: two hosts changing one
scope queue on its row, so no update is lost, and a refusal raised by the plan rolls it back. Only
row locks are used, so this works behind a transaction-mode pooler.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from hermes_sessions.backends.postgres._pool import Connections, guarded
from hermes_sessions.backends.postgres._rows import dec, dumps, enc

if TYPE_CHECKING:
    from collections.abc import Callable

    import psycopg


__all__ = ["MemoryRows", "change", "delete", "entries", "scope_ids"]


def entries(
    pool: Connections, connection: psycopg.Connection[Any], scope_id: str
) -> tuple[str, ...]:
    """The entries of ``scope_id`` (empty when it has none)."""
    row = connection.execute(
        pool.q("SELECT entries FROM {s}.memory WHERE scope = %s"), (enc(scope_id),)
    ).fetchone()
    return () if row is None else tuple(json.loads(row[0]))


def change(
    pool: Connections,
    connection: psycopg.Connection[Any],
    scope_id: str,
    plan: Callable[[tuple[str, ...]], tuple[str, ...] | None],
) -> tuple[str, ...]:
    """Lock the scope's row, apply ``plan`` (``None``: no change), store; the entries after."""
    key = enc(scope_id)
    connection.execute(
        pool.q(
            "INSERT INTO {s}.memory (scope, entries) VALUES (%s, '[]') "
            "ON CONFLICT (scope) DO NOTHING"
        ),
        (key,),
    )
    row = connection.execute(
        pool.q("SELECT entries FROM {s}.memory WHERE scope = %s FOR UPDATE"), (key,)
    ).fetchone()
    current = tuple(json.loads(row[0])) if row is not None else ()
    new = plan(current)
    if new is None:
        new = current
    if new:
        connection.execute(
            pool.q("UPDATE {s}.memory SET entries = %s WHERE scope = %s"), (dumps(list(new)), key)
        )
    else:
        connection.execute(pool.q("DELETE FROM {s}.memory WHERE scope = %s"), (key,))
    return new


def scope_ids(pool: Connections, connection: psycopg.Connection[Any]) -> list[str]:
    """Every scope id that holds entries, sorted."""
    rows = connection.execute(pool.q("SELECT scope FROM {s}.memory")).fetchall()
    return sorted(str(dec(row[0])) for row in rows)


def delete(pool: Connections, connection: psycopg.Connection[Any], scope_id: str) -> bool:
    """Delete a scope's entries; whether it had any."""
    cursor = connection.execute(pool.q("DELETE FROM {s}.memory WHERE scope = %s"), (enc(scope_id),))
    return bool(cursor.rowcount)


class MemoryRows(Connections):
    """The backend's ``SupportsMemory`` (``hermes_sessions.memory``): a row per memory scope."""

    __slots__ = ()

    @guarded
    def memory_entries(self, scope_id: str) -> tuple[str, ...]:
        """The entries of one memory scope."""
        return self._run(lambda c: entries(self, c, scope_id), write=False)

    @guarded
    def change_memory(
        self, scope_id: str, plan: Callable[[tuple[str, ...]], tuple[str, ...] | None]
    ) -> tuple[str, ...]:
        """Change one memory scope under its row lock; the entries after."""
        return self._run(lambda c: change(self, c, scope_id, plan))

    @guarded
    def memory_scope_ids(self) -> list[str]:
        """Every memory scope holding entries."""
        return self._run(lambda c: scope_ids(self, c), write=False)

    @guarded
    def delete_memory(self, scope_id: str) -> bool:
        """Delete one memory scope; whether it held entries."""
        return self._run(lambda c: delete(self, c, scope_id))
