"""Session, routing-entry, lease and rotation statements of the PostgreSQL backend.

Every function runs inside the caller's transaction on the connection it is given; none of them
commits. Locking, so that hosts sharing the database agree:

* every compare-and-swap write of a key (``put_entry``, ``delete_entry``, a plan's entry writes)
  first takes ``pg_advisory_xact_lock`` on the key (ids from :func:`lock_id`, taken in sorted
  order), then writes with ``WHERE revision = expected`` so a concurrent re-point is noticed;
* a plan locks every session it names (``SELECT ... FOR UPDATE``, in ``seq`` order) before
  checking them, so ``require_open`` and "no key still points at it" hold until it commits;
* appends lock their session's row too (``_messages``), so they queue behind a rotation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import attrs

from hermes_sessions.backends.postgres import _ledger as ledger_sql
from hermes_sessions.backends.postgres import _state as state_sql
from hermes_sessions.backends.postgres._messages import append, transcript
from hermes_sessions.backends.postgres._pool import lock_id
from hermes_sessions.backends.postgres._rows import (
    ENTRY_COLUMNS,
    INSERT_SESSION,
    SESSION_COLUMNS,
    enc,
    entry_from_row,
    entry_values,
    record_from_row,
    record_values,
)
from hermes_sessions.backends.rules import (
    check_drop_revisions,
    check_drops_unreferenced,
    check_plan,
    check_title_free,
    first_messages,
    fresh_record,
    missing_session,
)
from hermes_sessions.exceptions import ConflictError
from hermes_sessions.titles import lineage_key, title_key, title_owner

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime

    import psycopg

    from hermes_sessions.backends.postgres._pool import Connections
    from hermes_sessions.models import SessionEntry, SessionRecord
    from hermes_sessions.protocols import RotationPlan

__all__ = [
    "apply_plan",
    "check_title",
    "create",
    "delete_entry",
    "drop_session",
    "end",
    "lock_keys",
    "put_entry",
    "record",
    "store_entry",
]

_INSERT_ENTRY: Final = (
    f"INSERT INTO {{s}}.entries ({ENTRY_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (session_key) DO NOTHING"
)
_UPDATE_ENTRY: Final = (
    "UPDATE {s}.entries SET session_key = %s, session_id = %s, revision = %s, created_at = %s, "
    "updated_at = %s, last_prompt_tokens = %s, body = %s WHERE session_key = %s AND revision = %s"
)


def lock_keys(pool: Connections, connection: psycopg.Connection[Any], keys: Iterable[str]) -> None:
    """Take the advisory lock of every key (sorted, so two writers never deadlock on them)."""
    ids = sorted({lock_id("key", pool.schema, key) for key in keys})
    if ids:
        connection.execute(
            "SELECT pg_advisory_xact_lock(x) FROM unnest(%s::bigint[]) WITH ORDINALITY "
            "AS t(x, n) ORDER BY n",
            (ids,),
        )


def _revision(pool: Connections, connection: psycopg.Connection[Any], key: str) -> int | None:
    row = connection.execute(
        pool.q("SELECT revision FROM {s}.entries WHERE session_key = %s"), (enc(key),)
    ).fetchone()
    return None if row is None else int(row[0])


def store_entry(
    pool: Connections,
    connection: psycopg.Connection[Any],
    entry: SessionEntry,
    expected: int | None,
) -> SessionEntry:
    """Store ``entry`` with revision ``expected + 1`` if the key is still at ``expected``."""
    revision = (expected or 0) + 1
    values = entry_values(entry, revision)
    if expected is None:
        cursor = connection.execute(pool.q(_INSERT_ENTRY), values)
    else:
        cursor = connection.execute(pool.q(_UPDATE_ENTRY), (*values, values[0], expected))
    if cursor.rowcount != 1:
        actual = _revision(pool, connection, entry.session_key)
        raise ConflictError(entry.session_key, expected_revision=expected, actual_revision=actual)
    return attrs.evolve(entry, revision=revision)


def put_entry(
    pool: Connections,
    connection: psycopg.Connection[Any],
    entry: SessionEntry,
    expected: int | None,
) -> SessionEntry:
    """The compare-and-swap ``put_entry``."""
    lock_keys(pool, connection, [entry.session_key])
    actual = _revision(pool, connection, entry.session_key)
    if actual != expected:
        raise ConflictError(entry.session_key, expected_revision=expected, actual_revision=actual)
    exists = connection.execute(
        pool.q("SELECT 1 FROM {s}.sessions WHERE id = %s FOR KEY SHARE"), (entry.session_id,)
    ).fetchone()
    if exists is None:
        raise missing_session(entry.session_id)
    return store_entry(pool, connection, entry, expected)


def delete_entry(
    pool: Connections, connection: psycopg.Connection[Any], key: str, expected: int
) -> None:
    """The compare-and-swap ``delete_entry``."""
    lock_keys(pool, connection, [key])
    cursor = connection.execute(
        pool.q("DELETE FROM {s}.entries WHERE session_key = %s AND revision = %s"),
        (enc(key), expected),
    )
    if cursor.rowcount != 1:
        actual = _revision(pool, connection, key)
        raise ConflictError(key, expected_revision=expected, actual_revision=actual)


# -- sessions --------------------------------------------------------------------------------------


def record(
    pool: Connections, connection: psycopg.Connection[Any], session_id: str
) -> SessionRecord | None:
    """The record of ``session_id``, or ``None``."""
    row = connection.execute(
        pool.q(f"SELECT {SESSION_COLUMNS} FROM {{s}}.sessions AS s WHERE s.id = %s"),
        (session_id,),
    ).fetchone()
    return None if row is None else record_from_row(row)


def check_title(
    pool: Connections, connection: psycopg.Connection[Any], candidate: SessionRecord
) -> None:
    """Refuse ``candidate``'s title if another session of its owner holds it.

    The advisory lock of the owner's title (held to the end of the transaction) makes two
    writers of one title queue, so the second sees the first's row.
    """
    if candidate.title is None:
        return
    wanted = title_key(candidate.title)
    lock = lock_id("title", pool.schema, *title_owner(candidate), wanted)
    connection.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
    rows = connection.execute(
        pool.q(
            f"SELECT {SESSION_COLUMNS} FROM {{s}}.sessions AS s "
            "WHERE s.lineage_key = %s AND s.title_key = %s AND s.id <> %s"  # lineage: indexed
        ),
        (enc(lineage_key(candidate.title)), enc(wanted), candidate.id),
    ).fetchall()
    check_title_free(candidate, [record_from_row(row) for row in rows])


def create(
    pool: Connections, connection: psycopg.Connection[Any], new: SessionRecord
) -> SessionRecord | None:
    """Insert a new session; ``None`` if the id exists (the stored row is left as it is)."""
    fresh = fresh_record(new)
    cursor = connection.execute(pool.q(INSERT_SESSION), record_values(fresh))
    if cursor.rowcount != 1:
        return None
    check_title(pool, connection, fresh)  # raising rolls the insert back
    return fresh


def end(
    pool: Connections,
    connection: psycopg.Connection[Any],
    session_id: str,
    reason: str,
    at: datetime,
) -> SessionRecord:
    """End a session unless it already ended (first reason wins); return its record."""
    connection.execute(
        pool.q(
            "UPDATE {s}.sessions SET ended_at = %s, end_reason = %s "
            "WHERE id = %s AND end_reason IS NULL"
        ),
        (at, enc(reason), session_id),
    )
    found = record(pool, connection, session_id)
    if found is None:
        raise missing_session(session_id)
    return found


# -- the rotation ----------------------------------------------------------------------------------


def _lock_sessions(
    pool: Connections, connection: psycopg.Connection[Any], plan: RotationPlan
) -> dict[str, bool]:
    """Lock every session the plan names; return id → ended, for those that exist."""
    named = [w.entry.session_id for w in plan.entries] + list(plan.require_open)
    named += [s for pair in plan.repoint for s in pair] + list(plan.reopen)
    named += [s for s, _ in plan.end] + [s for s, _ in plan.rekey]
    named += [s for s in (plan.copy_state_from, plan.copy_messages_from) if s is not None]
    named += [s for s, _ in plan.drop]
    if plan.create is not None:
        named.append(plan.create.id)
    rows = connection.execute(
        pool.q(
            "SELECT id, end_reason IS NOT NULL, revision FROM {s}.sessions "
            "WHERE id = ANY(%s::text[]) ORDER BY seq FOR UPDATE"
        ),
        (sorted(set(named)),),
    ).fetchall()
    revisions = {row[0]: int(row[2]) for row in rows}
    check_drop_revisions(plan, revisions.get)
    return {row[0]: row[1] for row in rows}


def _check_plan(
    pool: Connections, connection: psycopg.Connection[Any], plan: RotationPlan
) -> dict[str, bool]:
    """Lock what ``plan`` touches, then check its preconditions with the shared rule."""
    keys = [w.entry.session_key for w in plan.entries] + [key for key, _ in plan.delete]
    lock_keys(pool, connection, keys)
    found = _lock_sessions(pool, connection, plan)
    revisions: dict[str, int] = {}
    if keys:
        rows = connection.execute(
            pool.q(
                "SELECT session_key, revision FROM {s}.entries WHERE session_key = ANY(%s::text[])"
            ),
            ([enc(key) for key in keys],),
        ).fetchall()
        revisions = {row[0]: int(row[1]) for row in rows}
    check_plan(plan, lambda key: revisions.get(enc(key)), found.get)
    return found


def _write_entries(
    pool: Connections, connection: psycopg.Connection[Any], plan: RotationPlan
) -> list[SessionEntry]:
    """Steps 3-5 of a plan: re-point, delete, then write entries; return those written."""
    written: list[SessionEntry] = []
    moved: dict[str, int] = {}
    for source, target in plan.repoint:
        rows = connection.execute(
            pool.q(
                "UPDATE {s}.entries SET session_id = %s, revision = revision + 1 "
                f"WHERE session_id = %s RETURNING {ENTRY_COLUMNS}"
            ),
            (target, source),
        ).fetchall()
        for entry in sorted((entry_from_row(row) for row in rows), key=lambda e: e.session_key):
            moved[entry.session_key] = entry.revision
            written.append(entry)
    if plan.delete:
        connection.execute(
            pool.q("DELETE FROM {s}.entries WHERE session_key = ANY(%s::text[])"),
            ([enc(key) for key, _ in plan.delete],),
        )
    for write in plan.entries:
        expected = write.expected_revision
        key = write.entry.session_key
        if key in moved and expected is not None:
            expected = moved[key]  # a repoint in this same plan moved the key
        written.append(store_entry(pool, connection, write.entry, expected))
    return written


def apply_plan(
    pool: Connections, connection: psycopg.Connection[Any], plan: RotationPlan
) -> list[SessionEntry]:
    """Check every precondition of ``plan``, then make every change (see ``RotationPlan``)."""
    _check_plan(pool, connection, plan)
    if plan.create is not None:
        if create(pool, connection, plan.create) is None:  # created concurrently meanwhile
            raise ConflictError(session_id=plan.create.id)
        source = plan.copy_messages_from
        copied = [] if source is None else transcript(pool, connection, source)
        append(pool, connection, plan.create.id, first_messages(plan, copied), step=0)
        if plan.copy_state_from is not None:
            state_sql.copy(pool, connection, plan.copy_state_from, plan.create.id)
    if plan.reopen:
        connection.execute(
            pool.q(
                "UPDATE {s}.sessions SET ended_at = NULL, end_reason = NULL "
                "WHERE id = ANY(%s::text[])"
            ),
            (list(plan.reopen),),
        )
    written = _write_entries(pool, connection, plan)
    for session_id, key in plan.rekey:
        connection.execute(
            pool.q("UPDATE {s}.sessions SET session_key = %s WHERE id = %s"),
            (enc(key), session_id),
        )
    for session_id, reason in plan.end:
        connection.execute(
            pool.q(
                "UPDATE {s}.sessions SET ended_at = %s, end_reason = %s WHERE id = %s "
                "AND end_reason IS NULL AND NOT EXISTS "
                "(SELECT 1 FROM {s}.entries WHERE session_id = %s)"
            ),
            (plan.at, enc(reason), session_id, session_id),
        )
    if plan.drop:
        dropped = [session_id for session_id, _ in plan.drop]
        held = connection.execute(
            pool.q("SELECT session_id FROM {s}.entries WHERE session_id = ANY(%s::text[])"),
            (dropped,),
        ).fetchall()
        check_drops_unreferenced(plan, {row[0] for row in held}.__contains__)
        for session_id in dropped:
            drop_session(pool, connection, session_id)
    return written


def drop_session(pool: Connections, connection: psycopg.Connection[Any], session_id: str) -> bool:
    """Delete a session (messages and search rows cascade), state, ledger rows; orphan children."""
    cursor = connection.execute(pool.q("DELETE FROM {s}.sessions WHERE id = %s"), (session_id,))
    if cursor.rowcount == 0:
        return False
    state_sql.forget(pool, connection, session_id)
    ledger_sql.forget(pool, connection, session_id)
    connection.execute(
        pool.q("UPDATE {s}.sessions SET parent_session_id = NULL WHERE parent_session_id = %s"),
        (session_id,),
    )
    return True
