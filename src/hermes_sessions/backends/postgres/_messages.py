"""Message writes of the PostgreSQL backend, run inside the caller's transaction.

Every write first takes the session's row lock (``UPDATE sessions ... RETURNING``), which also
hands out the message ids: ids come from the session's ``next_message_id``, so concurrent
appends to one session queue on that lock and their ids increase in commit order. In the same
transaction each write keeps the ``messages`` rows, their ``message_text`` search rows, the
session's counters and last activity (and, with ``touch_at``, the activity of every key that
points at the session) in step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import attrs

from hermes_sessions import text
from hermes_sessions.backends.postgres import _state as state_sql
from hermes_sessions.backends.postgres._rows import (
    MESSAGE_COLUMNS,
    POSTGRES,
    enc,
    message_body,
    message_from_row,
)
from hermes_sessions.backends.postgres._search import documents
from hermes_sessions.backends.rules import (
    check_session_revision,
    missing_session,
    plan_append,
    revision_step,
    tool_call_count,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import datetime

    import psycopg

    from hermes_sessions.backends.postgres._pool import Connections
    from hermes_sessions.models import Message
    from hermes_sessions.results import AppendResult

__all__ = [
    "append",
    "delete",
    "lock_session",
    "replace_all",
    "replace_one",
    "set_active",
    "transcript",
]

_TAKE_IDS: Final = (
    "UPDATE {s}.sessions SET next_message_id = next_message_id + %s WHERE id = %s "
    "RETURNING seq, next_message_id - %s, revision"
)
_WRITE: Final = """WITH new_messages AS (
    INSERT INTO {s}.messages (session_seq, id, role, timestamp, active, platform_message_id,
        sender_id, tool_calls, body)
    SELECT %s, * FROM unnest(%s::bigint[], %s::text[], %s::timestamptz[], %s::boolean[],
        %s::text[], %s::text[], %s::integer[], %s::text[])
), new_text AS (
    INSERT INTO {s}.message_text (session_seq, message_id, chunk, exact, tsv)
    SELECT %s, * FROM unnest(%s::bigint[], %s::integer[], %s::boolean[], %s::tsvector[])
), counted AS (
    UPDATE {s}.sessions SET message_count = message_count + %s,
        tool_call_count = tool_call_count + %s,
        last_active_at = greatest(last_active_at, %s), revision = revision + %s
    WHERE seq = %s
)
UPDATE {s}.entries SET updated_at = greatest(updated_at, %s)
WHERE %s::timestamptz IS NOT NULL AND session_id = %s"""


def lock_session(
    pool: Connections, connection: psycopg.Connection[Any], session_id: str, ids: int = 0
) -> tuple[int, int, int]:
    """Lock the session's row and take ``ids`` message ids; return ``(seq, first id, revision)``."""
    row = connection.execute(pool.q(_TAKE_IDS), (ids, session_id, ids)).fetchone()
    if row is None:
        raise missing_session(session_id)
    return int(row[0]), int(row[1]), int(row[2])


def transcript(
    pool: Connections, connection: psycopg.Connection[Any], session_id: str
) -> list[Message]:
    """The session's active messages in order, read in the caller's transaction."""
    rows = connection.execute(
        pool.q(
            f"SELECT {MESSAGE_COLUMNS} FROM {{s}}.messages AS m JOIN {{s}}.sessions AS s "
            "ON s.seq = m.session_seq WHERE s.id = %s AND m.active ORDER BY m.id"
        ),
        (session_id,),
    ).fetchall()
    return [message_from_row(row, session_id) for row in rows]


def _known(
    pool: Connections,
    connection: psycopg.Connection[Any],
    seq: int,
    session_id: str,
    platform_ids: list[str],
) -> dict[str, Message]:
    """The stored messages of the session with these platform ids."""
    rows = connection.execute(
        pool.q(
            f"SELECT {MESSAGE_COLUMNS}, m.platform_message_id FROM {{s}}.messages AS m "
            "WHERE m.session_seq = %s AND m.platform_message_id = ANY(%s::text[])"
        ),
        (seq, [enc(platform_id) for platform_id in platform_ids]),
    ).fetchall()
    known = {}
    for row in rows:
        message = message_from_row(row, session_id)
        assert message.platform_message_id is not None  # noqa: S101  # selected by it
        known[message.platform_message_id] = message
    return known


class _Rows:
    """Column arrays of the messages and search rows one statement inserts."""

    def __init__(self) -> None:
        self.messages: list[list[Any]] = [[] for _ in range(8)]
        self.text: list[list[Any]] = [[] for _ in range(4)]

    def add(self, message: Message) -> None:
        values = (
            message.id,
            message.role,
            message.timestamp,
            message.active,
            enc(message.platform_message_id),
            enc(message.sender_id),
            tool_call_count(message),
            message_body(message),
        )
        for column, value in zip(self.messages, values, strict=True):
            column.append(value)
        for chunk, (exact, document) in enumerate(documents(text.searchable_text(message))):
            for column, value in zip(self.text, (message.id, chunk, exact, document), strict=True):
                column.append(value)


def _write(
    pool: Connections,
    connection: psycopg.Connection[Any],
    seq: int,
    session_id: str,
    rows: _Rows,
    *,
    counts: tuple[int, int],
    last_active: datetime | None,
    touch_at: datetime | None,
    step: int,
) -> None:
    connection.execute(
        pool.q(_WRITE),
        (
            seq,
            *rows.messages,
            seq,
            *rows.text,
            counts[0],
            counts[1],
            last_active,
            step,
            seq,
            touch_at,
            touch_at,
            session_id,
        ),
    )


