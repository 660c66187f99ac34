"""The SQLite backend's schema: numbered migrations, the search index, integrity and upkeep.

Every migration is a tuple of statements applied in one ``BEGIN IMMEDIATE`` transaction together
with its row in ``schema_migrations``, so a crash leaves the database at the previous version or
the next one, never between. A database whose newest migration is above :data:`SCHEMA_VERSION`
was written by a newer library and is refused (:class:`IncompatibleStoreError`).

The FTS5 table is not a migration: whether it can exist depends on the Python build reading the
file. It is created (and filled from the messages) when a build with FTS5 opens a database
without it, and marked *stale* in ``meta`` when a build without FTS5 writes to a database that
has it, so the next FTS5-capable open rebuilds it. ``meta`` also records which token stream
(:data:`text.TOKENS_VERSION`) the FTS5 rows hold; ``_reindex`` rewrites rows of an older one.

Times are integers: microseconds since the Unix epoch, UTC.
"""

from __future__ import annotations

import sqlite3
import warnings
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from hermes_sessions import text
from hermes_sessions.backends.sqlite._rows import message_from_row
from hermes_sessions.exceptions import IncompatibleStoreError
from hermes_sessions.serde import dump_datetime

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from hermes_sessions.checks import CheckProblem

__all__ = [
    "BLOCK_SHIFT",
    "FTS_TABLE",
    "MIGRATIONS",
    "NO_TIME",
    "SCHEMA_VERSION",
    "THROUGH_KEY",
    "TOKENS_KEY",
    "applied_version",
    "apply_migration",
    "build_index",
    "check_version",
    "create_schema",
    "fts5_available",
    "fts_state",
    "mark_fts_stale",
    "mark_tokens_current",
    "merge_fts",
    "message_tokens",
    "migrate",
    "open_index",
    "optimize",
    "rebuild_fts",
    "row_tokens",
    "storage_problems",
    "tokens_current",
    "vacuum",
]

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    # 1 — the initial schema: sessions, messages, the routing index, leases, the turn ledger,
    # session state, search support (index state, and message-time bounds per block of ids,
    # which let newest/oldest searches stop early while walking the full-text index in id order).
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
            metadata TEXT NOT NULL DEFAULT '{}',
            revision INTEGER NOT NULL DEFAULT 0
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
        # The turn ledger (SupportsLedger): accepted messages and replies to send.
        """CREATE TABLE ledger (
            kind TEXT NOT NULL,
            id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            session_key TEXT NOT NULL,
            status TEXT NOT NULL,
            updated_at INTEGER NOT NULL,
            data TEXT NOT NULL,
            version INTEGER NOT NULL,
            PRIMARY KEY (kind, id)
        ) WITHOUT ROWID""",
        "CREATE INDEX ledger_status ON ledger (kind, status, updated_at)",
        "CREATE INDEX ledger_session ON ledger (session_id)",
        "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
        """CREATE TABLE message_blocks (
            block INTEGER PRIMARY KEY,
            min_ts INTEGER NOT NULL,
            max_ts INTEGER NOT NULL
        )""",
        # session state: one JSON object per scope (hermes_sessions.state); every change of a
        # session's transcript or state moves its revision (if_revision=).
        "CREATE TABLE state (scope TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
    ),
)
"""Migration ``n`` is ``MIGRATIONS[n - 1]``; append new ones, never edit released ones.

Migration 1 is the initial schema of 0.1.0, the first release (no pre-release store is migrated)."""

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


TOKENS_KEY: Final = "tokens_version"
"""The ``meta`` row naming the :data:`text.TOKENS_VERSION` of the FTS5 rows."""
THROUGH_KEY: Final = "reindexed_through"
"""The ``meta`` row of a re-index under way: every message id up to it is rewritten."""


def tokens_current(connection: sqlite3.Connection) -> bool:
    """Whether the FTS5 rows hold the current token stream (:data:`text.TOKENS_VERSION`)."""
    row = connection.execute("SELECT value FROM meta WHERE name = ?", (TOKENS_KEY,)).fetchone()
    return row is not None and row[0] == str(text.TOKENS_VERSION)


def mark_tokens_current(connection: sqlite3.Connection) -> None:
    """Record that every FTS5 row holds the current token stream; end any re-index."""
    connection.execute(
        "INSERT INTO meta (name, value) VALUES (?, ?) "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        (TOKENS_KEY, str(text.TOKENS_VERSION)),
    )
    connection.execute("DELETE FROM meta WHERE name = ?", (THROUGH_KEY,))


def message_tokens(searchable: str) -> str:
    """The FTS5 document of a message's searchable text: its index tokens, space-joined."""
    return " ".join(text.index_tokens(searchable))


