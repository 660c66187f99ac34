"""Statements on the ``messages`` table (and the search rows and time bounds kept with it).

Every function runs inside the caller's transaction on the connection it is given; none of them
commits. Each write keeps four things in step in the same transaction: the ``messages`` rows, their
FTS5 rows (when the build has FTS5), the session's counters and last activity, and the time
bounds of ``message_blocks`` that newest/oldest searches rely on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import attrs

from hermes_sessions import text
from hermes_sessions.backends.rules import (
    check_session_revision,
    missing_session,
    plan_append,
    revision_step,
    tool_call_count,
)
from hermes_sessions.backends.sqlite import _state as state_sql
from hermes_sessions.backends.sqlite._clauses import CHUNK, in_list
from hermes_sessions.backends.sqlite._rows import (
    MESSAGE_FIELDS,
    SQLITE,
    message_body,
    message_from_row,
    messages_from_rows,
    to_us,
)
from hermes_sessions.backends.sqlite._schema import BLOCK_SHIFT, FTS_TABLE, NO_TIME, message_tokens
from hermes_sessions.backends.sqlite._sessions import seq_of, usage_sql

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Mapping, Sequence

    from hermes_sessions.models import Message
    from hermes_sessions.results import AppendResult
    from hermes_sessions.usage import Usage

__all__ = [
    "MESSAGE_COLUMNS",
    "append",
    "by_id",
    "by_platform_id",
    "delete",
    "remove_all",
    "replace_all",
    "replace_one",
    "set_active",
    "unindex",
    "window",
]

MESSAGE_COLUMNS: Final = ", ".join(f"m.{name}" for name in MESSAGE_FIELDS)
"""The columns :func:`~._rows.message_from_row` reads, from ``messages AS m``."""

_INSERT_MESSAGE: Final = (
    "INSERT INTO messages (id, session_seq, role, timestamp, active, platform_message_id, "
    "sender_id, tool_calls, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_DOCUMENT: Final = f"INSERT INTO {FTS_TABLE} (rowid, tokens) VALUES (?, ?)"


def window(
    connection: sqlite3.Connection,
    session_id: str,
    *,
    after_id: int | None,
    before_id: int | None,
    limit: int | None,
    include_inactive: bool,
    from_end: bool,
) -> list[Message]:
    """The session's messages in insertion order, or a window of them.

    One statement (the session's row number is a subquery), so it needs no read transaction;
    only an empty answer costs a second look, to tell a missing session from an empty one.
    """
    sql = (
        f"SELECT {MESSAGE_COLUMNS} FROM messages AS m "
        "WHERE m.session_seq = (SELECT seq FROM sessions WHERE id = ?)"
    )
    params: list[Any] = [session_id]
    sql += SQLITE.window(
        params,
        after_id=after_id,
        before_id=before_id,
        limit=limit,
        include_inactive=include_inactive,
        from_end=from_end,
    )
    rows = connection.execute(sql, params).fetchall()
    if not rows:
        seq_of(connection, session_id)  # SessionNotFoundError when there is no such session
        return []
    if from_end:
        rows.reverse()
    return messages_from_rows(rows, session_id)


_ONE_BY: Final = {
    column: f"SELECT {MESSAGE_COLUMNS} FROM messages AS m JOIN sessions AS s "
    f"ON s.seq = m.session_seq WHERE s.id = ? AND m.{column} = ?"
    for column in ("id", "platform_message_id")
}


def by_id(connection: sqlite3.Connection, session_id: str, message_id: int) -> Message | None:
    """One message of the session (active or not), or ``None``."""
    row = connection.execute(_ONE_BY["id"], (session_id, message_id)).fetchone()
    return None if row is None else message_from_row(row, session_id)


def by_platform_id(
    connection: sqlite3.Connection, session_id: str, platform_id: str
) -> Message | None:
    """The message of the session with this platform id, or ``None``."""
    row = connection.execute(_ONE_BY["platform_message_id"], (session_id, platform_id)).fetchone()
    return None if row is None else message_from_row(row, session_id)


def _values(message: Message, seq: int) -> tuple[Any, ...]:
    """Column values of ``messages`` for a message with its id set (in column order)."""
    moment = message.timestamp
    return (
        message.id,
        seq,
        message.role,
        None if moment is None else to_us(moment),
        int(message.active),
        message.platform_message_id,
        message.sender_id,
        tool_call_count(message),
        message_body(message),
    )


def _document(message: Message) -> tuple[int | None, str]:
    return message.id, message_tokens(text.searchable_text(message))


BLOCK_ROUNDING_US: Final = 60_000_000
"""Block time bounds are widened to whole minutes, so that appending messages in time order
rewrites a block's row about once a minute instead of on every append (a bound only needs to
be conservative; a minute of slack does not change when a newest/oldest search can stop)."""


def _widen_blocks(connection: sqlite3.Connection, blocks: Mapping[int, tuple[int, int]]) -> None:
    rows = [
        (
            block,
            low if low == NO_TIME else low - low % BLOCK_ROUNDING_US,
            high if high == NO_TIME else high + -high % BLOCK_ROUNDING_US,
        )
        for block, (low, high) in blocks.items()
    ]
    connection.executemany(
        "INSERT INTO message_blocks (block, min_ts, max_ts) VALUES (?, ?, ?) "
        "ON CONFLICT (block) DO UPDATE SET min_ts = min(min_ts, excluded.min_ts), "
        "max_ts = max(max_ts, excluded.max_ts) "
        "WHERE excluded.min_ts < min_ts OR excluded.max_ts > max_ts",
        rows,
    )


def _add_counts(
    connection: sqlite3.Connection, seq: int, count: int, tools: int, *, changed: bool = True
) -> None:
    """Fix the counters after a rewrite; one that ``changed`` something moves the revision."""
    if count or tools or changed:
        connection.execute(
            "UPDATE sessions SET message_count = message_count + ?, "
            "tool_call_count = tool_call_count + ?, revision = revision + ? WHERE seq = ?",
            (count, tools, int(changed), seq),
        )


def _known(
    connection: sqlite3.Connection, seq: int, session_id: str, platform_ids: list[str]
) -> dict[str, Message]:
    """The stored messages of the session with these platform ids."""
    known: dict[str, Message] = {}
    for start in range(0, len(platform_ids), CHUNK):
        params: list[Any] = [seq]
        sql = (
            f"SELECT {MESSAGE_COLUMNS}, m.platform_message_id FROM messages AS m "
            "WHERE m.session_seq = ? AND "
            + in_list("m.platform_message_id", platform_ids[start : start + CHUNK], params)
        )
        for row in connection.execute(sql, params):
            known[row[3]] = message_from_row(row, session_id)
    return known


def _changes(
    connection: sqlite3.Connection,
    session_id: str,
    revisions: tuple[int, int | None],
    state: Mapping[str, Mapping[str, Any]] | None,
    stores: bool,  # noqa: FBT001
) -> int:
    """Check the revision (stored, expected) and merge the state of a non-redelivery.

    Returns how far the revision moves.
    """
    check_session_revision(session_id, revisions[1], revisions[0])
    if state:
        state_sql.merge(connection, state)
    return revision_step(stores, state)


_SESSION: Final = (
    "SELECT s.seq, q.seq, s.revision FROM sessions AS s "
    "LEFT JOIN sqlite_sequence AS q ON q.name = 'messages' WHERE s.id = ?"
)
"""The session's row number and revision, and the last message id, in one statement."""
_SESSION_AND_ONE: Final = (
    f"SELECT s.seq, q.seq, s.revision, {MESSAGE_COLUMNS} FROM sessions AS s "
    "LEFT JOIN sqlite_sequence AS q ON q.name = 'messages' "
    "LEFT JOIN messages AS m ON m.session_seq = s.seq AND m.platform_message_id = ? "
    "WHERE s.id = ?"
)
""":data:`_SESSION` with the stored message of one platform id (a turn's redelivery check)."""


