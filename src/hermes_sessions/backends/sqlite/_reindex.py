"""Re-indexing on SQLite: rewriting FTS5 rows of an older token stream, in resumable batches.

The ``meta`` table records the token stream of the FTS5 rows (``tokens_version``, see
``_schema``). While it names an older version, search scans with the shared matcher (exact, and
slower) and a re-index rewrites the rows in id order: each batch is one write transaction that
reads the messages after ``reindexed_through``, replaces their FTS5 rows and moves
``reindexed_through`` to the last id, so a process killed at any point leaves the index either
before or after a whole batch, and the next :func:`batch` continues from there. Messages written
meanwhile already get current rows; the batches rewrite them again, harmlessly. The last batch,
finding nothing after ``reindexed_through``, records the current version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_sessions.backends.sqlite._schema import (
    FTS_TABLE,
    THROUGH_KEY,
    mark_tokens_current,
    row_tokens,
    tokens_current,
)

if TYPE_CHECKING:
    import sqlite3

__all__ = ["batch", "counts", "settle"]


def _through(connection: sqlite3.Connection) -> int:
    row = connection.execute("SELECT value FROM meta WHERE name = ?", (THROUGH_KEY,)).fetchone()
    return 0 if row is None else int(row[0])


def settle(connection: sqlite3.Connection) -> bool:
    """Whether the index holds the current stream; an index of no messages is made current."""
    if tokens_current(connection):
        return True
    if connection.execute("SELECT 1 FROM messages LIMIT 1").fetchone() is None:
        mark_tokens_current(connection)
        return True
    return False


def counts(connection: sqlite3.Connection) -> tuple[int, int]:
    """``(done, total)``: messages with current rows as far as recorded, and all messages."""
    total = int(connection.execute("SELECT count(*) FROM messages").fetchone()[0])
    if tokens_current(connection):
        return total, total
    done = connection.execute(
        "SELECT count(*) FROM messages WHERE id <= ?", (_through(connection),)
    ).fetchone()[0]
    return int(done), total


def batch(connection: sqlite3.Connection, size: int) -> int:
    """Rewrite the FTS5 rows of the next ``size`` messages; 0 when the index is current."""
    if tokens_current(connection):
        return 0
    through = _through(connection)
    rows = connection.execute(
        "SELECT id, active, body FROM messages WHERE id > ? ORDER BY id LIMIT ?", (through, size)
    ).fetchall()
    if not rows:
        mark_tokens_current(connection)
        return 0
    documents = [(row[0], row_tokens(row)) for row in rows]
    connection.executemany(f"DELETE FROM {FTS_TABLE} WHERE rowid = ?", [(r[0],) for r in rows])
    connection.executemany(f"INSERT INTO {FTS_TABLE} (rowid, tokens) VALUES (?, ?)", documents)
    connection.execute(
        "INSERT INTO meta (name, value) VALUES (?, ?) "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        (THROUGH_KEY, str(rows[-1][0])),
    )
    return len(rows)
