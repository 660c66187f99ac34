"""The PostgreSQL backend's schema: numbered migrations, applied once under an advisory lock.

All tables live in one schema (``hermes_sessions`` unless configured); ``{s}`` in the statements
below is replaced by its quoted name (``psycopg.sql.Identifier``). Each migration runs in its own
transaction, together with its row in ``schema_migrations``, after taking a transaction-scoped
advisory lock on the schema: several hosts starting at once wait for each other, and the second
one finds the work done. A schema whose newest migration is above :data:`SCHEMA_VERSION` was
written by a newer library and is refused (:class:`IncompatibleStoreError`).

Sessions have a surrogate key ``seq`` that every child table references, so later migrations
can add columns and tables without touching the rows that exist.

Text columns that hold identifiers compared by the library (ids, keys, platform message ids) use
the ``"C"`` collation, so ``ORDER BY`` agrees with Python's code-point order.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from hermes_sessions import __version__
from hermes_sessions.backends.postgres._pool import lock_id
from hermes_sessions.exceptions import IncompatibleStoreError

if TYPE_CHECKING:
    import psycopg

    from hermes_sessions.backends.postgres._pool import Connections

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "applied_version", "migrate"]

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    # 1 — the initial schema: sessions, messages, their search rows, the routing index, leases,
    # named values about the data, and session state.
    (
        """CREATE TABLE {s}.sessions (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id text COLLATE "C" NOT NULL UNIQUE,
            source text NOT NULL,
            session_key text COLLATE "C",
            user_id text,
            title text,
            title_key text,
            lineage_key text,
            parent_session_id text COLLATE "C",
            started_at timestamptz NOT NULL,
            ended_at timestamptz,
            end_reason text,
            last_active_at timestamptz NOT NULL,
            message_count bigint NOT NULL,
            tool_call_count bigint NOT NULL,
            input_tokens bigint NOT NULL,
            output_tokens bigint NOT NULL,
            cache_read_tokens bigint NOT NULL,
            cache_write_tokens bigint NOT NULL,
            reasoning_tokens bigint NOT NULL,
            estimated_cost_usd double precision,
            model text,
            model_config text NOT NULL,
            system_prompt text,
            archived boolean NOT NULL,
            metadata text NOT NULL,
            next_message_id bigint NOT NULL DEFAULT 1,
            revision bigint NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX sessions_last_active ON {s}.sessions (last_active_at, id)",
        "CREATE INDEX sessions_started ON {s}.sessions (started_at, id)",
        "CREATE INDEX sessions_key ON {s}.sessions (session_key)",
        "CREATE INDEX sessions_user ON {s}.sessions (user_id)",
        "CREATE INDEX sessions_parent ON {s}.sessions (parent_session_id)",
        "CREATE INDEX sessions_lineage ON {s}.sessions (lineage_key)",
        # Ids are per session (sessions.next_message_id, taken under the session's row lock), so
        # they increase in commit order within a session and are never reused.
        """CREATE TABLE {s}.messages (
            session_seq bigint NOT NULL REFERENCES {s}.sessions (seq) ON DELETE CASCADE,
            id bigint NOT NULL,
            role text NOT NULL,
            timestamp timestamptz,
            active boolean NOT NULL,
            platform_message_id text COLLATE "C",
            sender_id text,
            tool_calls integer NOT NULL,
            body text NOT NULL,
            PRIMARY KEY (session_seq, id)
        )""",
        """CREATE UNIQUE INDEX messages_platform ON {s}.messages (session_seq, platform_message_id)
            WHERE platform_message_id IS NOT NULL""",
        "CREATE INDEX messages_time ON {s}.messages (timestamp)",
        "CREATE INDEX messages_sender ON {s}.messages (sender_id) WHERE sender_id IS NOT NULL",
        # One or more rows per message: the library's index tokens as explicit lexemes with
        # positions (never PostgreSQL's parser). ``exact`` is false when the message needed
        # several chunks or truncated a long token; such rows are re-checked by the matcher.
        """CREATE TABLE {s}.message_text (
            session_seq bigint NOT NULL,
            message_id bigint NOT NULL,
            chunk integer NOT NULL,
            exact boolean NOT NULL,
            tsv tsvector NOT NULL,
            PRIMARY KEY (session_seq, message_id, chunk),
            FOREIGN KEY (session_seq, message_id)
                REFERENCES {s}.messages (session_seq, id) ON DELETE CASCADE
        )""",
        "CREATE INDEX message_text_tsv ON {s}.message_text USING gin (tsv)",
        """CREATE TABLE {s}.entries (
            session_key text COLLATE "C" PRIMARY KEY,
            session_id text COLLATE "C" NOT NULL,
            revision bigint NOT NULL,
            created_at timestamptz NOT NULL,
            updated_at timestamptz NOT NULL,
            last_prompt_tokens bigint,
            body text NOT NULL
        )""",
        "CREATE INDEX entries_session ON {s}.entries (session_id)",
        """CREATE TABLE {s}.leases (
            resource text COLLATE "C" PRIMARY KEY,
            holder text NOT NULL,
            expires_at timestamptz NOT NULL
        )""",
        # The turn ledger (SupportsLedger): accepted messages and replies to send.
        """CREATE TABLE {s}.ledger (
            kind text NOT NULL,
            id text COLLATE "C" NOT NULL,
            session_id text COLLATE "C" NOT NULL,
            session_key text COLLATE "C" NOT NULL,
            status text NOT NULL,
            updated_at timestamptz NOT NULL,
            data text NOT NULL,
            version bigint NOT NULL,
            PRIMARY KEY (kind, id)
        )""",
        "CREATE INDEX ledger_status ON {s}.ledger (kind, status, updated_at)",
        "CREATE INDEX ledger_session ON {s}.ledger (session_id)",
        # ``tokens_version`` names the token stream (text.TOKENS_VERSION) of the message_text
        # rows; while it names an older one, searches stay exact, slower, until reindex() has
        # rewritten them (``reindexed_through`` marks its progress). A new schema records the
        # current one when it is first opened.
        "CREATE TABLE {s}.meta (name text PRIMARY KEY, value text NOT NULL)",
        # Scoped memory (hermes_sessions.memory.ScopedMemory): a JSON array of entries per scope.
        """CREATE TABLE {s}.memory (
            scope text COLLATE "C" PRIMARY KEY,
            entries text NOT NULL
        )""",
        # session state: one JSON object per scope (hermes_sessions.state); every change of a
        # session's transcript or state moves its revision (if_revision=).
        """CREATE TABLE {s}.state (
            scope text COLLATE "C" PRIMARY KEY,
            value text NOT NULL
        )""",
    ),
)
"""Migration ``n`` is ``MIGRATIONS[n - 1]``; append new ones, never edit released ones.

Migration 1 is the initial schema of 0.1.0, the first release (no pre-release store is migrated)."""