def _before_append(
    connection: sqlite3.Connection, seq: int | None, session_id: str, platform_ids: list[str]
) -> tuple[int, int | None, int | None, dict[str, Message]]:
    """What an append reads first: the session's row, the last id and the known messages.

    That is the session's row number, the last message id, the revision (when ``seq`` is
    looked up, else ``None``) and the stored messages of ``platform_ids``; one statement for a
    turn's batch (one platform id).
    """
    revision = None
    if seq is None and len(platform_ids) == 1:  # a turn: its one platform id read along
        row = connection.execute(_SESSION_AND_ONE, (platform_ids[0], session_id)).fetchone()
        if row is None:
            raise missing_session(session_id)
        found = {} if row[3] is None else {platform_ids[0]: message_from_row(row[3:], session_id)}
        return row[0], row[1], row[2], found
    if seq is None:
        row = connection.execute(_SESSION, (session_id,)).fetchone()
        if row is None:
            raise missing_session(session_id)
        seq, last_id, revision = row
    else:
        row = connection.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = 'messages'"
        ).fetchone()
        last_id = None if row is None else row[0]
    known = _known(connection, seq, session_id, platform_ids) if platform_ids else {}
    return seq, last_id, revision, known


def append(
    connection: sqlite3.Connection,
    seq: int | None,
    session_id: str,
    messages: Sequence[Message],
    *,
    fts: bool,
    if_revision: int | None = None,
    state: Mapping[str, Mapping[str, Any]] | None = None,
    usage: Usage | None = None,
) -> AppendResult:
    """Append ``messages`` by the redelivery rule (``rules.plan_append``); return the result.

    ``seq`` is the session's row number, or ``None`` to look it up (with the id sequence and
    the revision, in one statement: this is on the path of every turn; an unknown session
    raises ``SessionNotFoundError``; for a batch with one platform id, a turn, the same
    statement reads the stored message of that id). Only then are ``if_revision`` checked,
    ``state`` merged and the revision moved on (a session being created or rewritten gets
    neither). Ids continue from ``sqlite_sequence`` (the caller holds the write lock, so nobody
    else can take them), which lets every row go in with one ``executemany``. ``usage`` is
    added to the session's counters by the same ``UPDATE`` (not for a redelivery).
    """
    platform_ids = list(
        dict.fromkeys(m.platform_message_id for m in messages if m.platform_message_id)
    )
    seq, last_id, revision, known = _before_append(connection, seq, session_id, platform_ids)
    plan = plan_append(session_id, messages, known, (last_id or 0) + 1)
    if plan.result.duplicate:
        return attrs.evolve(plan.result, revision=revision)
    step = 0
    if revision is not None:
        step = _changes(connection, session_id, (revision, if_revision), state, bool(plan.new))
    inserts: list[tuple[Any, ...]] = []
    documents: list[tuple[int | None, str]] = []
    blocks: dict[int, tuple[int, int]] = {}
    added = tools = 0
    for new in plan.new:
        values = _values(new, seq)
        inserts.append(values)
        if fts:
            documents.append(_document(new))
        sort_time = NO_TIME if values[3] is None else values[3]
        low, high = blocks.get(values[0] >> BLOCK_SHIFT, (sort_time, sort_time))
        blocks[values[0] >> BLOCK_SHIFT] = (min(low, sort_time), max(high, sort_time))
        if new.active:
            added += 1
            tools += values[7]
    connection.executemany(_INSERT_MESSAGE, inserts)
    if documents:
        connection.executemany(_INSERT_DOCUMENT, documents)
    _widen_blocks(connection, blocks)
    times = [to_us(m.timestamp) for m in plan.result if m.timestamp is not None]
    spent, spent_params = usage_sql(usage)
    connection.execute(
        "UPDATE sessions SET message_count = message_count + ?, "
        "tool_call_count = tool_call_count + ?, last_active_at = max(last_active_at, ?), "
        f"revision = revision + ?{spent} WHERE seq = ?",  # fixed column names
        (added, tools, max(times, default=NO_TIME), step, *spent_params, seq),
    )
    if revision is None:
        return plan.result
    return attrs.evolve(plan.result, revision=revision + step)


