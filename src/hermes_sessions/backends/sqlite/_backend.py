"""SQLiteBackend: the embedded default. One ``state.db`` in WAL mode, FTS5 search, many processes.

Everything — sessions, messages, the routing index, leases and the full-text index — lives in
one database file, so a rotation, an append with its search rows and its activity, or a compare-
and-swap is one transaction (``docs/sqlite.md`` describes it all).

This class holds the options and composes the rest: ``_connections`` (transactions, retries,
group commit via ``_group``), one module of statements per table, ``_plan`` (the rotation),
``_schema`` (schema, migrations, upkeep) and ``_reindex``.
"""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs

from hermes_sessions import options
from hermes_sessions.backends.reindexing import check_batch_size, run_reindex
from hermes_sessions.backends.rules import check_message_sizes, check_state_target, check_update
from hermes_sessions.backends.sqlite import _batches
from hermes_sessions.backends.sqlite import _entries as entries_sql
from hermes_sessions.backends.sqlite import _files as files
from hermes_sessions.backends.sqlite import _leases as leases_sql
from hermes_sessions.backends.sqlite import _ledger as ledger_sql
from hermes_sessions.backends.sqlite import _lookup as lookup_sql
from hermes_sessions.backends.sqlite import _messages as messages_sql
from hermes_sessions.backends.sqlite import _plan as plan_sql
from hermes_sessions.backends.sqlite import _reindex as reindex_sql
from hermes_sessions.backends.sqlite import _schema as schema
from hermes_sessions.backends.sqlite import _search as search_sql
from hermes_sessions.backends.sqlite import _sessions as sessions_sql
from hermes_sessions.backends.sqlite import _state as state_sql
from hermes_sessions.backends.sqlite._connections import Connections
from hermes_sessions.backends.sqlite._guard import guarded
from hermes_sessions.checks import CheckProblem, CheckReport, make_report
from hermes_sessions.closing import ClosesOnExit
from hermes_sessions.exceptions import (
    CorruptRecordError,
    LockTimeoutError,
    StorageError,
)
from hermes_sessions.options import Durability
from hermes_sessions.paths import default_home
from hermes_sessions.protocols import Capabilities

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from datetime import datetime, timedelta

    from hermes_sessions.models import Message, SessionEntry, SessionRecord
    from hermes_sessions.protocols import ReindexProgress, RotationPlan
    from hermes_sessions.queries import SearchHit, SearchQuery, SessionPage, SessionQuery
    from hermes_sessions.results import AppendResult
    from hermes_sessions.usage import Usage

__all__ = ["SQLiteBackend"]

R = TypeVar("R")

DEFAULT_WAL_SIZE_LIMIT: Final = 64 * 1024 * 1024