SCHEMA_VERSION: Final = len(MIGRATIONS)
"""The newest schema version this library knows."""

_CREATE_LEDGER: Final = """CREATE TABLE IF NOT EXISTS {s}.schema_migrations (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL,
    library_version text NOT NULL
)"""


def applied_version(pool: Connections, connection: psycopg.Connection[Any]) -> int:
    """The newest migration recorded in the schema (0 when it has none yet)."""
    row = connection.execute(
        "SELECT to_regclass(%s)", (pool.q("{s}.schema_migrations"),)
    ).fetchone()
    if row is None or row[0] is None:
        return 0
    row = connection.execute(pool.q("SELECT max(version) FROM {s}.schema_migrations")).fetchone()
    return int(row[0] or 0) if row is not None else 0


def _check(pool: Connections, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise IncompatibleStoreError(
            pool.describe(), found_version=version, supported_version=SCHEMA_VERSION
        )


def _step(pool: Connections, connection: psycopg.Connection[Any]) -> bool:
    """Apply the next pending migration (inside the caller's transaction); ``False`` if none."""
    connection.execute("SELECT pg_advisory_xact_lock(%s)", (lock_id("migrate", pool.schema),))
    connection.execute(pool.q("CREATE SCHEMA IF NOT EXISTS {s}"))
    connection.execute(pool.q(_CREATE_LEDGER))
    version = applied_version(pool, connection)
    _check(pool, version)
    if version == SCHEMA_VERSION:
        return False
    for statement in MIGRATIONS[version]:
        connection.execute(pool.q(statement))
    connection.execute(
        pool.q(
            "INSERT INTO {s}.schema_migrations (version, applied_at, library_version) "
            "VALUES (%s, %s, %s)"
        ),
        (version + 1, datetime.now(UTC), __version__),
    )
    return True


def migrate(pool: Connections) -> int:
    """Bring the schema to :data:`SCHEMA_VERSION`; return how many migrations this call applied.

    Reads the version first without locking (the common case: nothing to do); otherwise each
    migration is one transaction under the advisory lock.
    """
    version = pool._run(lambda c: applied_version(pool, c), write=False)  # noqa: SLF001  # same package
    _check(pool, version)
    applied = 0
    while version < SCHEMA_VERSION:
        if not pool._run(lambda c: _step(pool, c)):  # noqa: SLF001  # same package
            break
        applied += 1
        version += 1
    return applied