def rebuild_fts(connection: sqlite3.Connection) -> int:
    """Create the FTS5 table if needed and fill it from every message; return the count."""
    if fts_state(connection) != "missing":
        connection.execute(f"DROP TABLE {FTS_TABLE}")  # faster than deleting row by row
    connection.execute(_CREATE_FTS)
    count = 0
    cursor = connection.execute("SELECT id, active, body FROM messages ORDER BY id")
    while batch := cursor.fetchmany(1000):
        connection.executemany(
            f"INSERT INTO {FTS_TABLE} (rowid, tokens) VALUES (?, ?)",
            [(row[0], row_tokens(row)) for row in batch],
        )
        count += len(batch)
    connection.execute(
        "INSERT INTO meta (name, value) VALUES ('fts_state', 'ready') "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value"
    )
    mark_tokens_current(connection)
    return count


def row_tokens(row: Sequence[Any]) -> str:
    """The FTS5 document of an ``(id, active, body)`` row of ``messages``."""
    return message_tokens(text.searchable_text(message_from_row(row, "unused")))


def migrate(connection: sqlite3.Connection, *, version: int) -> None:
    """Apply migration ``version`` unless another process already did."""
    current = applied_version(connection)
    check_version(current, "the database")
    if current < version:
        apply_migration(connection, version, datetime.now(UTC))


def create_schema(connection: sqlite3.Connection, *, fts: bool) -> None:
    """Set up a new, empty database in the caller's transaction: every migration, the index."""
    now = datetime.now(UTC)
    for version in range(1, SCHEMA_VERSION + 1):
        apply_migration(connection, version, now)
    if fts:
        rebuild_fts(connection)


def build_index(connection: sqlite3.Connection) -> int:
    """Create or refill the FTS5 table unless it is ready; return how many messages it indexed."""
    if fts_state(connection) == "ready":  # another process built it meanwhile
        return 0
    return rebuild_fts(connection)


# -- integrity and upkeep --------------------------------------------------------------------------


def storage_problems(connection: sqlite3.Connection, *, fts: bool) -> list[CheckProblem]:
    """What SQLite's own check and the full-text index report (``check()`` adds the rest)."""
    from hermes_sessions.checks import CheckProblem  # noqa: PLC0415  # only when checking

    problems = [
        CheckProblem("storage", "PRAGMA integrity_check", str(row[0]))
        for row in connection.execute("PRAGMA integrity_check").fetchall()
        if row[0] != "ok"
    ]
    if not fts:
        return problems
    table = FTS_TABLE
    try:
        connection.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")
    except sqlite3.DatabaseError as error:
        problems.append(CheckProblem("index", table, f"{error}; run rebuild_index()"))
    missing = connection.execute(
        f"SELECT count(*) FROM messages WHERE id NOT IN (SELECT rowid FROM {table})"
    ).fetchone()[0]
    orphans = connection.execute(
        f"SELECT count(*) FROM {table} WHERE rowid NOT IN (SELECT id FROM messages)"
    ).fetchone()[0]
    if missing or orphans:
        problems.append(
            CheckProblem(
                "index",
                table,
                f"{missing} messages unindexed, {orphans} rows without a message; "
                "run rebuild_index()",
            )
        )
    if not tokens_current(connection):
        problems.append(
            CheckProblem(
                "index",
                table,
                "written by an older tokenizer, so searches scan every message; "
                "run reindex() (or `hermes-sessions reindex`)",
            )
        )
    return problems


def open_index(
    connection: sqlite3.Connection,
    run: Callable[..., Any],
    path: Path,
    settle: Callable[[sqlite3.Connection], bool],
) -> tuple[bool, bool]:
    """Bring the full-text index of a database being opened up to date, or mark it stale.

    ``run`` runs work as ``Connections.run`` does; ``settle`` ends a finished re-index.

    Returns whether FTS5 is available and whether the index holds the current token stream;
    warns (for the caller of the backend's constructor) when search will be slow.
    """
    if not fts5_available(connection):
        warnings.warn(
            f"this Python's SQLite has no FTS5: {path} keeps working, but search "
            "scans every message with the shared matcher (slow on large stores)",
            RuntimeWarning,
            stacklevel=5,
        )
        if fts_state(connection) == "ready":
            run(mark_fts_stale, write=True)
        return False, True
    if fts_state(connection) != "ready":
        run(build_index, write=True)
    current = bool(run(tokens_current, write=False, transaction=False) or run(settle, write=True))
    if not current:
        warnings.warn(
            f"the search index of {path} was written by an older version of "
            "hermes-sessions: searches stay exact but scan every message until "
            "reindex() (or `hermes-sessions reindex`) has rewritten it",
            RuntimeWarning,
            stacklevel=5,
        )
    return True, current


def merge_fts(connection: sqlite3.Connection) -> None:
    """Merge the FTS5 index into one segment (drops deleted messages' postings)."""
    connection.execute(f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}) VALUES ('optimize')")


def optimize(connection: sqlite3.Connection) -> None:
    """Refresh the query planner's statistics (``PRAGMA optimize``)."""
    connection.execute("PRAGMA optimize")


def vacuum(connection: sqlite3.Connection) -> None:
    """Rebuild the database file compactly (outside any transaction)."""
    connection.execute("VACUUM")