def append(
    pool: Connections,
    connection: psycopg.Connection[Any],
    session_id: str,
    messages: Sequence[Message],
    *,
    touch_at: datetime | None = None,
    if_revision: int | None = None,
    state: Mapping[str, Mapping[str, Any]] | None = None,
    step: int | None = None,
) -> AppendResult:
    """Append ``messages`` by the redelivery rule (``rules.plan_append``); return the result.

    Unless it is a redelivery, ``if_revision`` is checked, ``state`` merged and the revision
    moved on (by ``step`` if given: a rewrite or a new session says how far).
    """
    seq, next_id, revision = lock_session(pool, connection, session_id, len(messages))
    platform_ids = [m.platform_message_id for m in messages if m.platform_message_id]
    known = _known(pool, connection, seq, session_id, platform_ids) if platform_ids else {}
    plan = plan_append(session_id, messages, known, next_id)
    if plan.result.duplicate:
        return attrs.evolve(plan.result, revision=revision)
    check_session_revision(session_id, if_revision, revision)
    if state:
        state_sql.merge(pool, connection, state)
    if step is None:
        step = revision_step(bool(plan.new), state)
    rows = _Rows()
    added = tools = 0
    for new in plan.new:
        rows.add(new)
        if new.active:
            added += 1
            tools += tool_call_count(new)
    times = [m.timestamp for m in plan.result if m.timestamp is not None]
    _write(
        pool,
        connection,
        seq,
        session_id,
        rows,
        counts=(added, tools),
        last_active=max(times, default=None),
        touch_at=touch_at,
        step=step,
    )
    return attrs.evolve(plan.result, revision=revision + step)


def _adjust(
    pool: Connections,
    connection: psycopg.Connection[Any],
    seq: int,
    count: int,
    tools: int,
    *,
    changed: bool,
) -> None:
    """Fix the counters after a rewrite; one that ``changed`` something moves the revision."""
    if count or tools or changed:
        connection.execute(
            pool.q(
                "UPDATE {s}.sessions SET message_count = message_count + %s, "
                "tool_call_count = tool_call_count + %s, revision = revision + %s WHERE seq = %s"
            ),
            (count, tools, int(changed), seq),
        )


def replace_one(
    pool: Connections,
    connection: psycopg.Connection[Any],
    session_id: str,
    message_id: int,
    message: Message,
) -> Message:
    """Replace one message's fields keeping its id; re-index it and fix the counters."""
    seq, _, _ = lock_session(pool, connection, session_id)
    new, count, tools = POSTGRES.edit(
        lambda sql, params: connection.execute(pool.q(sql), params).fetchone(),
        seq,
        message_id,
        attrs.evolve(message, session_id=session_id),
    )
    connection.execute(
        pool.q("DELETE FROM {s}.messages WHERE session_seq = %s AND id = %s"), (seq, message_id)
    )
    rows = _Rows()
    rows.add(new)
    _write(
        pool,
        connection,
        seq,
        session_id,
        rows,
        counts=(count, tools),
        last_active=None,
        touch_at=None,
        step=1,
    )
    return new


def replace_all(
    pool: Connections,
    connection: psycopg.Connection[Any],
    session_id: str,
    messages: Sequence[Message],
) -> list[Message]:
    """Swap the whole transcript of a session for ``messages`` (new ids)."""
    seq, _, _ = lock_session(pool, connection, session_id)
    connection.execute(pool.q("DELETE FROM {s}.messages WHERE session_seq = %s"), (seq,))
    connection.execute(
        pool.q("UPDATE {s}.sessions SET message_count = 0, tool_call_count = 0 WHERE seq = %s"),
        (seq,),
    )
    return list(append(pool, connection, session_id, messages, step=1))


def set_active(
    pool: Connections,
    connection: psycopg.Connection[Any],
    session_id: str,
    message_ids: Sequence[int],
    *,
    active: bool,
) -> int:
    """Soft-delete or restore messages (search rows stay); return how many changed."""
    seq, _, _ = lock_session(pool, connection, session_id)
    rows = connection.execute(
        pool.q(
            "UPDATE {s}.messages SET active = %s WHERE session_seq = %s AND active != %s "
            "AND id = ANY(%s::bigint[]) RETURNING tool_calls"
        ),
        (active, seq, active, sorted(set(message_ids))),
    ).fetchall()
    sign = 1 if active else -1
    changes = (sign * len(rows), sign * sum(row[0] for row in rows))
    _adjust(pool, connection, seq, *changes, changed=bool(rows))
    return len(rows)


def delete(
    pool: Connections,
    connection: psycopg.Connection[Any],
    session_id: str,
    message_ids: Sequence[int],
) -> int:
    """Delete messages and their search rows for good; return how many were deleted."""
    seq, _, _ = lock_session(pool, connection, session_id)
    rows = connection.execute(
        pool.q(
            "DELETE FROM {s}.messages WHERE session_seq = %s AND id = ANY(%s::bigint[]) "
            "RETURNING active, tool_calls"
        ),
        (seq, sorted(set(message_ids))),
    ).fetchall()
    count = sum(1 for row in rows if row[0])
    tools = sum(row[1] for row in rows if row[0])
    _adjust(pool, connection, seq, -count, -tools, changed=bool(rows))
    return len(rows)