def unindex(connection: sqlite3.Connection, ids_sql: str, params: Sequence[Any]) -> None:
    """Delete the FTS5 rows of the messages that ``ids_sql`` selects."""
    connection.execute(f"DELETE FROM {FTS_TABLE} WHERE rowid IN ({ids_sql})", list(params))


def replace_one(
    connection: sqlite3.Connection, session_id: str, message_id: int, message: Message, *, fts: bool
) -> Message:
    """Replace one message's fields keeping its id; re-index it and fix the counters."""
    seq = seq_of(connection, session_id)
    new, count, tools = SQLITE.edit(
        lambda sql, params: connection.execute(sql, params).fetchone(),
        seq,
        message_id,
        attrs.evolve(message, session_id=session_id),
    )
    values = _values(new, seq)
    connection.execute(
        "UPDATE messages SET role = ?, timestamp = ?, active = ?, platform_message_id = ?, "
        "sender_id = ?, tool_calls = ?, body = ? WHERE id = ?",
        (*values[2:], message_id),
    )
    if fts:
        unindex(connection, "?", (message_id,))
        connection.execute(_INSERT_DOCUMENT, _document(new))
    moment = NO_TIME if values[3] is None else values[3]
    _widen_blocks(connection, {message_id >> BLOCK_SHIFT: (moment, moment)})
    _add_counts(connection, seq, count, tools)
    return new


