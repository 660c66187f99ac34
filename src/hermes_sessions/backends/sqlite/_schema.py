"""The SQLite backend's schema: numbered migrations, the search index, and its availability.

Every migration is a tuple of statements applied in one ``BEGIN IMMEDIATE`` transaction together
with its row in ``schema_migrations``, so a crash leaves the database at the previous version or
the next one, never between. A database whose newest migration is above :data:`SCHEMA_VERSION`
was written by a newer library and is refused (:class:`IncompatibleStoreError`).

The FTS5 table is not a migration: whether it can exist depends on the Python build reading the
file. It is created (and filled from the messages) when a build with FTS5 opens a database
without it, and marked *stale* in ``meta`` when a build without FTS5 writes to a database that
has it, so the next FTS5-capable open rebuilds it.

Times are integers: microseconds since the Unix epoch, UTC.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from hermes_sessions import text
from hermes_sessions.exceptions import IncompatibleStoreError
from hermes_sessions.serde import dump_datetime

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "BLOCK_SHIFT",
    "FTS_TABLE",
    "MIGRATIONS",
    "NO_TIME",
    "SCHEMA_VERSION",
    "applied_version",
    "apply_migration",
    "check_version",
    "from_us",
    "fts5_available",
    "fts_state",
    "mark_fts_stale",
    "message_tokens",
    "rebuild_fts",
    "to_us",
]

EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)


def to_us(moment: datetime) -> int:
    """An aware datetime as integer microseconds since the epoch."""
    return (moment - EPOCH) // _MICROSECOND


def from_us(value: int) -> datetime:
    """Integer microseconds since the epoch as an aware UTC datetime."""
    return EPOCH + timedelta(microseconds=value)


MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    # 1 — sessions, messages, the routing index and leases.
    (
        """CREATE TABLE sessions (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            source TEXT NOT NULL,
            session_key TEXT,
            user_id TEXT,
            title TEXT,
            title_key TEXT,
            lineage_key TEXT,
            parent_session_id TEXT,
            started_at INTEGER NOT NULL,
            ended_at INTEGER,
            end_reason TEXT,
            last_active_at INTEGER NOT NULL,
            message_count INTEGER NOT NULL DEFAULT 0,
            tool_call_count INTEGER NOT NULL DEFAULT 0,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            cache_read_tokens INTEGER NOT NULL DEFAULT 0,
            cache_write_tokens INTEGER NOT NULL DEFAULT 0,
            reasoning_tokens INTEGER NOT NULL DEFAULT 0,
            estimated_cost_usd REAL,
            model TEXT,
            model_config TEXT NOT NULL DEFAULT '{}',
            system_prompt TEXT,
            archived INTEGER NOT NULL DEFAULT 0,
            metadata TEXT NOT NULL DEFAULT '{}'
        )""",
        "CREATE INDEX sessions_last_active ON sessions (last_active_at, id)",
        "CREATE INDEX sessions_started ON sessions (started_at, id)",
        "CREATE INDEX sessions_key ON sessions (session_key)",
        "CREATE INDEX sessions_user ON sessions (user_id)",
        "CREATE INDEX sessions_parent ON sessions (parent_session_id)",
        "CREATE INDEX sessions_title ON sessions (lineage_key)",
        # AUTOINCREMENT: ids are never reused, even after the newest message is deleted.
        """CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_seq INTEGER NOT NULL,
            role TEXT NOT NULL,
            timestamp INTEGER,
            active INTEGER NOT NULL DEFAULT 1,
            platform_message_id TEXT,
            sender_id TEXT,
            tool_calls INTEGER NOT NULL DEFAULT 0,
            body TEXT NOT NULL
        )""",
        "CREATE INDEX messages_session ON messages (session_seq, id)",
        """CREATE UNIQUE INDEX messages_platform ON messages (session_seq, platform_message_id)
            WHERE platform_message_id IS NOT NULL""",
        "CREATE INDEX messages_sender ON messages (sender_id) WHERE sender_id IS NOT NULL",
        """CREATE TABLE entries (
            session_key TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            revision INTEGER NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            last_prompt_tokens INTEGER,
            body TEXT NOT NULL
        ) WITHOUT ROWID""",
        "CREATE INDEX entries_session ON entries (session_id)",
        """CREATE TABLE leases (
            resource TEXT PRIMARY KEY,
            holder TEXT NOT NULL,
            expires_at INTEGER NOT NULL
        ) WITHOUT ROWID""",
    ),
    # 2 — search support: index state, and message-time bounds per block of ids, which let
    # newest/oldest searches stop early while walking the full-text index in id order.
    (
        "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
        """CREATE TABLE message_blocks (
            block INTEGER PRIMARY KEY,
            min_ts INTEGER NOT NULL,
            max_ts INTEGER NOT NULL
        )""",
        """INSERT INTO message_blocks (block, min_ts, max_ts)
            SELECT id >> 12, min(coalesce(timestamp, -9223372036854775807)),
                   max(coalesce(timestamp, -9223372036854775807))
            FROM messages GROUP BY id >> 12""",
    ),
)
"""Migration ``n`` is ``MIGRATIONS[n - 1]``; append new ones, never edit applied ones."""

SCHEMA_VERSION: Final = len(MIGRATIONS)
"""The newest schema version this library knows."""

BLOCK_SHIFT: Final = 12
"""Messages ``id >> BLOCK_SHIFT`` share one row of ``message_blocks`` (4,096 ids)."""
NO_TIME: Final = -9_223_372_036_854_775_807
"""The sort value of a message without a timestamp: older than everything."""

FTS_TABLE: Final = "messages_fts"
# One column of space-joined index tokens (text.index_tokens); rowid = messages.id. The ascii
# tokenizer splits exactly at the spaces because our tokens hold no ASCII punctuation or
# upper-case letters. prefix='1' indexes first characters, so a one-character CJK query
# ("X"*, every token starting with X) reads one posting list instead of merging every bigram.
_CREATE_FTS: Final = (
    f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(tokens, tokenize='ascii', prefix='1')"
)


def applied_version(connection: sqlite3.Connection) -> int:
    """The newest migration recorded in the database (0 for a new database)."""
    exists = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    if exists is None:
        return 0
    row = connection.execute("SELECT max(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


def check_version(version: int, where: str) -> None:
    """Refuse a database written by a newer library."""
    if version > SCHEMA_VERSION:
        raise IncompatibleStoreError(where, found_version=version, supported_version=SCHEMA_VERSION)


def apply_migration(connection: sqlite3.Connection, version: int, now: datetime) -> None:
    """Run migration ``version`` inside the caller's transaction and record it."""
    connection.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        "version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    for statement in MIGRATIONS[version - 1]:
        connection.execute(statement)
    connection.execute(
        "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
        (version, dump_datetime(now)),
    )


