"""The JSONL backend's engine: the directory lock, catching up, recovery and the commit protocol.

Every process caches (:class:`State`) every entry and session summary, and the transcripts it
used last (read on demand, :mod:`._ondemand`), and *catches up* before it serves a call: it
reads the journal from where it stopped and re-reads only the session files its new records
name (tails from the remembered offset; whole files after a rewrite or when not cached). A
call that finds the journal unchanged (same inode, same size) needs no lock at all.

Writes run under one directory-wide exclusive lock and follow one rule: **announce, then
change**. The journal record of a write is appended (and fsynced) *before* the session files
change, so whoever takes the lock next knows what a crashed writer was doing:

* ``write`` (an append to one session file): complete if all its lines arrived; otherwise the
  partial lines are cut off and a ``void`` record cancels it (its activity too);
* ``create``, ``plan`` and ``remove`` carry everything they write and are *completed* (rolled
  forward) from the record; a plan's entries only become visible with its ``commit``;
* ``rewrite`` replaces a file by rename, so it either happened or did not.

Only the last journal record can be unfinished (every lock holder settles it before writing),
which keeps recovery to a look at one record.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Final, Self

import attrs
import filelock

from hermes_sessions import crashpoints
from hermes_sessions.backends.jsonl._cache import (
    Change,
    Loaded,
    State,
    Tail,
    touched_sessions,
    trailing_group,
)
from hermes_sessions.backends.jsonl._catchup import apply_changes, gather, install_index
from hermes_sessions.backends.jsonl._journal import (
    Commit,
    Create,
    JournalHeader,
    JournalRecord,
    Plan,
    Remove,
    Rewrite,
    Void,
    Write,
    parse_journal,
    parse_records,
)
from hermes_sessions.backends.jsonl._lines import (
    append_journal,
    append_lines,
    make_private_dir,
    read_chunk,
    read_chunk_at,
    require_checksums,
    truncate,
)
from hermes_sessions.backends.jsonl._migrate import migrate, needs_index, needs_migration
from hermes_sessions.backends.jsonl._ondemand import load_transcript
from hermes_sessions.backends.jsonl._session_records import (
    CHECKSUMS_SINCE,
    encode,
    parse_session_line,
)
from hermes_sessions.backends.jsonl._snapindex import SnapshotIndex, open_index
from hermes_sessions.backends.jsonl._snapshot import (
    EMPTY_SNAPSHOT,
    Snapshot,
    read_snapshot,
    snapshot_lines,
)
from hermes_sessions.backends.jsonl._verify import (
    check_end,
    check_line_counts,
    cross_check,
)
from hermes_sessions.exceptions import (
    BackendClosedError,
    CorruptRecordError,
    LockTimeoutError,
    StorageError,
)
from hermes_sessions.files import PRIVATE_FILE, create_file, fsync_dir, replace_file, temp_path
from hermes_sessions.ids import validate_session_id

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from datetime import datetime

    from hermes_sessions.backends.jsonl._journal import NewSession
    from hermes_sessions.backends.jsonl._session_records import SessionLine
    from hermes_sessions.models import JSONObject

__all__ = ["JOURNAL", "SNAPSHOT", "DirectoryEngine"]

_POLL_INTERVAL: Final = 0.002
"""Seconds between attempts on a contended directory lock (filelock polls)."""

JOURNAL: Final = "journal.jsonl"
SNAPSHOT: Final = "routing.jsonl"
SESSIONS: Final = "sessions"
LOCK: Final = ".lock"


@attrs.define(eq=False, repr=False)  # the cache is no part of its repr
class DirectoryEngine:
    """One data directory: its files, its lock, and this process's cache of it.

    Creating an engine creates the directory (and ``sessions/``) if missing, but reads nothing:
    :meth:`open` catches up with the files. :meth:`reading` and :meth:`writing` hold the
    engine's mutex (threads) and, when needed, the directory lock (processes) around every use
    of :attr:`state`.
    """

    directory: Path
    """The data directory."""
    sync_writes: bool = attrs.field(kw_only=True)
    """Whether writes are ``fsync``-ed before they return (``durability="full"``)."""
    lock_timeout: float = attrs.field(kw_only=True)
    """Seconds to wait for the directory lock before ``LockTimeoutError``."""
    compact_threshold: int = attrs.field(kw_only=True)
    """Journal records (at least) after which a write compacts the journal first."""
    cache_sessions: int | None = attrs.field(default=None, kw_only=True)
    """How many transcripts the cache holds at most (``None``: every one)."""
    use_summaries: bool = attrs.field(default=True, kw_only=True)
    """Whether snapshot summaries stand in for reading session files (``check()``: no)."""
    verify_files: bool = attrs.field(default=True, kw_only=True)
    """Whether catching up checks session files against the index: line counts, and that every
    file is listed (``repair()`` reads without, then reconciles the two itself)."""
    sessions_dir: Path = attrs.field(
        init=False, default=attrs.Factory(lambda self: self.directory / SESSIONS, takes_self=True)
    )
    journal_path: Path = attrs.field(
        init=False, default=attrs.Factory(lambda self: self.directory / JOURNAL, takes_self=True)
    )
    snapshot_path: Path = attrs.field(
        init=False, default=attrs.Factory(lambda self: self.directory / SNAPSHOT, takes_self=True)
    )
    state: State = attrs.field(init=False)
    """The cache of the directory, exact as of the last catch-up."""
    closed: bool = attrs.field(init=False, default=False)
    _mutex: threading.RLock = attrs.field(init=False, factory=threading.RLock)
    _lock: filelock.FileLock = attrs.field(init=False)
    _journal_fd: int | None = attrs.field(init=False, default=None)
    _journal_ino: int = attrs.field(init=False, default=-1)
    _journal_offset: int = attrs.field(init=False, default=0)
    _journal_line: int = attrs.field(init=False, default=0)
    journal_checksums: bool = attrs.field(init=False, default=True)
    """Whether the journal is checksummed (format 2); a format 1 journal awaits migration."""
    _completed_tx: int = attrs.field(init=False, default=0)

    def __attrs_post_init__(self) -> None:
        self.state = self._empty_state()
        make_private_dir(self.directory)
        make_private_dir(self.sessions_dir)
        self._lock = filelock.FileLock(
            self.directory / LOCK,
            mode=PRIVATE_FILE,
            timeout=self.lock_timeout,
            thread_local=False,
            poll_interval=_POLL_INTERVAL,
        )

    def open(self) -> Self:
        """Create the journal of a new directory and catch up; close again if that fails."""
        try:
            with self._mutex, self.exclusive():
                self.initialize()
                self.sync()
                if needs_migration(self):
                    migrate(self)
                elif needs_index(self):
                    self.compact()
        except BaseException:
            self.close()  # no descriptor outlives a failed open
            raise
        return self

    # -- locking -----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the directory lock (callers never nest it)."""
        try:
            self._lock.acquire()
        except filelock.Timeout as error:
            raise LockTimeoutError(str(self._lock.lock_file), self.lock_timeout) from error
        try:
            yield
        finally:
            self._lock.release()

    @contextlib.contextmanager
    def reading(self) -> Iterator[State]:
        """The cache, caught up; the directory lock is taken only if the journal moved on."""
        with self._mutex:
            self._check_open()
            if not self._journal_unchanged():
                with self.exclusive():
                    self.sync()
            yield self.state

    @contextlib.contextmanager
    def writing(self) -> Iterator[State]:
        """The cache, caught up, with the directory lock held for the whole block."""
        with self._mutex:
            self._check_open()
            with self.exclusive():
                self.sync()
                if self.state.journal_records > max(
                    self.compact_threshold, len(self.state.table) + len(self.state.sessions)
                ):
                    self.compact()
                yield self.state

    def close(self) -> None:
        """Forget the cache and close the journal; later calls raise ``BackendClosedError``."""
        with self._mutex:
            if self.closed:
                return
            self.closed = True
            if self._journal_fd is not None:
                os.close(self._journal_fd)
                self._journal_fd = None
            self.state.close()
            self.state = self._empty_state()

    def _empty_state(self) -> State:
        loader = functools.partial(load_transcript, self)
        return State(cache_sessions=self.cache_sessions, loader=loader)

    @property
    def locked(self) -> bool:
        """Whether this process holds the directory lock."""
        return self._lock.is_locked

    def _check_open(self) -> None:
        if self.closed:
            raise BackendClosedError(f"JSONL backend on {self.directory}")

    # -- paths -------------------------------------------------------------------------------------

    def session_path(self, session_id: str) -> Path:
        """The file of a session; the id is checked so it can never leave the directory."""
        return self.sessions_dir / f"{validate_session_id(session_id)}.jsonl"

    def initialize(self) -> None:
        """Create the journal of a new directory; refuse a directory that lost it."""
        if not self.journal_path.exists():
            if self.snapshot_path.exists():
                raise CorruptRecordError(
                    f"the journal is missing but {SNAPSHOT} exists; run JSONLBackend.repair()",
                    path=self.journal_path,
                )
            if any(self.sessions_dir.glob("*.jsonl")):
                raise CorruptRecordError(
                    "the journal is missing but session files exist; run JSONLBackend.repair() "
                    "to rebuild the routing index from them",
                    path=self.journal_path,
                )
            replace_file(
                self.journal_path, encode(JournalHeader(0).to_json()), sync=self.sync_writes
            )
        for name in (JOURNAL, SNAPSHOT):
            with contextlib.suppress(FileNotFoundError):
                temp_path(self.directory / name).unlink()

    # -- catching up -------------------------------------------------------------------------------

    def _journal_unchanged(self) -> bool:
        try:
            status = self.journal_path.stat()
        except OSError:
            return False
        return status.st_ino == self._journal_ino and status.st_size == self._journal_offset

    def sync(self) -> None:
        """Catch up with the directory (under the lock): read only what changed since last time."""
        try:
            status = self.journal_path.stat()
        except FileNotFoundError as error:
            raise CorruptRecordError(
                "the journal disappeared; run JSONLBackend.repair()", path=self.journal_path
            ) from error
        if self._journal_fd is None or status.st_ino != self._journal_ino:
            self._reload()
        elif status.st_size != self._journal_offset:
            self._advance(None)

    def _reload(self) -> None:
        """Start over from the snapshot (first open, or the journal was compacted meanwhile).

        A snapshot with an index is read lazily (:mod:`._snapindex`); another is read whole.
        Cached sessions whose version matches the snapshot's are kept; the others are re-read.
        """
        found = open_index(self.snapshot_path) if self.use_summaries else None
        index = found if isinstance(found, SnapshotIndex) else None
        fd = os.open(self.journal_path, os.O_RDWR | os.O_APPEND)
        try:
            base = None if index is not None else self.read_snapshot() or EMPTY_SNAPSHOT
            self._check_journal_header(fd, index if base is None else base)
            if self._journal_fd is not None:
                os.close(self._journal_fd)
            self._journal_fd = fd
            self._journal_ino = os.fstat(fd).st_ino
            self._journal_offset = 0
            self._journal_line = 0
            if index is not None:
                install_index(self.state, index)
            elif self.state.sessions.base is not None:  # from an index to a snapshot read whole
                self.state.close()
                self.state = self._empty_state()
            self._advance(base, skip=True)
            if self.verify_files:
                cross_check(self.state, self.sessions_dir)
        except BaseException:
            if index is not None and self.state.sessions.base is not index:
                index.close()
            if self._journal_fd != fd:
                os.close(fd)
            self._journal_ino = -1  # start over next time
            raise

    def _check_journal_header(self, fd: int, base: Snapshot | SnapshotIndex | None) -> None:
        path = self.journal_path
        chunk = read_chunk_at(fd, path, offset=0, first_line=1)
        first = chunk.lines[0] if chunk.lines else None
        header = None if first is None else parse_journal(first.data, path=path, line=1)
        if first is None or first.number != 1 or not isinstance(header, JournalHeader):
            raise CorruptRecordError("the journal starts with its header", path=path, line=1)
        self.journal_checksums = header.format >= CHECKSUMS_SINCE
        last_tx = 0 if base is None else base.last_tx
        if header.base_tx > last_tx:
            raise CorruptRecordError(
                f"the journal continues from transaction {header.base_tx} but {SNAPSHOT} ends "
                f"at {last_tx}; run JSONLBackend.repair()",
                path=path,
                line=1,
            )

    def read_snapshot(self) -> Snapshot | None:
        """Read ``routing.jsonl`` (``None`` if there is none yet)."""
        return read_snapshot(self.snapshot_path)

    def _advance(self, base: Snapshot | None, *, skip: bool = False) -> None:
        """Apply the journal records after the current offset (on top of ``base``, if given).

        With ``skip`` (a new snapshot), records it covers already are passed over.
        """
        assert self._journal_fd is not None  # noqa: S101  # set by _reload
        while True:
            chunk = read_chunk_at(
                self._journal_fd,
                self.journal_path,
                offset=self._journal_offset,
                first_line=self._journal_line + 1,
            )
            if chunk.torn:  # an announcement cut short: its change never started
                os.ftruncate(self._journal_fd, chunk.end)
            if self.journal_checksums:
                require_checksums(chunk, self.journal_path)
            last = base.last_tx if base is not None else self.state.last_tx
            records = parse_records(
                chunk.lines,
                self.journal_path,
                after=last,
                skip=skip,
                checksums=self.journal_checksums,
            )
            if records and self._settle(records):
                continue
            changes = gather(self, records, base)
            if records and self._void_if_cut_short(records[-1], changes):
                continue
            if self.verify_files:
                check_line_counts(
                    self.state, records, changes, base=base, path_of=self.session_path
                )
            apply_changes(self.state, records, changes, base)
            self._journal_offset = chunk.end
            self._journal_line = chunk.last_line
            return

    # -- recovery ----------------------------------------------------------------------------------

    def _settle(self, records: list[JournalRecord]) -> bool:
        """Complete an unfinished create, plan or removal (the last record).

        Returns True if a commit was written (the journal must then be read again).
        """
        last = records[-1]
        if last.tx == self._completed_tx:
            return False
        if isinstance(last, Create):
            self._complete_create(last.tx, last.session)
        elif isinstance(last, Rewrite):
            with contextlib.suppress(FileNotFoundError):
                temp_path(self.session_path(last.session)).unlink()
        elif isinstance(last, Plan):
            self._complete_plan(last, records)
            return True
        elif isinstance(last, Remove):
            self._complete_remove(last, records)
            return True
        return False

    def _void_if_cut_short(self, last: JournalRecord, changes: dict[str, Change]) -> bool:
        """Cancel the last ``write`` if its lines did not all arrive; True if it did."""
        if not isinstance(last, Write) or last.tx == self._completed_tx:
            return False
        change = changes[last.session]
        assert isinstance(change, Loaded | Tail)  # noqa: S101  # a write's file was read
        count, start = trailing_group(change.parsed, last.tx)
        if count >= last.lines:
            return False
        cut = start if start is not None else change.chunk.end
        truncate(self.session_path(last.session), cut, sync=self.sync_writes)
        self._journal_append([Void(last.tx)])
        return True

    def _complete_create(self, tx: int, new: NewSession) -> None:
        data = b"".join(encode(line.to_json()) for line in new.lines(tx))
        path = self.session_path(new.record.id)
        try:
            complete = path.stat().st_size == len(data)
        except FileNotFoundError:
            complete = False
        if not complete:
            create_file(path, data, sync=self.sync_writes)

    def _complete_plan(self, plan: Plan, records: list[JournalRecord]) -> None:
        if plan.create is not None:
            self._complete_create(plan.tx, plan.create)
        for session_id, lines in plan.groups().items():
            self._ensure_group(session_id, plan.tx, lines, records)
        self._journal_append([Commit(plan.tx)])

    def _complete_remove(self, remove: Remove, records: list[JournalRecord]) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.session_path(remove.session).unlink()
            if self.sync_writes:
                fsync_dir(self.sessions_dir)
        for session_id, lines in remove.groups().items():
            self._ensure_group(session_id, remove.tx, lines, records)
        self._journal_append([Commit(remove.tx)])

    def _ensure_group(
        self, session_id: str, tx: int, lines: list[SessionLine], records: list[JournalRecord]
    ) -> None:
        """Make sure a session file ends with exactly ``lines`` of transaction ``tx``."""
        path = self.session_path(session_id)
        cached = self.state.sessions.get(session_id)
        rewritten = any(
            sid == session_id and kind != "tail"
            for record in records[:-1]
            for sid, kind in touched_sessions(record)
        )
        if cached is None or rewritten:
            offset, first = 0, 1
        else:
            offset, first = cached.offset, cached.lines + 1
        chunk = read_chunk(path, offset=offset, first_line=first)
        parsed = [
            (
                line,
                parse_session_line(line.data, path=path, line=line.number, session_id=session_id),
            )
            for line in chunk.lines
        ]
        count, start = trailing_group(parsed, tx)
        if count == len(lines) and not chunk.torn:
            return
        cut = start if start is not None else chunk.end
        truncate(path, cut, sync=False)
        data = b"".join(encode(line.to_json()) for line in lines)
        append_lines(path, data, expected_size=cut, sync=self.sync_writes)

    # -- writing -----------------------------------------------------------------------------------

    @property
    def next_tx(self) -> int:
        """The transaction number of the next write."""
        return self.state.last_tx + 1

    def _journal_append(self, records: Sequence[JournalRecord]) -> None:
        assert self._journal_fd is not None  # noqa: S101  # open while the engine is
        data = b"".join(encode(record.to_json()) for record in records)
        append_journal(self._journal_fd, data, sync=self.sync_writes)
        crashpoints.reached("jsonl.after_journal")

    def log(self, record: JournalRecord) -> None:
        """Write a journal-only record (entries, activity, leases) and catch up."""
        self._journal_append([record])
        self._completed_tx = record.tx
        self.sync()

    def write(
        self,
        session_id: str,
        lines: Sequence[SessionLine],
        *,
        touch: datetime | None = None,
        state: dict[str, JSONObject] | None = None,
    ) -> None:
        """Append lines (one transaction) to a session file; ``touch`` and ``state`` with them."""
        tx = lines[0].tx
        data = b"".join(encode(line.to_json()) for line in lines)
        cached = self.state.sessions[session_id]
        path = self.session_path(session_id)
        check_end(path, cached)
        self._journal_append([Write(tx, session_id, len(lines), touch, state or {})])
        append_lines(path, data, expected_size=cached.offset, sync=self.sync_writes)
        crashpoints.reached("jsonl.after_files")
        self._completed_tx = tx
        self.sync()

    def create(self, tx: int, new: NewSession) -> None:
        """Create a session file."""
        path = self.session_path(new.record.id)
        if path.exists():
            raise StorageError(
                f"{path} exists but the index does not list it; run JSONLBackend.repair() to "
                "adopt it, or move it away"
            )
        self._journal_append([Create(tx, new)])
        self._complete_create(tx, new)
        self._completed_tx = tx
        self.sync()

    def rewrite(self, tx: int, new: NewSession) -> None:
        """Replace a session file as a whole (temp file + fsync + rename)."""
        session_id = new.record.id
        data = b"".join(encode(line.to_json()) for line in new.lines(tx))
        self._journal_append([Rewrite(tx, session_id, len(new.lines(tx)))])
        replace_file(self.session_path(session_id), data, sync=self.sync_writes)
        self._completed_tx = tx
        self.sync()

    def remove(self, record: Remove) -> None:
        """Delete a session file and orphan its children."""
        self._journal_append([record])
        self._complete_remove(record, [record])
        self.sync()

    def apply_plan(self, plan: Plan) -> None:
        """Apply a resolved rotation (announce, write every file, commit)."""
        if plan.create is not None and self.session_path(plan.create.record.id).exists():
            raise StorageError(
                f"{self.session_path(plan.create.record.id)} exists but the index does not list "
                "it; run JSONLBackend.repair() to adopt it, or move it away"
            )
        self._journal_append([plan])
        self._complete_plan(plan, [plan])
        crashpoints.reached("jsonl.after_files")
        self.sync()

    # -- compaction --------------------------------------------------------------------------------

    def compact(self) -> None:
        """Write the whole routing index to a new snapshot and start an empty journal.

        Both files are replaced atomically, the snapshot first; a crash between the two leaves
        the old journal, whose records the snapshot already covers (they are skipped by tx).
        """
        state = self.state
        files = {
            session_id: (f.version, f.lines, f.summary() if f.checksums else None)
            for session_id, f in state.sessions.items()
        }
        data = snapshot_lines(
            state.last_tx, state.table.listing(), state.leases, files, state.scopes
        )
        replace_file(self.snapshot_path, data, sync=self.sync_writes)
        header = encode(JournalHeader(state.last_tx).to_json())
        replace_file(self.journal_path, header, sync=self.sync_writes)
        fd = os.open(self.journal_path, os.O_RDWR | os.O_APPEND)
        assert self._journal_fd is not None  # noqa: S101  # open while the engine is
        os.close(self._journal_fd)
        self._journal_fd = fd
        self._journal_ino = os.fstat(fd).st_ino
        self._journal_offset = len(header)
        self._journal_line = 1
        self.journal_checksums = True
        state.journal_records = 0