def replace_all(
    connection: sqlite3.Connection, session_id: str, messages: Sequence[Message], *, fts: bool
) -> list[Message]:
    """Swap the whole transcript of a session for ``messages`` (new ids)."""
    seq = seq_of(connection, session_id)
    remove_all(connection, seq, fts=fts)
    connection.execute(
        "UPDATE sessions SET message_count = 0, tool_call_count = 0, revision = revision + 1 "
        "WHERE seq = ?",
        (seq,),
    )
    return list(append(connection, seq, session_id, messages, fts=fts))


def remove_all(connection: sqlite3.Connection, seq: int, *, fts: bool) -> None:
    """Delete every message of session row ``seq`` and their search rows (not the counters)."""
    if fts:
        unindex(connection, "SELECT id FROM messages WHERE session_seq = ?", (seq,))
    connection.execute("DELETE FROM messages WHERE session_seq = ?", (seq,))


def set_active(
    connection: sqlite3.Connection, session_id: str, message_ids: Sequence[int], *, active: bool
) -> int:
    """Soft-delete or restore messages (search rows stay); return how many changed."""
    seq = seq_of(connection, session_id)
    ids = sorted(set(message_ids))
    changed = tools = 0
    for start in range(0, len(ids), CHUNK):
        params: list[Any] = [int(active), seq, int(active)]
        rows = connection.execute(
            "UPDATE messages SET active = ? WHERE session_seq = ? AND active != ? AND "
            + in_list("id", ids[start : start + CHUNK], params)
            + " RETURNING tool_calls",
            params,
        ).fetchall()
        changed += len(rows)
        tools += sum(row[0] for row in rows)
    sign = 1 if active else -1
    _add_counts(connection, seq, sign * changed, sign * tools, changed=changed > 0)
    return changed


def delete(
    connection: sqlite3.Connection, session_id: str, message_ids: Sequence[int], *, fts: bool
) -> int:
    """Delete messages and their search rows for good; return how many were deleted."""
    seq = seq_of(connection, session_id)
    ids = sorted(set(message_ids))
    deleted = count = tools = 0
    for start in range(0, len(ids), CHUNK):
        params: list[Any] = [seq]
        condition = "session_seq = ? AND " + in_list("id", ids[start : start + CHUNK], params)
        if fts:
            unindex(connection, f"SELECT id FROM messages WHERE {condition}", params)
        rows = connection.execute(
            f"DELETE FROM messages WHERE {condition} RETURNING active, tool_calls", params
        ).fetchall()
        deleted += len(rows)
        count += sum(row[0] for row in rows)
        tools += sum(row[1] for row in rows if row[0])
    _add_counts(connection, seq, -count, -tools, changed=deleted > 0)
    return deleted
