"""JSONLBackend: human-readable files, one per session, shared safely by several processes.

A data directory holds ``sessions/<session_id>.jsonl`` (a header with the session record, then
one line per message or metadata change), ``journal.jsonl`` (every write, in order) and
``routing.jsonl`` (the routing index as of the last compaction). ``docs/jsonl.md`` describes
the files, the locking and the crash-recovery protocol.

Each process keeps every entry and session summary in memory, and the transcripts it used
last; it opens from the snapshot and journal alone and catches up from the files before every
call, reading only what other processes wrote since; writes take one directory-wide lock.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import attrs

from hermes_sessions import options
from hermes_sessions.backends.jsonl import _ledger, _state
from hermes_sessions.backends.jsonl._check import storage_problems
from hermes_sessions.backends.jsonl._engine import DirectoryEngine
from hermes_sessions.backends.jsonl._journal import (
    Delete,
    Lease,
    NewSession,
    Plan,
    Put,
    Release,
    Touch,
)
from hermes_sessions.backends.jsonl._listing import summary_page
from hermes_sessions.backends.jsonl._removal import commit_plan, remove_session
from hermes_sessions.backends.jsonl._repair import BACKUPS, DroppedLine, RepairReport, repair
from hermes_sessions.backends.jsonl._session_records import Active, End, Reopen, Update
from hermes_sessions.backends.memtables import Transcript, resolve_plan
from hermes_sessions.backends.rules import (
    apply_update,
    check_message_sizes,
    check_title_free,
    check_update,
    first_messages,
    fresh_record,
    lease_is_free,
    missing_session,
    session_scope,
    touched_entry,
)
from hermes_sessions.checks import make_report
from hermes_sessions.closing import ClosesOnExit
from hermes_sessions.exceptions import BackendClosedError, HermesSessionsError, StorageError
from hermes_sessions.ids import validate_session_id
from hermes_sessions.options import Durability
from hermes_sessions.protocols import Capabilities

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Mapping, Sequence
    from datetime import datetime, timedelta

    from hermes_sessions.checks import CheckReport
    from hermes_sessions.models import JSONObject, Message, SessionEntry, SessionRecord
    from hermes_sessions.protocols import RotationPlan
    from hermes_sessions.queries import SearchHit, SearchQuery, SessionPage, SessionQuery
    from hermes_sessions.results import AppendResult
    from hermes_sessions.usage import Usage

__all__ = ["DroppedLine", "JSONLBackend", "RepairReport"]

P = ParamSpec("P")
R = TypeVar("R")


def _wrapped(method: Callable[P, R]) -> Callable[P, R]:
    """Wrap file-system errors in ``StorageError`` (library errors pass through)."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except HermesSessionsError:
            raise
        except OSError as error:
            raise StorageError(f"JSONL backend: {error}") from error

    return wrapper


