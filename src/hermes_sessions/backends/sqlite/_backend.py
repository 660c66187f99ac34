"""SQLiteBackend: the embedded default. One ``state.db`` in WAL mode, FTS5 search, many processes.

Everything — sessions, messages, the routing index, leases and the full-text index — lives in
one database file, so a rotation, an append with its search rows and its activity, or a compare-
and-swap is one transaction. ``docs/sqlite.md`` describes opening, durability, the concurrency
model, maintenance and search internals; the schema is in ``_sqlite_schema``, row conversions in
``_sqlite_rows`` and search in ``_sqlite_search``.

Concurrency: each thread gets its own connection (threads of one process also queue on one lock
for writes, so they wait in order instead of polling); processes coordinate through SQLite's
locks. Every write is ``BEGIN IMMEDIATE`` … ``COMMIT``, retried with jittered backoff when the
database stays busy longer than the busy timeout; readers never block writers (WAL).
"""

from __future__ import annotations

import functools
import sqlite3
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from hermes_sessions.backends.rules import apply_update, check_update
from hermes_sessions.backends.sqlite import _messages as writes
from hermes_sessions.backends.sqlite import _schema as schema
from hermes_sessions.backends.sqlite import _statements as statements
from hermes_sessions.backends.sqlite._connections import Connections, Durability, guarded
from hermes_sessions.backends.sqlite._rows import (
    ENTRY_COLUMNS,
    MESSAGE_COLUMNS,
    SESSION_WIDTH,
    entry_from_row,
    listing,
    message_from_row,
    preview_of,
    record_from_row,
    record_row,
)
from hermes_sessions.backends.sqlite._search import search as run_search
from hermes_sessions.closing import ClosesOnExit
from hermes_sessions.exceptions import (
    LockTimeoutError,
    SessionNotFoundError,
    StorageError,
)
from hermes_sessions.protocols import Capabilities
from hermes_sessions.queries import SessionPage, SessionSummary, encode_cursor

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import datetime, timedelta

    from hermes_sessions.models import Message, SessionEntry, SessionRecord
    from hermes_sessions.protocols import RotationPlan
    from hermes_sessions.queries import SearchHit, SearchQuery, SessionQuery

__all__ = ["SQLiteBackend"]


