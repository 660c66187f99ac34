"""PostgresBackend: several gateway hosts sharing one PostgreSQL database.

Sessions, messages, their search rows, the routing index and leases live in one schema, so a
rotation, an append with its search rows and its activity, or a compare-and-swap is one
transaction. ``docs/postgres.md`` describes deployment (DSN, pool size, schema, poolers), the
concurrency model and what was measured. The pool and retries are in ``_pool``, the schema and
migrations in ``_schema``, SQL in the statement modules, row conversions in ``_rows``, search
in ``_search`` and re-indexing in ``_reindex``.
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any

import attrs

from hermes_sessions import options
from hermes_sessions.backends.postgres import _ledger as ledger_sql
from hermes_sessions.backends.postgres import _messages as writes
from hermes_sessions.backends.postgres import _reindex
from hermes_sessions.backends.postgres import _schema as schema
from hermes_sessions.backends.postgres import _state as state_sql
from hermes_sessions.backends.postgres import _statements as statements
from hermes_sessions.backends.postgres._memory import MemoryRows
from hermes_sessions.backends.postgres._pool import Connections, guarded
from hermes_sessions.backends.postgres._rows import (
    ENTRY_COLUMNS,
    MESSAGE_COLUMNS,
    POSTGRES,
    enc,
    entry_from_row,
    listing,
    message_from_row,
    messages_from_rows,
    record_values,
)
from hermes_sessions.backends.postgres._search import search as run_search
from hermes_sessions.backends.reindexing import check_batch_size, run_reindex
from hermes_sessions.backends.rules import (
    apply_update,
    check_message_sizes,
    check_session_revision,
    check_state_target,
    check_update,
    missing_session,
)
from hermes_sessions.checks import make_report
from hermes_sessions.closing import ClosesOnExit
from hermes_sessions.exceptions import BackendClosedError, InvalidArgumentError, StorageError
from hermes_sessions.protocols import Capabilities

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from datetime import datetime, timedelta

    import psycopg

    from hermes_sessions.checks import CheckReport
    from hermes_sessions.models import Message, SessionEntry, SessionRecord
    from hermes_sessions.protocols import ReindexProgress, RotationPlan
    from hermes_sessions.queries import SearchHit, SearchQuery, SessionPage, SessionQuery
    from hermes_sessions.results import AppendResult
    from hermes_sessions.usage import Usage

__all__ = ["DSN_VARIABLE", "PostgresBackend"]

DSN_VARIABLE = "HERMES_SESSIONS_DSN"
"""The environment variable :meth:`PostgresBackend.from_env` reads the DSN from."""


@attrs.define(eq=False)
class PostgresBackend(MemoryRows, Connections, ClosesOnExit):
    """Sessions, messages, routing and search in a PostgreSQL schema, shared by many hosts.

    Args:
        dsn: A libpq connection string or URI (``postgresql://user@host:5432/db``). Put the
            password in ``~/.pgpass`` or ``PGPASSWORD`` rather than in code.
        schema: The schema holding the tables (created, with its tables, on first open).
        min_size: Connections the pool keeps open (0: connect on first use).
        max_size: Most connections the pool opens; one is busy only for one call.
        timeout: Seconds a call waits for a free connection before ``StorageError``.
        connect_timeout: Seconds to wait when connecting to the server (5 by default); a DSN
            that cannot work fails the open within this, naming the server's reason.
        lock_timeout: If set, seconds a transaction waits for a row or advisory lock before it
            is retried (``SET LOCAL lock_timeout``); by default it waits as long as it takes.
        retries: Further attempts after a deadlock, serialisation failure or lock timeout
            (jittered, doubling pauses); then :class:`~hermes_sessions.exceptions.LockTimeoutError`.
        max_message_bytes: Refuse a message larger than this (its JSON form, in UTF-8 bytes)
            with ``MessageTooLargeError``; ``None``: no limit. 16 MiB by default.

    .. versionadded:: 0.1.0
    """

    max_message_bytes: int | None = attrs.field(
        default=options.DEFAULT_MAX_MESSAGE_BYTES, kw_only=True, validator=options.optional_size
    )
    """Messages larger than this (their JSON form, in UTF-8 bytes) are refused with
    ``MessageTooLargeError``; ``None``: no limit. 16 MiB by default, as on every backend."""
    migrations_applied: int = attrs.field(default=0, init=False)
    """How many migrations opening this backend applied (0 when another host already had)."""
    ledger_rows = ledger_sql.ledger_rows  # SupportsLedger: the turn ledger
    ledger_write = ledger_sql.ledger_write
    # Whether the message_text rows are known to hold the current token stream (stays true).
    _tokens_current: bool = attrs.field(default=True, init=False)

    def __attrs_post_init__(self) -> None:
        try:
            self._open_pool()
            self.migrations_applied = schema.migrate(self)
            self._tokens_current = self._run(
                lambda c: _reindex.tokens_current(self, c), write=False
            ) or self._run(lambda c: _reindex.settle(self, c))
            self._opened()
        except BaseException as error:
            self.close()
            if isinstance(error, StorageError):
                raise
            import psycopg  # noqa: PLC0415  # imported with the backend anyway

            if isinstance(error, psycopg.Error):
                raise StorageError(f"cannot open {self.describe()}: {error}") from error
            raise
        if not self._tokens_current:
            warnings.warn(
                f"the search index of {self.describe()} was written by an older version of "
                "hermes-sessions: searches stay exact but scan every message until reindex() "
                "has rewritten it",
                RuntimeWarning,
                stacklevel=3,
            )

    @classmethod
    def from_env(cls, dsn: str | None = None, **options: Any) -> PostgresBackend:
        """Open the database named by ``dsn``, else by ``$HERMES_SESSIONS_DSN``."""
        chosen = dsn if dsn is not None else os.environ.get(DSN_VARIABLE)
        if not chosen:
            raise InvalidArgumentError(
                "the postgres backend needs a DSN: pass dsn='postgresql://user@host/db' or set "
                f"{DSN_VARIABLE}"
            )
        return cls(chosen, **options)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"pool {self.min_size}-{self.max_size}"
        return f"<PostgresBackend {self.describe()} {state}>"

    def capabilities(self) -> Capabilities:
        """Persistent, multi-process (and multi-host), searchable."""
        return Capabilities(persistent=True, multiprocess=True)

    def check(self) -> CheckReport:
        """Read every row and check the library's invariants (:class:`~.protocols.SupportsCheck`).

        A row that cannot be decoded is reported with its table and key. Damage below the rows
        is the server's to detect (data checksums, ``amcheck``); see ``docs/reliability.md``.
        """
        if self._closed:
            raise BackendClosedError(self.describe())
        return make_report(self)

    def schema_version(self) -> int:
        """The newest migration applied to the schema."""
        return self._run(lambda c: schema.applied_version(self, c), write=False)

    # -- routing index -----------------------------------------------------------------------------

    @guarded
    def get_entry(self, key: str) -> SessionEntry | None:
        """Return the entry of ``key``, or ``None``."""
        sql = self.q(f"SELECT {ENTRY_COLUMNS} FROM {{s}}.entries WHERE session_key = %s")
        row = self._run(lambda c: c.execute(sql, (enc(key),)).fetchone(), write=False)
        return None if row is None else entry_from_row(row)

    @guarded
    def put_entry(self, entry: SessionEntry, *, expected_revision: int | None) -> SessionEntry:
        """Store ``entry`` if the key's revision is ``expected_revision`` (compare-and-swap)."""
        return self._run(lambda c: statements.put_entry(self, c, entry, expected_revision))

    @guarded
    def delete_entry(self, key: str, *, expected_revision: int) -> None:
        """Remove the entry of ``key`` if its revision is ``expected_revision``."""
        self._run(lambda c: statements.delete_entry(self, c, key, expected_revision))

    @guarded
    def entries(self, *, session_id: str | None = None) -> list[SessionEntry]:
        """Return all entries, or those pointing at ``session_id``, in key order."""
        sql = f"SELECT {ENTRY_COLUMNS} FROM {{s}}.entries"
        params: tuple[str, ...] = ()
        if session_id is not None:
            sql += " WHERE session_id = %s"
            params = (session_id,)
        query = self.q(sql + " ORDER BY session_key")
        rows = self._run(lambda c: c.execute(query, params).fetchall(), write=False)
        return [entry_from_row(row) for row in rows]

    @guarded
    def record_activity(
        self, key: str, at: datetime, *, last_prompt_tokens: int | None = None
    ) -> SessionEntry | None:
        """Move ``updated_at`` forward to ``at`` without a revision check."""
        sql = self.q(
            "UPDATE {s}.entries SET updated_at = greatest(updated_at, %s), "
            "last_prompt_tokens = coalesce(%s, last_prompt_tokens) WHERE session_key = %s "
            f"RETURNING {ENTRY_COLUMNS}"
        )
        row = self._run(
            lambda c: c.execute(sql, (at, last_prompt_tokens, enc(key))).fetchone(), write=False
        )
        return None if row is None else entry_from_row(row)

    # -- sessions ----------------------------------------------------------------------------------

    @guarded
    def create_session(self, record: SessionRecord) -> SessionRecord:
        """Store a new session; an existing id returns the stored record unchanged."""

        def work(connection: psycopg.Connection[Any]) -> SessionRecord:
            created = statements.create(self, connection, record)
            if created is not None:
                return created
            found = statements.record(self, connection, record.id)
            assert found is not None  # noqa: S101  # the insert found it
            return found

        return self._run(work)

    @guarded
    def get_session(self, session_id: str) -> SessionRecord | None:
        """Return the record of ``session_id``, or ``None``."""
        return self._run(lambda c: statements.record(self, c, session_id), write=False)

    @guarded
    def update_session(
        self,
        session_id: str,
        *,
        values: Mapping[str, Any] | None = None,
        increments: Mapping[str, int | float] | None = None,
    ) -> SessionRecord:
        """Set fields and add to counters atomically (the row is locked while it changes)."""
        changes, amounts = check_update(values, increments)
        return self._run(lambda c: self._update(c, session_id, changes, amounts))

    def _update(
        self,
        connection: psycopg.Connection[Any],
        session_id: str,
        changes: Mapping[str, Any],
        amounts: Mapping[str, int | float],
    ) -> SessionRecord:
        """Set fields and add to counters of one session, inside the caller's transaction."""
        writes.lock_session(self, connection, session_id)
        current = statements.record(self, connection, session_id)
        assert current is not None  # noqa: S101  # locked above
        updated = apply_update(current, changes, amounts)
        row = record_values(updated)
        names = [*changes, *amounts]
        if "title" in changes:
            statements.check_title(self, connection, updated)
            names += ["title_key", "lineage_key"]
        if names:
            assignments = ", ".join(f"{name} = %s" for name in names)
            connection.execute(
                self.q(f"UPDATE {{s}}.sessions SET {assignments} WHERE id = %s"),
                [row[name] for name in names] + [session_id],
            )
        return updated

    @guarded
    def end_session(self, session_id: str, reason: str, *, at: datetime) -> SessionRecord:
        """End a session; the first reason wins."""
        return self._run(lambda c: statements.end(self, c, session_id, reason, at))

    @guarded
    def reopen_session(self, session_id: str) -> SessionRecord:
        """Clear a session's end."""

        def work(connection: psycopg.Connection[Any]) -> SessionRecord:
            connection.execute(
                self.q("UPDATE {s}.sessions SET ended_at = NULL, end_reason = NULL WHERE id = %s"),
                (session_id,),
            )
            found = statements.record(self, connection, session_id)
            if found is None:
                raise missing_session(session_id)
            return found

        return self._run(work)

    @guarded
    def delete_session(self, session_id: str) -> bool:
        """Delete a session, its messages and search rows; orphan its children."""
        return self._run(lambda c: statements.drop_session(self, c, session_id))

    @guarded
    def list_sessions(self, query: SessionQuery) -> SessionPage:
        """Return one page of sessions matching ``query``."""
        sql, params = listing(query)
        rendered = self.q(sql)
        rows = self._run(lambda c: c.execute(rendered, params).fetchall(), write=False)
        return POSTGRES.page(query, rows)

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

        def work(connection: psycopg.Connection[Any]) -> AppendResult:
            result = writes.append(
                self,
                connection,
                session_id,
                messages,
                touch_at=touch_at,
                if_revision=if_revision,
                state=state,
            )
            if usage is not None and not result.duplicate:
                self._add_usage(connection, session_id, usage)
            return result

        return self._run(work)

    def _add_usage(
        self, connection: psycopg.Connection[Any], session_id: str, usage: Usage
    ) -> None:
        """Add a turn's usage to its session in one statement (the session is locked already).

        The counters are added in SQL (``coalesce(column, 0) + amount``) rather than read,
        added and written back: one round trip instead of three on the path of every turn.
        """
        values, amounts = usage.values(), usage.increments()
        assignments = [f"{name} = coalesce({name}, 0) + %s" for name in amounts]
        assignments += [f"{name} = %s" for name in values]
        if assignments:
            connection.execute(
                self.q(f"UPDATE {{s}}.sessions SET {', '.join(assignments)} WHERE id = %s"),
                [*amounts.values(), *values.values(), session_id],
            )

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
        inner = "SELECT m.id, m.active, m.body FROM {s}.messages AS m WHERE m.session_seq = s.seq"
        params: list[Any] = []
        inner += POSTGRES.window(
            params,
            after_id=after_id,
            before_id=before_id,
            limit=limit,
            include_inactive=include_inactive,
            from_end=from_end,
        )
        sql = self.q(
            f"SELECT m.id, m.active, m.body FROM {{s}}.sessions AS s LEFT JOIN LATERAL ({inner}) "
            "AS m ON true WHERE s.id = %s ORDER BY m.id"
        )
        rows = self._run(lambda c: c.execute(sql, [*params, session_id]).fetchall(), write=False)
        if not rows:
            raise missing_session(session_id)
        if rows[0][0] is None:  # the session exists and has no message in the window
            return []
        return messages_from_rows(rows, session_id)

    def _one_message(
        self, condition: str, params: tuple[Any, ...], session_id: str
    ) -> Message | None:
        sql = self.q(
            f"SELECT {MESSAGE_COLUMNS} FROM {{s}}.messages AS m JOIN {{s}}.sessions AS s "
            f"ON s.seq = m.session_seq WHERE s.id = %s AND {condition}"
        )
        row = self._run(lambda c: c.execute(sql, (session_id, *params)).fetchone(), write=False)
        return None if row is None else message_from_row(row, session_id)

    @guarded
    def get_message(self, session_id: str, message_id: int) -> Message | None:
        """Return one message (active or not), or ``None``."""
        return self._one_message("m.id = %s", (message_id,), session_id)

    @guarded
    def find_message(self, session_id: str, platform_message_id: str) -> Message | None:
        """Return the message with this platform id in the session, or ``None``."""
        return self._one_message(
            "m.platform_message_id = %s", (enc(platform_message_id),), session_id
        )

    @guarded
    def replace_message(self, session_id: str, message_id: int, message: Message) -> Message:
        """Replace one message's fields, keeping its id; re-index it."""
        check_message_sizes([message], self.max_message_bytes)
        return self._run(lambda c: writes.replace_one(self, c, session_id, message_id, message))

    @guarded
    def replace_messages(self, session_id: str, messages: Sequence[Message]) -> list[Message]:
        """Replace the whole transcript atomically (new ids)."""
        check_message_sizes(messages, self.max_message_bytes)
        return self._run(lambda c: writes.replace_all(self, c, session_id, messages))

    @guarded
    def set_active(self, session_id: str, message_ids: Sequence[int], *, active: bool) -> int:
        """Soft-delete or restore messages; return how many changed."""
        return self._run(
            lambda c: writes.set_active(self, c, session_id, message_ids, active=active)
        )

    @guarded
    def delete_messages(self, session_id: str, message_ids: Sequence[int]) -> int:
        """Delete messages for good (and their search rows); return how many were deleted."""
        return self._run(lambda c: writes.delete(self, c, session_id, message_ids))

    # -- state -------------------------------------------------------------------------------------

    @guarded
    def get_state(self, scope_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Return the value of every scope in ``scope_ids`` that holds one."""
        if not scope_ids:
            return {}
        return self._run(lambda c: state_sql.get(self, c, scope_ids), write=False)

    @guarded
    def state_scopes(self) -> list[str]:
        """Every scope id that holds a value, sorted."""
        return self._run(lambda c: state_sql.scopes(self, c), write=False)

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

        def work(connection: psycopg.Connection[Any]) -> SessionRecord | None:
            if session_id is not None:
                _, _, revision = writes.lock_session(self, connection, session_id)
                check_session_revision(session_id, if_revision, revision)
                connection.execute(
                    self.q("UPDATE {s}.sessions SET revision = revision + 1 WHERE id = %s"),
                    (session_id,),
                )
            state_sql.merge(self, connection, changes)
            return None if session_id is None else statements.record(self, connection, session_id)

        return self._run(work)

    # -- the atomic rotation -----------------------------------------------------------------------

    @guarded
    def apply(self, plan: RotationPlan) -> list[SessionEntry]:
        """Commit ``plan`` atomically: lock, check every precondition, then make every change."""
        check_message_sizes(plan.messages, self.max_message_bytes)
        return self._run(lambda c: statements.apply_plan(self, c, plan))

    # -- leases ------------------------------------------------------------------------------------

    @guarded
    def acquire_lease(self, resource: str, holder: str, *, ttl: timedelta, now: datetime) -> bool:
        """Take or renew an exclusive lease until ``now + ttl`` (one atomic statement)."""
        sql = self.q(
            "INSERT INTO {s}.leases AS l (resource, holder, expires_at) VALUES (%s, %s, %s) "
            "ON CONFLICT (resource) DO UPDATE SET holder = excluded.holder, "
            "expires_at = excluded.expires_at "
            "WHERE l.holder = excluded.holder OR l.expires_at <= %s RETURNING 1"
        )
        params = (enc(resource), enc(holder), now + ttl, now)
        row = self._run(lambda c: c.execute(sql, params).fetchone(), write=False)
        return row is not None

    @guarded
    def release_lease(self, resource: str, holder: str) -> None:
        """Release ``holder``'s lease on ``resource``."""
        sql = self.q("DELETE FROM {s}.leases WHERE resource = %s AND holder = %s")
        self._run(lambda c: c.execute(sql, (enc(resource), enc(holder))), write=False)

    # -- search ------------------------------------------------------------------------------------

    @guarded
    def search(self, query: SearchQuery) -> list[SearchHit]:
        """Search the ``tsvector`` index (see ``_search``), in one repeatable-read snapshot."""

        def work(connection: psycopg.Connection[Any]) -> list[SearchHit]:
            current = self._current_tokens(connection)
            return run_search(self, connection, query, current=current)

        return self._run(work)

    def _current_tokens(self, connection: psycopg.Connection[Any]) -> bool:
        """Whether the search rows hold the current stream (read again until they do)."""
        if not self._tokens_current and _reindex.tokens_current(self, connection):
            self._tokens_current = True  # a re-index finished, on this host or another
        return self._tokens_current

    # -- re-indexing -------------------------------------------------------------------------------

    @guarded
    def reindex_needed(self) -> bool:
        """Whether the search rows may hold an older token stream (searches scan meanwhile)."""
        return not self._run(self._current_tokens, write=False)

    @guarded
    def reindex(
        self,
        *,
        progress: Callable[[ReindexProgress], None] | None = None,
        batch_size: int = 500,
    ) -> int:
        """Rewrite the search rows of an older token stream; return how many messages it rewrote.

        Resumable: each batch of ``batch_size`` messages is one transaction that also records
        how far the re-index got, so after a crash, a kill or a lost connection the next call
        (on any host) continues there; hosts keep reading and writing meanwhile, and writes to
        the sessions of a batch wait for it. ``progress`` is called after every batch and at
        the end. Returns 0 at once when the rows are current.
        """
        size = check_batch_size(batch_size)
        rewritten = run_reindex(
            lambda: self._run(lambda c: _reindex.batch(self, c, size)),
            lambda: self._run(lambda c: _reindex.counts(self, c)),
            progress,
        )
        self._tokens_current = True
        return rewritten