def _optional_count(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        options.positive_int(instance, attribute, value)


def _open_engine(backend: JSONLBackend) -> DirectoryEngine:
    engine = DirectoryEngine(
        backend.directory,
        sync_writes=backend.durability == "full",
        lock_timeout=backend.lock_timeout,
        compact_threshold=backend.compact_threshold,
        cache_sessions=backend.cache_sessions,
    )
    return engine.open()


@attrs.define(eq=False, repr=False, on_setattr=attrs.setters.frozen)
class JSONLBackend(ClosesOnExit):
    """Stores sessions as JSON Lines files in ``directory``; several processes may share it.

    Options are checked before anything is created; then the directory is created (``0700``) if
    missing and read. Raises ``CorruptRecordError`` (with file and line) if a file is malformed
    and ``IncompatibleStoreError`` if a newer library wrote it; :meth:`repair` fixes the first.

    .. versionadded:: 0.1.0
    """

    directory: Path = attrs.field(converter=Path)
    """The data directory (created ``0700`` if missing)."""
    durability: Durability = attrs.field(default="full", kw_only=True, validator=options.durability)
    """``"full"`` (default) fsyncs every write before it returns, so nothing acknowledged is lost
    even on power failure; ``"normal"`` skips the fsyncs: still safe when a process crashes, but
    the last writes may be lost if the machine does."""
    lock_timeout: float = attrs.field(
        default=30.0,
        kw_only=True,
        validator=options.seconds,
    )
    """Seconds to wait for the directory lock before ``LockTimeoutError``."""
    compact_threshold: int = attrs.field(
        default=10_000, kw_only=True, validator=options.positive_int
    )
    """The journal is compacted into ``routing.jsonl`` once it holds more records than this or
    than the number of entries plus sessions, whichever is larger (so compaction costs stay
    proportional to the writes that caused them)."""
    max_message_bytes: int | None = attrs.field(
        default=options.DEFAULT_MAX_MESSAGE_BYTES, kw_only=True, validator=options.optional_size
    )
    """Messages larger than this (their JSON form, in UTF-8 bytes) are refused with
    ``MessageTooLargeError``; ``None``: no limit. 16 MiB by default, as on every backend."""
    cache_sessions: int | None = attrs.field(default=1_000, kw_only=True, validator=_optional_count)
    """How many transcripts each process keeps in memory at most (the least recently used are
    dropped and read again when needed); ``None``: every one. Opening reads no session file."""
    _engine: DirectoryEngine = attrs.field(init=False, on_setattr=attrs.setters.NO_OP)
    ledger_rows = _ledger.ledger_rows  # SupportsLedger: the turn ledger
    ledger_write = _ledger.ledger_write

    def __attrs_post_init__(self) -> None:
        self._engine = _wrapped(_open_engine)(self)

    def __repr__(self) -> str:
        state = "closed" if self._engine.closed else self.durability
        return f"<JSONLBackend {str(self.directory)!r} {state}>"

    # -- lifecycle ---------------------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        """Persistent, multi-process, searchable."""
        return Capabilities(persistent=True, multiprocess=True)

    def close(self) -> None:
        """Release the journal and the cache; later calls raise ``BackendClosedError``."""
        self._engine.close()

    @_wrapped
    def compact(self) -> None:
        """Compact the journal into ``routing.jsonl`` now (it also happens automatically)."""
        with self._engine.writing():
            self._engine.compact()

    @_wrapped
    def scrub(self) -> None:
        """Leave nothing of deleted data in the files (for erasure requests).

        Rewrites every session file from its current state (dropping superseded headers,
        updates and deleted or replaced lines), compacts the journal into the routing snapshot
        (dropping old entries and plans), and deletes ``repair()`` backups, which hold copies of
        old files. Costs a rewrite of the whole directory.
        """
        with self._engine.writing() as state:
            for session_id in list(state.sessions):
                self._rewrite(state.transcript(session_id).copy())
            self._engine.compact()
        shutil.rmtree(self.directory / BACKUPS, ignore_errors=True)

    @classmethod
    def repair(
        cls, directory: str | os.PathLike[str], *, lock_timeout: float = 30.0
    ) -> RepairReport:
        """Repair a damaged data directory, keeping a backup of every file it changes.

        Unreadable lines are dropped (readable ones are all kept), torn last lines cut, files
        without a readable header moved to the backup, the routing index rebuilt if needed and
        entries pointing at missing sessions dropped. Returns what was done; see
        ``docs/jsonl.md`` for exactly what can be lost. Safe while other processes use the
        directory: they reload what changed.
        """
        return _wrapped(repair)(Path(directory), lock_timeout=lock_timeout)

    def check(self) -> CheckReport:
        """Verify the directory, changing nothing (:class:`~.protocols.SupportsCheck`).

        The CRC32 and order of every line, the journal against the session files, then the
        library's invariants; damage is reported, never raised (see ``docs/reliability.md``).
        """
        if self._engine.closed:
            raise BackendClosedError(f"JSONL backend on {self.directory}")
        storage = _wrapped(storage_problems)(self.directory, lock_timeout=self.lock_timeout)
        return make_report(self, storage)

    # -- routing index -----------------------------------------------------------------------------

    @_wrapped
    def get_entry(self, key: str) -> SessionEntry | None:
        """Return the entry of ``key``, or ``None``."""
        with self._engine.reading() as state:
            return state.table.get(key)

    @_wrapped
    def put_entry(self, entry: SessionEntry, *, expected_revision: int | None) -> SessionEntry:
        """Store ``entry`` if the key's revision is ``expected_revision`` (compare-and-swap)."""
        with self._engine.writing() as state:
            state.table.check_revision(entry.session_key, expected_revision)
            if entry.session_id not in state.sessions:
                raise missing_session(entry.session_id)
            stored = attrs.evolve(entry, revision=(expected_revision or 0) + 1)
            self._engine.log(Put(self._engine.next_tx, stored))
            stored_entry = self._engine.state.table.get(entry.session_key)
            assert stored_entry is not None  # noqa: S101  # just written
            return stored_entry

    @_wrapped
    def delete_entry(self, key: str, *, expected_revision: int) -> None:
        """Remove the entry of ``key`` if its revision is ``expected_revision``."""
        with self._engine.writing() as state:
            state.table.check_revision(key, expected_revision)
            self._engine.log(Delete(self._engine.next_tx, key))

    @_wrapped
    def entries(self, *, session_id: str | None = None) -> list[SessionEntry]:
        """Return all entries, or those pointing at ``session_id``, in key order."""
        with self._engine.reading() as state:
            return state.table.listing(session_id)

    @_wrapped
    def record_activity(
        self, key: str, at: datetime, *, last_prompt_tokens: int | None = None
    ) -> SessionEntry | None:
        """Move ``updated_at`` forward to ``at`` without a revision check (one small append)."""
        with self._engine.writing() as state:
            entry = state.table.get(key)
            if entry is None or touched_entry(entry, at, last_prompt_tokens) == entry:
                return entry
            tx = self._engine.next_tx
            self._engine.log(Touch(tx, at, key=key, last_prompt_tokens=last_prompt_tokens))
            return self._engine.state.table.get(key)

    # -- sessions ----------------------------------------------------------------------------------

    @_wrapped
    def create_session(self, record: SessionRecord) -> SessionRecord:
        """Store a new session; an existing id returns the stored record unchanged."""
        with self._engine.writing() as state:
            existing = state.sessions.get(record.id)
            if existing is not None:
                return existing.record
            check_title_free(record, _state.records(state))
            self._engine.create(self._engine.next_tx, NewSession(fresh_record(record), 1))
            return self._engine.state.sessions[record.id].record

    @_wrapped
    def get_session(self, session_id: str) -> SessionRecord | None:
        """Return the record of ``session_id``, or ``None``."""
        validate_session_id(session_id)
        with self._engine.reading() as state:
            cached = state.sessions.get(session_id)
            return None if cached is None else cached.record

    @_wrapped
    def update_session(
        self,
        session_id: str,
        *,
        values: Mapping[str, Any] | None = None,
        increments: Mapping[str, int | float] | None = None,
    ) -> SessionRecord:
        """Set fields and add to counters atomically (one appended ``update`` line)."""
        changes, amounts = check_update(values, increments)
        validate_session_id(session_id)
        with self._engine.writing() as state:
            cached = _state.session_file(state, session_id)
            updated = apply_update(cached.record, changes, amounts)
            if "title" in changes:
                check_title_free(updated, _state.records(state))
            if changes or amounts:
                stored = {name: getattr(updated, name) for name in changes}
                self._write(session_id, [Update(self._engine.next_tx, stored, amounts)])
            return self._engine.state.sessions[session_id].record

    @_wrapped
    def end_session(self, session_id: str, reason: str, *, at: datetime) -> SessionRecord:
        """End a session; the first reason wins."""
        validate_session_id(session_id)
        with self._engine.writing() as state:
            if not _state.session_file(state, session_id).record.is_ended:
                self._write(session_id, [End(self._engine.next_tx, reason, at)])
            return self._engine.state.sessions[session_id].record

    @_wrapped
    def reopen_session(self, session_id: str) -> SessionRecord:
        """Clear a session's end."""
        validate_session_id(session_id)
        with self._engine.writing() as state:
            if _state.session_file(state, session_id).record.is_ended:
                self._write(session_id, [Reopen(self._engine.next_tx)])
            return self._engine.state.sessions[session_id].record

    @_wrapped
    def delete_session(self, session_id: str) -> bool:
        """Delete a session's file and its search rows; orphan its children."""
        validate_session_id(session_id)
        with self._engine.writing() as state:
            if session_id not in state.sessions:
                return False
            remove_session(self._engine, state, session_id)
            return True

    @_wrapped
    def list_sessions(self, query: SessionQuery) -> SessionPage:
        """Return one page of sessions matching ``query``."""
        with self._engine.reading() as state:
            return summary_page(query, state.sessions.values())

    # -- messages ----------------------------------------------------------------------------------

    @_wrapped
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
        """Append atomically and idempotently (one write of whole lines, announced first).

        ``state`` rides on the journal record that announces the lines: applied exactly when
        they all arrived.
        """
        validate_session_id(session_id)
        check_message_sizes(messages, self.max_message_bytes)
        with self._engine.writing():
            return _state.append(
                self._engine,
                session_id,
                messages,
                touch_at=touch_at,
                usage=usage,
                state_changes=state,
                if_revision=if_revision,
            )

    # -- state -------------------------------------------------------------------------------------

    @_wrapped
    def get_state(self, scope_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Return the value of every scope in ``scope_ids`` that holds one."""
        with self._engine.reading() as cache:
            return _state.read_state(cache, scope_ids)

    @_wrapped
    def state_scopes(self) -> list[str]:
        """Every scope id that holds a value, sorted."""
        with self._engine.reading() as cache:
            return sorted(s for s in cache.scopes if not _ledger.is_ledger_scope(s))

    @_wrapped
    def update_state(
        self,
        changes: Mapping[str, Mapping[str, Any]],
        *,
        session_id: str | None = None,
        if_revision: int | None = None,
    ) -> SessionRecord | None:
        """Merge ``changes`` atomically; through ``session_id``, check and bump its revision."""
        if session_id is not None:
            validate_session_id(session_id)
        with self._engine.writing():
            return _state.update_state(
                self._engine, changes, session_id=session_id, if_revision=if_revision
            )

    @_wrapped
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
        validate_session_id(session_id)
        with self._engine.reading() as state:
            return state.transcript(session_id).select(
                after_id=after_id,
                before_id=before_id,
                limit=limit,
                include_inactive=include_inactive,
                from_end=from_end,
            )

    @_wrapped
    def get_message(self, session_id: str, message_id: int) -> Message | None:
        """Return one message (active or not), or ``None``."""
        validate_session_id(session_id)
        with self._engine.reading() as state:
            cached = state.sessions.get(session_id)
            return None if cached is None else state.transcript(session_id).messages.get(message_id)

    @_wrapped
    def find_message(self, session_id: str, platform_message_id: str) -> Message | None:
        """Return the message with this platform id in the session, or ``None``."""
        validate_session_id(session_id)
        with self._engine.reading() as state:
            cached = state.sessions.get(session_id)
            if cached is None:
                return None
            transcript = state.transcript(session_id)
            message_id = transcript.by_platform_id.get(platform_message_id)
            return None if message_id is None else transcript.messages[message_id]

    @_wrapped
    def replace_message(self, session_id: str, message_id: int, message: Message) -> Message:
        """Replace one message, keeping its id (the file is rewritten: the old text is gone)."""
        validate_session_id(session_id)
        check_message_sizes([message], self.max_message_bytes)
        with self._engine.writing() as state:
            copy = state.transcript(session_id).copy()
            copy.replace(message_id, message)
            copy.bump()
            self._rewrite(copy)
            return self._engine.state.transcript(session_id).messages[message_id]

    @_wrapped
    def replace_messages(self, session_id: str, messages: Sequence[Message]) -> list[Message]:
        """Replace the whole transcript atomically (new ids; the file is rewritten)."""
        validate_session_id(session_id)
        check_message_sizes(messages, self.max_message_bytes)
        with self._engine.writing() as state:
            copy = state.transcript(session_id).copy()
            copy.clear()
            plan = copy.prepare(messages)
            copy.add(plan.new)
            copy.bump()
            self._rewrite(copy)
            stored = self._engine.state.transcript(session_id).messages
            return [stored[message.id or 0] for message in plan.result]

    @_wrapped
    def set_active(self, session_id: str, message_ids: Sequence[int], *, active: bool) -> int:
        """Soft-delete or restore messages (one appended line); return how many changed."""
        validate_session_id(session_id)
        with self._engine.writing() as state:
            messages = state.transcript(session_id).messages
            changed = tuple(
                message_id
                for message_id in sorted(set(message_ids))
                if message_id in messages and messages[message_id].active != active
            )
            if changed:
                self._write(session_id, [Active(self._engine.next_tx, changed, active)])
            return len(changed)

    @_wrapped
    def delete_messages(self, session_id: str, message_ids: Sequence[int]) -> int:
        """Delete messages for good (the file is rewritten); return how many were deleted."""
        validate_session_id(session_id)
        with self._engine.writing() as state:
            copy = state.transcript(session_id).copy()
            deleted = copy.delete(message_ids)
            if deleted:
                copy.bump()
                self._rewrite(copy)
            return len(deleted)

    def _write(
        self, session_id: str, lines: list[Update] | list[End] | list[Reopen] | list[Active]
    ) -> None:
        self._engine.write(session_id, lines)

    def _rewrite(self, transcript: Transcript) -> None:
        messages = tuple(transcript.messages.values())
        record = transcript.record
        self._engine.rewrite(self._engine.next_tx, NewSession(record, transcript.next_id, messages))

    # -- the atomic rotation -----------------------------------------------------------------------

    @_wrapped
    def apply(self, plan: RotationPlan) -> list[SessionEntry]:
        """Commit ``plan`` atomically: checked, announced in one journal record, written, committed.

        A crash part-way is completed from the journal record by the next process to look.
        ``drop`` is checked with the rest and removed right after, under the same lock.
        """
        check_message_sizes(plan.messages, self.max_message_bytes)
        with self._engine.writing() as state:
            resolved = resolve_plan(plan, state.table, _state.record_of(state))
            copied: dict[str, JSONObject] = {}
            if plan.copy_state_from is not None and plan.create is not None:
                _state.session_file(state, plan.copy_state_from)  # it must exist
                value = state.scopes.get(session_scope(plan.copy_state_from))
                if value is not None:
                    copied[session_scope(plan.create.id)] = value
            tx = self._engine.next_tx
            reopened: list[str] = []
            for session_id in dict.fromkeys(plan.reopen):
                cached = state.sessions.get(session_id)  # None: the session being created
                if cached is not None and cached.record.is_ended:
                    reopened.append(session_id)
            create = None
            append_to = None
            appended: tuple[Message, ...] = ()
            first = list(plan.messages)
            if plan.copy_messages_from is not None:
                source = state.transcript(plan.copy_messages_from)
                first = first_messages(plan, source.active())
            ending = _state.plan_ends(state, resolved.end, plan.reopen)
            if plan.create is not None:
                existing = state.sessions.get(plan.create.id)
                if existing is None:
                    check_title_free(plan.create, _state.records(state))
                    created = Transcript(fresh_record(plan.create))
                    created.add(created.prepare(first).new)
                    if plan.create.id in ending:  # ended at birth: part of its first line
                        created.record = attrs.evolve(
                            created.record, end_reason=ending.pop(plan.create.id), ended_at=plan.at
                        )
                    messages = tuple(created.messages.values())
                    create = NewSession(created.record, created.next_id, messages)
                else:
                    append_to = plan.create.id
                    appended = state.transcript(plan.create.id).prepare(first).new
            record = Plan(
                tx,
                plan.at,
                create=create,
                append_to=append_to if appended else None,
                messages=appended,
                reopen=tuple(reopened),
                end=tuple(ending.items()),
                entries=tuple(resolved.written),
                state=copied,
                deletes=tuple(resolved.deleted),
                rekey=plan.rekey,
            )
            commit_plan(self._engine, state, record, plan.drop)
            return resolved.written

    # -- leases ------------------------------------------------------------------------------------

    @_wrapped
    def acquire_lease(self, resource: str, holder: str, *, ttl: timedelta, now: datetime) -> bool:
        """Take or renew an exclusive lease until ``now + ttl`` (shared by every process)."""
        with self._engine.writing() as state:
            if not lease_is_free(state.leases.get(resource), holder, now):
                return False
            self._engine.log(Lease(self._engine.next_tx, resource, holder, now + ttl))
            return True

    @_wrapped
    def release_lease(self, resource: str, holder: str) -> None:
        """Release ``holder``'s lease on ``resource`` (no-op if it is not the holder)."""
        with self._engine.writing() as state:
            current = state.leases.get(resource)
            if current is not None and current[0] == holder:
                self._engine.log(Release(self._engine.next_tx, resource, holder))

    # -- search ------------------------------------------------------------------------------------

    @_wrapped
    def search(self, query: SearchQuery) -> list[SearchHit]:
        """Search every message with the shared text engine (an index kept in memory).

        The first search of a process reads every session file and builds the index; from
        then on the process holds every transcript (see ``docs/jsonl.md``).
        """
        with self._engine.reading() as state:
            state.enable_search()
            return state.index.search(query, state.transcript)