@attrs.define(eq=False)
class SQLiteBackend(Connections, ClosesOnExit):
    """Sessions, messages, routing and search in one SQLite database (WAL, FTS5).

    Args:
        path: The database file (created 0600, its directory 0700, if missing). The store
            uses ``<home>/state.db``; :meth:`in_home` opens that.
        durability: ``"full"`` (default): every acknowledged write survives a power failure
            (an fsync per commit). ``"normal"``: survives a crash of the process, not of the
            machine; faster.
        busy_timeout: Seconds SQLite waits for another connection's lock before an attempt
            fails.
        retries: Further attempts (after jittered backoff) when an attempt timed out; after the
            last one the call raises :class:`~hermes_sessions.exceptions.LockTimeoutError`.
        wal_size_limit: When the write-ahead log grows past this many bytes, a writer runs a
            truncating checkpoint after its commit (``None``: leave it to SQLite's automatic
            checkpoints).
        secure_delete: Overwrite deleted content with zeros (``PRAGMA secure_delete``), so
            deleted text does not linger in free space; see :meth:`scrub`.

    .. versionadded:: 0.1.0
    """

    _fts: bool = attrs.field(default=True, init=False)

    def __attrs_post_init__(self) -> None:
        try:
            self._open()
        except sqlite3.Error as error:
            self.close()
            raise StorageError(f"cannot open the SQLite database {self.path}: {error}") from error
        except BaseException:
            self.close()
            raise

    @classmethod
    def in_home(
        cls, home: Path | str | None = None, *, durability: Durability = "full"
    ) -> SQLiteBackend:
        """Open ``<home>/state.db`` (default home: ``hermes_sessions.paths.default_home()``)."""
        from hermes_sessions.paths import default_home  # noqa: PLC0415  # resolved when opened

        base = Path(home) if home is not None else default_home()
        return cls(base / "state.db", durability=durability)

    def __repr__(self) -> str:
        state = "closed" if self._closed else self.durability
        return f"<SQLiteBackend {str(self.path)!r} {state}>"

    # -- opening and connections -------------------------------------------------------------------

    def _open(self) -> None:
        self._create_files()
        connection = self._run(lambda c: c, write=False, transaction=False)
        version = self._run(schema.applied_version, write=False, transaction=False)
        schema.check_version(version, str(self.path))
        for pending in range(version + 1, schema.SCHEMA_VERSION + 1):
            self._run(functools.partial(statements.migrate, version=pending), write=True)
        self._fts = schema.fts5_available(connection)
        if self._fts:
            if schema.fts_state(connection) != "ready":
                self._run(statements.build_index, write=True)
        else:
            warnings.warn(
                f"this Python's SQLite has no FTS5: {self.path} keeps working, but search "
                "scans every message with the shared matcher (slow on large stores)",
                RuntimeWarning,
                stacklevel=4,
            )
            if schema.fts_state(connection) == "ready":
                self._run(schema.mark_fts_stale, write=True)

    # -- lifecycle ---------------------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        """Persistent, multi-process, searchable."""
        return Capabilities(persistent=True, multiprocess=True)

    # -- routing index -----------------------------------------------------------------------------

    @guarded
    def get_entry(self, key: str) -> SessionEntry | None:
        """Return the entry of ``key``, or ``None``."""
        return self._run(lambda c: statements.entry(c, key), write=False, transaction=False)

    @guarded
    def put_entry(self, entry: SessionEntry, *, expected_revision: int | None) -> SessionEntry:
        """Store ``entry`` if the key's revision is ``expected_revision`` (compare-and-swap)."""

        def work(connection: sqlite3.Connection) -> SessionEntry:
            statements.check_revision(connection, entry.session_key, expected_revision)
            writes.session_seq(connection, entry.session_id)
            return statements.store_entry(connection, entry, expected_revision)

        return self._run(work, write=True)

    @guarded
    def delete_entry(self, key: str, *, expected_revision: int) -> None:
        """Remove the entry of ``key`` if its revision is ``expected_revision``."""

        def work(connection: sqlite3.Connection) -> None:
            statements.check_revision(connection, key, expected_revision)
            connection.execute("DELETE FROM entries WHERE session_key = ?", (key,))

        self._run(work, write=True)

    @guarded
    def entries(self, *, session_id: str | None = None) -> list[SessionEntry]:
        """Return all entries, or those pointing at ``session_id``, in key order."""
        sql = f"SELECT {ENTRY_COLUMNS} FROM entries"
        params: tuple[str, ...] = ()
        if session_id is not None:
            sql += " WHERE session_id = ?"
            params = (session_id,)
        sql += " ORDER BY session_key"
        rows = self._run(lambda c: c.execute(sql, params).fetchall(), write=False)
        return [entry_from_row(row) for row in rows]

    @guarded
    def record_activity(
        self, key: str, at: datetime, *, last_prompt_tokens: int | None = None
    ) -> SessionEntry | None:
        """Move ``updated_at`` forward to ``at`` without a revision check."""

        def work(connection: sqlite3.Connection) -> SessionEntry | None:
            row = connection.execute(
                "UPDATE entries SET updated_at = max(updated_at, ?), "
                "last_prompt_tokens = coalesce(?, last_prompt_tokens) WHERE session_key = ? "
                f"RETURNING {ENTRY_COLUMNS}",
                (schema.to_us(at), last_prompt_tokens, key),
            ).fetchone()
            return None if row is None else entry_from_row(row)

        return self._run(work, write=True)

    # -- sessions ----------------------------------------------------------------------------------

    @guarded
    def create_session(self, record: SessionRecord) -> SessionRecord:
        """Store a new session; an existing id returns the stored record unchanged."""
        return self._run(lambda c: statements.create(c, record), write=True)

    @guarded
    def get_session(self, session_id: str) -> SessionRecord | None:
        """Return the record of ``session_id``, or ``None``."""
        return self._run(lambda c: statements.record(c, session_id), write=False, transaction=False)

    @guarded
    def update_session(
        self,
        session_id: str,
        *,
        values: Mapping[str, Any] | None = None,
        increments: Mapping[str, int | float] | None = None,
    ) -> SessionRecord:
        """Set fields and add to counters atomically."""
        changes, amounts = check_update(values, increments)

        def work(connection: sqlite3.Connection) -> SessionRecord:
            updated = apply_update(statements.existing(connection, session_id), changes, amounts)
            row = record_row(updated)
            names = [*changes, *amounts]
            if "title" in changes:
                names += ["title_key", "lineage_key"]
            assignments = ", ".join(f"{name} = ?" for name in names)
            connection.execute(
                f"UPDATE sessions SET {assignments} WHERE id = ?",
                [row[name] for name in names] + [session_id],
            )
            return updated

        return self._run(work, write=True)

    @guarded
    def end_session(self, session_id: str, reason: str, *, at: datetime) -> SessionRecord:
        """End a session; the first reason wins."""
        return self._run(lambda c: statements.end(c, session_id, reason, at), write=True)

    @guarded
    def reopen_session(self, session_id: str) -> SessionRecord:
        """Clear a session's end."""
        return self._run(lambda c: statements.reopen(c, session_id), write=True)

    @guarded
    def delete_session(self, session_id: str) -> bool:
        """Delete a session, its messages and search rows; orphan its children."""

        def work(connection: sqlite3.Connection) -> bool:
            try:
                seq = writes.session_seq(connection, session_id)
            except SessionNotFoundError:
                return False
            if self._fts:
                writes.unindex(connection, "SELECT id FROM messages WHERE session_seq = ?", (seq,))
            connection.execute("DELETE FROM messages WHERE session_seq = ?", (seq,))
            connection.execute("DELETE FROM sessions WHERE seq = ?", (seq,))
            connection.execute(
                "UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id = ?",
                (session_id,),
            )
            return True

        return self._run(work, write=True)

    @guarded
    def list_sessions(self, query: SessionQuery) -> SessionPage:
        """Return one page of sessions matching ``query``."""
        sql, params = listing(query)
        rows = self._run(lambda c: c.execute(sql, params).fetchall(), write=False)
        more = query.limit is not None and len(rows) > query.limit
        rows = rows[: query.limit] if more else rows
        items = [
            SessionSummary(record=record_from_row(row), preview=preview_of(row[SESSION_WIDTH]))
            for row in rows
        ]
        cursor = None
        if more:
            last = items[-1].record
            cursor = encode_cursor(query.sort_value(last), last.id)
        return SessionPage(items=items, next_cursor=cursor)

    # -- messages ----------------------------------------------------------------------------------

    @guarded
    def append_messages(
        self, session_id: str, messages: Sequence[Message], *, touch_at: datetime | None = None
    ) -> list[Message]:
        """Append atomically and idempotently by platform message id; one transaction."""

        def work(connection: sqlite3.Connection) -> list[Message]:
            stored = writes.append(connection, None, session_id, messages, fts=self._fts)
            if touch_at is not None:
                connection.execute(
                    "UPDATE entries SET updated_at = max(updated_at, ?) WHERE session_id = ?",
                    (schema.to_us(touch_at), session_id),
                )
            return stored

        return self._run(work, write=True)

    @guarded
    def get_messages(
        self,
        session_id: str,
        *,
        after_id: int | None = None,
        before_id: int | None = None,
        limit: int | None = None,
        include_inactive: bool = False,
        from_end: bool = False,
    ) -> list[Message]:
        """Return messages in insertion order, optionally a window of them."""
        sql = f"SELECT {MESSAGE_COLUMNS} FROM messages AS m WHERE m.session_seq = ?"
        params: list[Any] = []
        if after_id is not None:
            sql += " AND m.id > ?"
            params.append(after_id)
        if before_id is not None:
            sql += " AND m.id < ?"
            params.append(before_id)
        if not include_inactive:
            sql += " AND m.active = 1"
        sql += " ORDER BY m.id DESC" if from_end else " ORDER BY m.id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)

        def work(connection: sqlite3.Connection) -> list[Any]:
            seq = writes.session_seq(connection, session_id)
            return connection.execute(sql, [seq, *params]).fetchall()

        rows = self._run(work, write=False)
        if from_end:
            rows.reverse()
        return [message_from_row(row, session_id) for row in rows]

    @guarded
    def get_message(self, session_id: str, message_id: int) -> Message | None:
        """Return one message (active or not), or ``None``."""
        row = self._run(
            lambda c: c.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages AS m JOIN sessions AS s "
                "ON s.seq = m.session_seq WHERE s.id = ? AND m.id = ?",
                (session_id, message_id),
            ).fetchone(),
            write=False,
            transaction=False,
        )
        return None if row is None else message_from_row(row, session_id)

    @guarded
    def find_message(self, session_id: str, platform_message_id: str) -> Message | None:
        """Return the message with this platform id in the session, or ``None``."""
        row = self._run(
            lambda c: c.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages AS m JOIN sessions AS s "
                "ON s.seq = m.session_seq WHERE s.id = ? AND m.platform_message_id = ?",
                (session_id, platform_message_id),
            ).fetchone(),
            write=False,
            transaction=False,
        )
        return None if row is None else message_from_row(row, session_id)

    @guarded
    def replace_message(self, session_id: str, message_id: int, message: Message) -> Message:
        """Replace one message's fields, keeping its id; re-index it."""
        return self._run(
            lambda c: writes.replace_one(c, session_id, message_id, message, fts=self._fts),
            write=True,
        )

    @guarded
    def replace_messages(self, session_id: str, messages: Sequence[Message]) -> list[Message]:
        """Replace the whole transcript atomically (new ids)."""
        return self._run(
            lambda c: writes.replace_all(c, session_id, messages, fts=self._fts), write=True
        )

    @guarded
    def set_active(self, session_id: str, message_ids: Sequence[int], *, active: bool) -> int:
        """Soft-delete or restore messages; return how many changed."""
        return self._run(
            lambda c: writes.set_active(c, session_id, message_ids, active=active), write=True
        )

    @guarded
    def delete_messages(self, session_id: str, message_ids: Sequence[int]) -> int:
        """Delete messages for good (and their search rows); return how many were deleted."""
        return self._run(
            lambda c: writes.delete(c, session_id, message_ids, fts=self._fts), write=True
        )

    # -- the atomic rotation -----------------------------------------------------------------------

    @guarded
    def apply(self, plan: RotationPlan) -> list[SessionEntry]:
        """Commit ``plan`` atomically: every precondition first, then every change."""
        return self._run(lambda c: statements.apply_plan(c, plan, fts=self._fts), write=True)

    # -- leases ------------------------------------------------------------------------------------

    @guarded
    def acquire_lease(self, resource: str, holder: str, *, ttl: timedelta, now: datetime) -> bool:
        """Take or renew an exclusive lease until ``now + ttl``."""

        def work(connection: sqlite3.Connection) -> bool:
            row = connection.execute(
                "SELECT holder, expires_at FROM leases WHERE resource = ?", (resource,)
            ).fetchone()
            if row is not None and row[0] != holder and row[1] > schema.to_us(now):
                return False
            connection.execute(
                "INSERT OR REPLACE INTO leases (resource, holder, expires_at) VALUES (?, ?, ?)",
                (resource, holder, schema.to_us(now + ttl)),
            )
            return True

        return self._run(work, write=True)

    @guarded
    def release_lease(self, resource: str, holder: str) -> None:
        """Release ``holder``'s lease on ``resource``."""
        self._run(
            lambda c: c.execute(
                "DELETE FROM leases WHERE resource = ? AND holder = ?", (resource, holder)
            ),
            write=True,
        )

    # -- search ------------------------------------------------------------------------------------

    @guarded
    def search(self, query: SearchQuery) -> list[SearchHit]:
        """Search with FTS5 (or the shared matcher when this build has no FTS5)."""
        return self._run(lambda c: run_search(c, query, fts=self._fts), write=False)

    # -- maintenance -------------------------------------------------------------------------------

    @guarded
    def checkpoint(self, *, truncate: bool = True) -> bool:
        """Copy the write-ahead log into the database; return whether it completed.

        With ``truncate`` (default) the log file is also cut to zero bytes. Waits up to the busy
        timeout for readers of older snapshots; ``False`` means some were still reading.
        """
        mode = "TRUNCATE" if truncate else "PASSIVE"
        wait = int(self.busy_timeout * 1000)
        with self._write_lock:
            return self._checkpoint(self._connection(), mode, wait_ms=wait)

    @guarded
    def optimize(self) -> None:
        """Merge the full-text index into one segment and refresh the planner's statistics.

        Rewrites the whole FTS5 index (time and temporary WAL space in proportion to it), which
        makes searches faster after many small appends and drops deleted messages' postings.
        """
        if self._fts:
            self._run(
                lambda c: c.execute(
                    f"INSERT INTO {schema.FTS_TABLE} ({schema.FTS_TABLE}) VALUES ('optimize')"
                ),
                write=True,
            )
        self._run(lambda c: c.execute("PRAGMA optimize"), write=False, transaction=False)
        self.checkpoint()

    @guarded
    def vacuum(self) -> None:
        """Rebuild the database file compactly (``VACUUM``), then truncate the WAL.

        Takes time in proportion to the database and needs as much free disk space again; other
        connections wait (or retry) meanwhile. Frees the space of deleted sessions for good.
        """
        with self._write_lock:
            self._attempts(lambda c: c.execute("VACUUM"), None)
        self.checkpoint()

    @guarded
    def scrub(self) -> None:
        """Make deleted text unrecoverable from the files (for erasure requests).

        Merges the full-text index (so deleted messages' tokens leave it), overwrites freed
        space (``VACUUM`` when the backend was opened with ``secure_delete=False``), then
        checkpoints and truncates the WAL, which still holds old page images. Costs an
        :meth:`optimize` (plus a :meth:`vacuum` without ``secure_delete``).
        """
        self.optimize()
        if not self.secure_delete:
            self.vacuum()
        if not self.checkpoint():
            raise LockTimeoutError(f"{self.path}-wal", self.busy_timeout)

    @guarded
    def rebuild_index(self) -> int:
        """Rebuild the full-text index from the messages; return how many were indexed.

        Needed after upgrading Python to one with a newer Unicode version (tokens may change).
        """
        if not self._fts:
            return 0

        def work(connection: sqlite3.Connection) -> int:
            schema.mark_fts_stale(connection)
            return statements.build_index(connection)

        return self._run(work, write=True)

    @guarded
    def integrity_check(self) -> list[str]:
        """Check the file, the full-text index and the counters; return the problems found.

        An empty list means healthy. Reads everything: time in proportion to the database.
        """
        problems: list[str] = []

        def work(connection: sqlite3.Connection) -> None:
            rows = connection.execute("PRAGMA integrity_check").fetchall()
            problems.extend(str(row[0]) for row in rows if row[0] != "ok")
            problems.extend(statements.index_problems(connection, fts=self._fts))

        self._run(work, write=False)
        return problems