def fts5_available(connection: sqlite3.Connection) -> bool:
    """Whether this SQLite build has FTS5 (probed once per backend, on a temporary table)."""
    try:
        connection.execute("CREATE VIRTUAL TABLE temp.hermes_fts5_probe USING fts5(x)")
    except sqlite3.OperationalError:
        return False
    connection.execute("DROP TABLE temp.hermes_fts5_probe")
    return True


def fts_state(connection: sqlite3.Connection) -> str:
    """``ready``, ``stale`` (missed writes made without FTS5) or ``missing``."""
    exists = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE name = ?", (FTS_TABLE,)
    ).fetchone()
    if exists is None:
        return "missing"
    row = connection.execute("SELECT value FROM meta WHERE name = 'fts_state'").fetchone()
    return "stale" if row is not None and row[0] == "stale" else "ready"


def mark_fts_stale(connection: sqlite3.Connection) -> None:
    """Record that messages were written without updating the FTS5 table."""
    connection.execute(
        "INSERT INTO meta (name, value) VALUES ('fts_state', 'stale') "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value"
    )


def message_tokens(searchable: str) -> str:
    """The FTS5 document of a message's searchable text: its index tokens, space-joined."""
    return " ".join(text.index_tokens(searchable))


def rebuild_fts(connection: sqlite3.Connection, tokens_of: Callable[[Any], str]) -> int:
    """Create the FTS5 table if needed and fill it from every message; return the count.

    ``tokens_of`` maps a ``(id, active, body)`` row of ``messages`` to its FTS document; it is
    passed in so that this module needs no message decoding.
    """
    if fts_state(connection) != "missing":
        connection.execute(f"DROP TABLE {FTS_TABLE}")  # faster than deleting row by row
    connection.execute(_CREATE_FTS)
    count = 0
    cursor = connection.execute("SELECT id, active, body FROM messages ORDER BY id")
    while batch := cursor.fetchmany(1000):
        connection.executemany(
            f"INSERT INTO {FTS_TABLE} (rowid, tokens) VALUES (?, ?)",
            [(row[0], tokens_of(row)) for row in batch],
        )
        count += len(batch)
    connection.execute(
        "INSERT INTO meta (name, value) VALUES ('fts_state', 'ready') "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value"
    )
    return count