@attrs.define(eq=False, on_setattr=attrs.setters.frozen)
class SQLiteBackend(ClosesOnExit):
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
        max_message_bytes: Refuse a message larger than this (its JSON form, in UTF-8 bytes)
            with ``MessageTooLargeError``; ``None``: no limit. 16 MiB by default.
        group_commit: Writes of threads queued while a commit is in flight share the next
            commit (``docs/sqlite.md``, "Group commit"). ``False``: one commit per write.

    The options (attributes of the same names) cannot be changed once the backend is open.

    .. versionadded:: 0.1.0
    """

    path: Path = attrs.field(converter=Path)
    durability: Durability = attrs.field(default="full", kw_only=True, validator=options.durability)
    busy_timeout: float = attrs.field(default=5.0, kw_only=True, validator=options.positive_seconds)
    retries: int = attrs.field(default=5, kw_only=True, validator=options.non_negative_int)
    wal_size_limit: int | None = attrs.field(
        default=DEFAULT_WAL_SIZE_LIMIT, kw_only=True, validator=options.optional_size
    )
    secure_delete: bool = attrs.field(
        default=True, kw_only=True, validator=attrs.validators.instance_of(bool)
    )
    max_message_bytes: int | None = attrs.field(
        default=options.DEFAULT_MAX_MESSAGE_BYTES, kw_only=True, validator=options.optional_size
    )
    group_commit: bool = attrs.field(
        default=True, kw_only=True, validator=attrs.validators.instance_of(bool)
    )
    _connections: Connections = attrs.field(init=False, on_setattr=attrs.setters.NO_OP)
    _fts: bool = attrs.field(default=True, init=False, on_setattr=attrs.setters.NO_OP)
    # Whether the FTS5 rows are known to hold the current token stream; once true, it stays so.
    _tokens_current: bool = attrs.field(default=True, init=False, on_setattr=attrs.setters.NO_OP)
    write_batch = _batches.write_batch  # SupportsWriteBatches: the async store's write batches
    ledger_rows = ledger_sql.ledger_rows  # SupportsLedger: the turn ledger
    ledger_write = ledger_sql.ledger_write

    def __attrs_post_init__(self) -> None:
        self._connections = Connections(
            self.path,
            durability=self.durability,
            busy_timeout=self.busy_timeout,
            retries=self.retries,
            wal_size_limit=self.wal_size_limit,
            secure_delete=self.secure_delete,
            group_commit=self.group_commit,
        )
        try:
            self._open()
        except sqlite3.Error as error:
            self.close()
            damaged = files.corruption(error, self.path)
            if damaged is not None:
                raise damaged from error
            raise StorageError(f"cannot open the SQLite database {self.path}: {error}") from error
        except UnicodeDecodeError as error:  # SQLite's message quotes a damaged schema name
            self.close()
            raise files.undecodable(error, self.path) from error
        except BaseException:
            self.close()
            raise

    @classmethod
    def in_home(
        cls, home: Path | str | None = None, *, durability: Durability = "full"
    ) -> SQLiteBackend:
        """Open ``<home>/state.db`` (default home: ``hermes_sessions.paths.default_home()``)."""
        base = Path(home) if home is not None else default_home()
        return cls(base / "state.db", durability=durability)

    def __repr__(self) -> str:
        state = "closed" if self._connections.closed else self.durability
        return f"<SQLiteBackend {str(self.path)!r} {state}>"

    # -- opening and closing -----------------------------------------------------------------------

    def _open(self) -> None:
        run = self._connections.run
        self._connections.create_directory()
        if self.path.exists():
            files.check_existing(self.path)
        else:
            files.create_database(self.path, self._build, sync=self.durability == "full")
        connection = self._connections.connection()
        version = run(schema.applied_version, write=False, transaction=False)
        schema.check_version(version, str(self.path))
        for pending in range(version + 1, schema.SCHEMA_VERSION + 1):
            run(functools.partial(schema.migrate, version=pending), write=True)
        self._fts, self._tokens_current = schema.open_index(
            connection, run, self.path, reindex_sql.settle
        )

    def _build(self, path: Path) -> None:
        """Set up a new database at ``path`` (a temporary name; see ``_files``)."""
        probe = sqlite3.connect(":memory:")
        try:
            fts = schema.fts5_available(probe)
        finally:
            probe.close()
        self._connections.build(path, lambda c: schema.create_schema(c, fts=fts))

    def close(self) -> None:
        """Close every connection; later calls raise ``BackendClosedError``. Idempotent."""
        self._connections.close()

    def capabilities(self) -> Capabilities:
        """Persistent, multi-process, searchable."""
        return Capabilities(persistent=True, multiprocess=True)

    def _read(self, work: Callable[[sqlite3.Connection], R]) -> R:
        """Run ``work`` in a read transaction (one consistent snapshot)."""
        return self._connections.run(work, write=False)

    def _read_once(self, work: Callable[[sqlite3.Connection], R]) -> R:
        """Run a single-statement read ``work`` without a transaction."""
        return self._connections.run(work, write=False, transaction=False)

    def _write(self, work: Callable[[sqlite3.Connection], R]) -> R:
        """Run ``work`` in a write transaction (``BEGIN IMMEDIATE``, retried while busy)."""
        return self._connections.run(work, write=True)

    # -- routing index -----------------------------------------------------------------------------

    @guarded
    def get_entry(self, key: str) -> SessionEntry | None:
        """Return the entry of ``key``, or ``None``."""
        return self._read_once(lambda c: entries_sql.entry(c, key))

    @guarded
    def entry_with_state(
        self, key: str, scope_ids: Sequence[str]
    ) -> tuple[SessionEntry | None, dict[str, dict[str, Any]]]:
        """The entry of ``key`` and the state of ``scope_ids`` and its session, in one read.

        The lookup of every message (``SessionStore.get_or_create``): one statement instead of
        :meth:`get_entry` then :meth:`get_state`. For library internals.
        """
        return self._read_once(lambda c: lookup_sql.entry_with_state(c, key, scope_ids))

    @guarded
    def put_entry(self, entry: SessionEntry, *, expected_revision: int | None) -> SessionEntry:
        """Store ``entry`` if the key's revision is ``expected_revision`` (compare-and-swap)."""

        def work(connection: sqlite3.Connection) -> SessionEntry:
            entries_sql.check_revision(connection, entry.session_key, expected_revision)
            sessions_sql.seq_of(connection, entry.session_id)
            return entries_sql.store(connection, entry, expected_revision)

        return self._write(work)

    @guarded
    def delete_entry(self, key: str, *, expected_revision: int) -> None:
        """Remove the entry of ``key`` if its revision is ``expected_revision``."""

        def work(connection: sqlite3.Connection) -> None:
            entries_sql.check_revision(connection, key, expected_revision)
            entries_sql.delete(connection, key)

        self._write(work)

    @guarded
    def entries(self, *, session_id: str | None = None) -> list[SessionEntry]:
        """Return all entries, or those pointing at ``session_id``, in key order."""
        return self._read(lambda c: entries_sql.listing(c, session_id))

    @guarded
    def record_activity(
        self, key: str, at: datetime, *, last_prompt_tokens: int | None = None
    ) -> SessionEntry | None:
        """Move ``updated_at`` forward to ``at`` without a revision check."""
        return self._write(lambda c: entries_sql.touch(c, key, at, last_prompt_tokens))

    # -- sessions ----------------------------------------------------------------------------------

    @guarded
    def create_session(self, record: SessionRecord) -> SessionRecord:
        """Store a new session; an existing id returns the stored record unchanged."""
        return self._write(lambda c: sessions_sql.create(c, record))

    @guarded
    def get_session(self, session_id: str) -> SessionRecord | None:
        """Return the record of ``session_id``, or ``None``."""
        return self._read_once(lambda c: sessions_sql.record(c, session_id))

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
        return self._write(lambda c: sessions_sql.update_fields(c, session_id, changes, amounts))

    @guarded
    def end_session(self, session_id: str, reason: str, *, at: datetime) -> SessionRecord:
        """End a session; the first reason wins."""
        return self._write(lambda c: sessions_sql.end(c, session_id, reason, at))

    @guarded
    def reopen_session(self, session_id: str) -> SessionRecord:
        """Clear a session's end."""
        return self._write(lambda c: sessions_sql.reopen(c, session_id))

    @guarded
    def delete_session(self, session_id: str) -> bool:
        """Delete a session, its messages and search rows; orphan its children."""
        return self._write(lambda c: plan_sql.drop_session(c, session_id, fts=self._fts))

    @guarded
    def list_sessions(self, query: SessionQuery) -> SessionPage:
        """Return one page of sessions matching ``query``."""
        return self._read(lambda c: sessions_sql.page(c, query))

    # -- messages ----------------------------------------------------------------------------------

    @guarded
    def append_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        touch_at: datetime | None = None,
        usage: Usage | None = None,
        state: Mapping[str, Mapping[str, Any]] | None = None,
        if_revision: int | None = None,
    ) -> AppendResult:
        """Append atomically and idempotently by platform message id; one transaction."""
        check_message_sizes(messages, self.max_message_bytes)
        check_state_target(session_id, if_revision)

        def work(connection: sqlite3.Connection) -> AppendResult:
            stored = messages_sql.append(
                connection,
                None,
                session_id,
                messages,
                fts=self._fts,
                if_revision=if_revision,
                state=state,
                usage=usage,
            )
            if touch_at is not None and not stored.duplicate:
                entries_sql.touch_session(connection, session_id, touch_at)
            return stored

        return self._write(work)

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
        """Return messages in insertion order, optionally a window of them (one statement)."""
        return self._read_once(
            lambda c: messages_sql.window(
                c,
                session_id,
                after_id=after_id,
                before_id=before_id,
                limit=limit,
                include_inactive=include_inactive,
                from_end=from_end,
            )
        )

    @guarded
    def get_message(self, session_id: str, message_id: int) -> Message | None:
        """Return one message (active or not), or ``None``."""
        return self._read_once(lambda c: messages_sql.by_id(c, session_id, message_id))

    @guarded
    def find_message(self, session_id: str, platform_message_id: str) -> Message | None:
        """Return the message with this platform id in the session, or ``None``."""
        return self._read_once(
            lambda c: messages_sql.by_platform_id(c, session_id, platform_message_id)
        )

    @guarded
    def replace_message(self, session_id: str, message_id: int, message: Message) -> Message:
        """Replace one message's fields, keeping its id; re-index it."""
        check_message_sizes([message], self.max_message_bytes)
        return self._write(
            lambda c: messages_sql.replace_one(c, session_id, message_id, message, fts=self._fts)
        )

    @guarded
    def replace_messages(self, session_id: str, messages: Sequence[Message]) -> list[Message]:
        """Replace the whole transcript atomically (new ids)."""
        check_message_sizes(messages, self.max_message_bytes)
        return self._write(
            lambda c: messages_sql.replace_all(c, session_id, messages, fts=self._fts)
        )

    @guarded
    def set_active(self, session_id: str, message_ids: Sequence[int], *, active: bool) -> int:
        """Soft-delete or restore messages; return how many changed."""
        return self._write(
            lambda c: messages_sql.set_active(c, session_id, message_ids, active=active)
        )

    @guarded
    def delete_messages(self, session_id: str, message_ids: Sequence[int]) -> int:
        """Delete messages for good (and their search rows); return how many were deleted."""
        return self._write(lambda c: messages_sql.delete(c, session_id, message_ids, fts=self._fts))

    # -- state -------------------------------------------------------------------------------------

    @guarded
    def get_state(self, scope_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Return the value of every scope in ``scope_ids`` that holds one."""
        return self._read_once(lambda c: state_sql.get(c, scope_ids)) if scope_ids else {}

    @guarded
    def state_scopes(self) -> list[str]:
        """Every scope id that holds a value, sorted."""
        rows = self._read_once(
            lambda c: c.execute("SELECT scope FROM state ORDER BY scope").fetchall()
        )
        return [row[0] for row in rows]

    @guarded
    def update_state(
        self,
        changes: Mapping[str, Mapping[str, Any]],
        *,
        session_id: str | None = None,
        if_revision: int | None = None,
    ) -> SessionRecord | None:
        """Merge ``changes`` in one transaction; through ``session_id``, move its revision."""
        check_state_target(session_id, if_revision)

        def work(connection: sqlite3.Connection) -> SessionRecord | None:
            if session_id is not None:
                state_sql.bump(connection, session_id, if_revision)
            state_sql.merge(connection, changes)
            return None if session_id is None else sessions_sql.record(connection, session_id)

        return self._write(work)

    # -- the atomic rotation -----------------------------------------------------------------------

    @guarded
    def apply(self, plan: RotationPlan) -> list[SessionEntry]:
        """Commit ``plan`` atomically: every precondition first, then every change."""
        check_message_sizes(plan.messages, self.max_message_bytes)
        return self._write(lambda c: plan_sql.apply_plan(c, plan, fts=self._fts))

    # -- leases ------------------------------------------------------------------------------------

    @guarded
    def acquire_lease(self, resource: str, holder: str, *, ttl: timedelta, now: datetime) -> bool:
        """Take or renew an exclusive lease until ``now + ttl``."""
        return self._write(
            lambda c: leases_sql.acquire(c, resource, holder, until=now + ttl, now=now)
        )

    @guarded
    def release_lease(self, resource: str, holder: str) -> None:
        """Release ``holder``'s lease on ``resource``."""
        self._write(lambda c: leases_sql.release(c, resource, holder))

    # -- search ------------------------------------------------------------------------------------

    @guarded
    def search(self, query: SearchQuery) -> list[SearchHit]:
        """Search with FTS5 (or the shared matcher without FTS5 or before a re-index)."""

        def work(connection: sqlite3.Connection) -> list[SearchHit]:
            fts = self._fts and self._current_tokens(connection)
            return search_sql.search(connection, query, fts=fts)

        return self._read(work)

    def _current_tokens(self, connection: sqlite3.Connection) -> bool:
        """Whether the FTS5 rows hold the current stream (read again until they do)."""
        if not self._tokens_current and schema.tokens_current(connection):
            self._tokens_current = True  # a re-index finished, here or in another process
        return self._tokens_current

    # -- maintenance -------------------------------------------------------------------------------

    @guarded
    def checkpoint(self, *, truncate: bool = True) -> bool:
        """Copy the write-ahead log into the database; return whether it completed.

        With ``truncate`` (default) the log file is also cut to zero bytes. Waits up to the busy
        timeout for readers of older snapshots; ``False`` means some were still reading.
        """
        return self._connections.checkpoint(truncate=truncate)

    @guarded
    def optimize(self) -> None:
        """Merge the full-text index into one segment and refresh the planner's statistics.

        Rewrites the whole FTS5 index (time and temporary WAL space in proportion to it), which
        makes searches faster after many small appends and drops deleted messages' postings.
        """
        if self._fts:
            self._write(schema.merge_fts)
        self._read_once(schema.optimize)
        self.checkpoint()

    @guarded
    def vacuum(self) -> None:
        """Rebuild the database file compactly (``VACUUM``), then truncate the WAL.

        Takes time in proportion to the database and needs as much free disk space again; other
        connections wait (or retry) meanwhile. Frees the space of deleted sessions for good.
        """
        self._connections.run_alone(schema.vacuum)
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
            return schema.build_index(connection)

        return self._write(work)

    @guarded
    def reindex_needed(self) -> bool:
        """Whether the FTS5 rows may hold an older token stream (searches scan meanwhile)."""
        return self._fts and not self._read_once(self._current_tokens)

    @guarded
    def reindex(
        self,
        *,
        progress: Callable[[ReindexProgress], None] | None = None,
        batch_size: int = 500,
    ) -> int:
        """Rewrite the FTS5 rows of an older token stream; return how many messages it rewrote.

        Resumable: each batch of ``batch_size`` messages is one transaction that also records
        how far the re-index got, so after a crash or a kill the next call continues there.
        Other connections keep reading and writing meanwhile (each batch holds the write lock
        for the time it takes to tokenize ``batch_size`` messages). ``progress`` is called
        after every batch and at the end. Returns 0 at once when the index is current; without
        FTS5 there is no index to rewrite.
        """
        size = check_batch_size(batch_size)
        if not self._fts:
            return 0
        rewritten = run_reindex(
            lambda: self._write(lambda c: reindex_sql.batch(c, size)),
            lambda: self._read(reindex_sql.counts),
            progress,
        )
        self._tokens_current = True
        return rewritten

    def check(self) -> CheckReport:
        """Verify the database, changing nothing (:class:`~.protocols.SupportsCheck`).

        ``PRAGMA integrity_check``, the full-text index against the messages, then the library's
        invariants; damage is reported, never raised. Time in proportion to the database.
        """
        try:
            storage = self._storage_problems()
        except (CorruptRecordError, StorageError) as error:
            storage = [CheckProblem("storage", str(self.path), str(error))]
        return make_report(self, storage)

    @guarded
    def _storage_problems(self) -> list[CheckProblem]:
        files.check_existing(self.path)  # an emptied or overwritten file
        return files.probe(self.path, lambda c: schema.storage_problems(c, fts=self._fts))

    def integrity_check(self) -> list[str]:
        """:meth:`check`'s problems as lines (``[]``: healthy); kept for existing callers."""
        return [str(problem) for problem in self.check().problems]
