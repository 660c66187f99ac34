"""Re-indexing on PostgreSQL: rewriting ``message_text`` rows of an older token stream in batches.

``meta.tokens_version`` names the token stream of the ``message_text`` rows. While
it names an older one, :func:`tokens_current` is false and search checks every candidate message
with the shared matcher (``_search.scan``). A re-index walks the messages in ``(session_seq, id)``
order: each batch is one transaction that takes the re-index advisory lock (two re-indexing hosts
take turns), locks the batch's session rows as every message write does (so no write of those
sessions interleaves), replaces the batch's ``message_text`` rows and records the last key in
``meta.reindexed_through``. A host killed at any point leaves whole batches behind it, and the
next :func:`batch` continues after the last one. The batch that finds nothing left records the
current version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from hermes_sessions import text
from hermes_sessions.backends.postgres._pool import lock_id
from hermes_sessions.backends.postgres._rows import message_from_row
from hermes_sessions.backends.postgres._search import documents

if TYPE_CHECKING:
    import psycopg

    from hermes_sessions.backends.postgres._pool import Connections

__all__ = ["batch", "counts", "settle", "tokens_current"]

_TOKENS: Final = "tokens_version"
_THROUGH: Final = "reindexed_through"
_PAIRS: Final = "(session_seq, {column}) IN (SELECT * FROM unnest(%s::bigint[], %s::bigint[]))"
_SET: Final = (
    "INSERT INTO {s}.meta (name, value) VALUES (%s, %s) "
    "ON CONFLICT (name) DO UPDATE SET value = excluded.value"
)


def _value(pool: Connections, connection: psycopg.Connection[Any], name: str) -> str | None:
    row = connection.execute(
        pool.q("SELECT value FROM {s}.meta WHERE name = %s"), (name,)
    ).fetchone()
    return None if row is None else str(row[0])


def tokens_current(pool: Connections, connection: psycopg.Connection[Any]) -> bool:
    """Whether the ``message_text`` rows hold the current token stream."""
    return _value(pool, connection, _TOKENS) == str(text.TOKENS_VERSION)


def _mark_current(pool: Connections, connection: psycopg.Connection[Any]) -> None:
    connection.execute(pool.q(_SET), (_TOKENS, str(text.TOKENS_VERSION)))
    connection.execute(pool.q("DELETE FROM {s}.meta WHERE name = %s"), (_THROUGH,))


def settle(pool: Connections, connection: psycopg.Connection[Any]) -> bool:
    """Whether the rows hold the current stream; a schema without messages is made current."""
    if tokens_current(pool, connection):
        return True
    if connection.execute(pool.q("SELECT 1 FROM {s}.messages LIMIT 1")).fetchone() is None:
        _mark_current(pool, connection)
        return True
    return False


def _through(pool: Connections, connection: psycopg.Connection[Any]) -> tuple[int, int]:
    value = _value(pool, connection, _THROUGH)
    if value is None:
        return 0, 0
    seq, message_id = value.split(":")
    return int(seq), int(message_id)


def counts(pool: Connections, connection: psycopg.Connection[Any]) -> tuple[int, int]:
    """``(done, total)``: messages with current rows as far as recorded, and all messages."""
    row = connection.execute(pool.q("SELECT count(*) FROM {s}.messages")).fetchone()
    total = int(row[0]) if row is not None else 0
    if tokens_current(pool, connection):
        return total, total
    row = connection.execute(
        pool.q("SELECT count(*) FROM {s}.messages WHERE (session_seq, id) <= (%s, %s)"),
        _through(pool, connection),
    ).fetchone()
    return (int(row[0]) if row is not None else 0), total


def batch(pool: Connections, connection: psycopg.Connection[Any], size: int) -> int:
    """Rewrite the ``message_text`` rows of the next ``size`` messages; 0 once current."""
    connection.execute("SELECT pg_advisory_xact_lock(%s)", (lock_id("reindex", pool.schema),))
    if tokens_current(pool, connection):
        return 0
    keys = connection.execute(
        pool.q(
            "SELECT session_seq, id FROM {s}.messages WHERE (session_seq, id) > (%s, %s) "
            "ORDER BY session_seq, id LIMIT %s"
        ),
        (*_through(pool, connection), size),
    ).fetchall()
    if not keys:
        _mark_current(pool, connection)
        return 0
    seqs, ids = [int(k[0]) for k in keys], [int(k[1]) for k in keys]
    connection.execute(
        pool.q("SELECT seq FROM {s}.sessions WHERE seq = ANY(%s) ORDER BY seq FOR UPDATE"),
        (sorted(set(seqs)),),
    )
    rows = connection.execute(
        pool.q(
            "SELECT session_seq, id, active, body FROM {s}.messages WHERE "
            + _PAIRS.format(column="id")
        ),
        (seqs, ids),
    ).fetchall()
    connection.execute(
        pool.q("DELETE FROM {s}.message_text WHERE " + _PAIRS.format(column="message_id")),
        (seqs, ids),
    )
    columns: list[list[Any]] = [[], [], [], [], []]
    for seq, message_id, active, body in rows:
        message = message_from_row((message_id, active, body), "unused")
        for chunk, (exact, document) in enumerate(documents(text.searchable_text(message))):
            values = (seq, message_id, chunk, exact, document)
            for column, value in zip(columns, values, strict=True):
                column.append(value)
    connection.execute(
        pool.q(
            "INSERT INTO {s}.message_text (session_seq, message_id, chunk, exact, tsv) "
            "SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::integer[], %s::boolean[], "
            "%s::tsvector[])"
        ),
        columns,
    )
    connection.execute(pool.q(_SET), (_THROUGH, f"{seqs[-1]}:{ids[-1]}"))
    return len(keys)
