"""Connections and transactions of the SQLite backend: one connection per thread, retried writes.

Each thread gets its own connection (a new one after a fork); threads of one process queue on one
lock for writes, so they wait in order instead of polling SQLite's lock. Processes coordinate
through SQLite's own locks: every write is ``BEGIN IMMEDIATE`` … ``COMMIT``; an attempt that
stays busy longer than the busy timeout is rolled back and retried after a jittered, doubling
pause, and when the retries run out the caller gets ``LockTimeoutError``, never
"database is locked". After a commit that leaves the write-ahead log above ``wal_size_limit``
the writer checkpoints and truncates it. With ``group_commit`` (the default), writes that queue
while a commit is in flight are committed together in the next transaction (see ``_group``).
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

import attrs

from hermes_sessions import backoff, crashpoints
from hermes_sessions.backends.sqlite._group import GroupCommit, Member, run_batch
from hermes_sessions.exceptions import BackendClosedError, LockTimeoutError, StorageError
from hermes_sessions.files import make_private_dir
from hermes_sessions.options import Durability  # attrs reads the annotation

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Connections"]

R = TypeVar("R")

_BUSY_CODES: Final = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_CHECKPOINT_WAIT_MS: Final = 100
_sleep = time.sleep  # patched by tests to observe (and steer) the retry loop


def _is_busy(error: sqlite3.Error) -> bool:
    return (getattr(error, "sqlite_errorcode", 0) & 0xFF) in _BUSY_CODES


class _Connection(sqlite3.Connection):
    """A connection that knows its process and can be weakly referenced.

    Weak references let a finished thread's connection be freed; the process id keeps a forked
    child from using, or closing, its parent's connections.
    """

    pid: int


_INHERITED: list[sqlite3.Connection] = []
"""Connections a forked child inherited. Never used and never closed: closing one could make
SQLite in the child release or reset state (locks, the WAL) that the parent still relies on."""


@attrs.define(eq=False)
class Connections:
    """The connections of one backend object (see the module docstring).

    The options are the backend's (validated and documented on
    :class:`~hermes_sessions.backends.SQLiteBackend`), passed in when it opens.
    """

    path: Path
    durability: Durability
    busy_timeout: float
    retries: int
    wal_size_limit: int | None
    secure_delete: bool
    group_commit: bool = True
    _closed: bool = attrs.field(default=False, init=False)
    _local: threading.local = attrs.field(factory=threading.local, init=False)
    _connections: weakref.WeakSet[_Connection] = attrs.field(factory=weakref.WeakSet, init=False)
    _registry_lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _write_lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _group: GroupCommit | None = attrs.field(default=None, init=False)
    _writer: _Connection | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        if self.group_commit:
            self._group = GroupCommit(self._commit_batch)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __len__(self) -> int:
        """Connections this process has open on the file: one per thread that read, one writer."""
        with self._registry_lock:
            return len(self._connections)

    def create_directory(self) -> None:
        """Create the database's directory (0700) if it is missing."""
        directory = self.path.parent
        try:
            if not directory.exists():
                make_private_dir(directory)  # missing parents 0700 too
        except OSError as error:
            raise StorageError(f"cannot create the database {self.path}: {error}") from error

    def build(self, path: Path, work: Callable[[sqlite3.Connection], None]) -> None:
        """Run ``work`` in one transaction on a new database file ``path``, then close it.

        The connection is configured like every other (WAL, durability), and closing it folds
        the write-ahead log into the file.
        """
        connection = sqlite3.connect(path, isolation_level=None, factory=_Connection)
        try:
            self._configure(connection)
            connection.execute("BEGIN IMMEDIATE")
            work(connection)
            connection.execute("COMMIT")
        finally:
            connection.close()

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (a new one after a fork or in a new thread)."""
        if self._closed:
            raise BackendClosedError(f"SQLite backend on {self.path}")
        local = self._local
        connection: _Connection | None = getattr(local, "connection", None)
        if connection is not None:
            if connection.pid == os.getpid():
                return connection
            # In a forked child (tested; coverage data is not saved there).
            _INHERITED.append(connection)  # pragma: no cover
        connection = self._connect()
        local.connection = connection
        return connection

    def writer(self) -> sqlite3.Connection:
        """The connection every write of this process runs on (only with the write lock held).

        One connection for all writing threads keeps its page cache valid from one write to
        the next (a connection's cache is dropped when another connection changed the file), so
        a write on a thread that last wrote long ago does not read its pages again.
        """
        if self._closed:
            raise BackendClosedError(f"SQLite backend on {self.path}")
        connection = self._writer
        if connection is not None:
            if connection.pid == os.getpid():
                return connection
            _INHERITED.append(connection)  # pragma: no cover  # in a forked child
        connection = self._writer = self._connect()
        return connection

    def _connect(self) -> _Connection:
        connection = sqlite3.connect(
            self.path,
            timeout=self.busy_timeout,
            isolation_level=None,
            check_same_thread=False,
            cached_statements=256,
            factory=_Connection,
        )
        try:
            self._configure(connection)
        except BaseException:
            connection.close()
            raise
        connection.pid = os.getpid()
        with self._registry_lock:
            self._connections.add(connection)
        return connection

    def _configure(self, connection: sqlite3.Connection) -> None:
        mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode != "wal":
            raise StorageError(f"{self.path} cannot use WAL mode (journal mode {mode!r})")
        synchronous = "FULL" if self.durability == "full" else "NORMAL"
        limit = -1 if self.wal_size_limit is None else self.wal_size_limit
        for pragma in (
            f"synchronous = {synchronous}",
            f"journal_size_limit = {limit}",
            f"secure_delete = {'ON' if self.secure_delete else 'OFF'}",
            "cache_size = -16000",
            "temp_store = MEMORY",
        ):
            connection.execute(f"PRAGMA {pragma}")

    # -- transactions ------------------------------------------------------------------------------

    def run(
        self,
        work: Callable[[sqlite3.Connection], R],
        *,
        write: bool,
        transaction: bool = True,
    ) -> R:
        """Run ``work`` in a transaction, retrying with jittered backoff while the db is busy."""
        inside = getattr(self._local, "batch", None)
        if inside is not None:  # a call of a write batch on this thread (see ``_batches``)
            return work(inside)
        if write:
            if self._group is not None:
                return self._group.submit(work)
            with self._write_lock:
                return self._attempts(work, "BEGIN IMMEDIATE")
        return self._attempts(work, "BEGIN" if transaction else None)

    def _attempts(self, work: Callable[[sqlite3.Connection], R], begin: str | None) -> R:
        started = time.monotonic()
        for attempt in range(self.retries + 1):
            try:
                connection = self.connection() if begin in (None, "BEGIN") else self.writer()
                if begin is None:
                    return work(connection)
                connection.execute(begin)
                try:
                    result = work(connection)
                    if begin == "BEGIN IMMEDIATE":
                        crashpoints.reached("sqlite.before_commit")
                    connection.execute("COMMIT")
                except BaseException:
                    if connection.in_transaction:
                        connection.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError as error:
                if not _is_busy(error):
                    raise
                if attempt == self.retries:
                    waited = time.monotonic() - started
                    raise LockTimeoutError(str(self.path), waited) from error
                _sleep(backoff.pause(attempt))
                continue
            if begin == "BEGIN IMMEDIATE":
                crashpoints.reached("sqlite.after_commit")
                self._after_commit(connection)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def _commit_batch(self, batch: list[Member[object]]) -> None:
        """Commit a group-commit batch in one write transaction (retried while busy)."""
        with self._write_lock:
            self._attempts(lambda connection: run_batch(connection, batch), "BEGIN IMMEDIATE")

    def run_inside(self, work: Callable[[sqlite3.Connection], R]) -> R:
        """Run ``work`` in one write transaction, as are all statements this thread makes meanwhile.

        Retried while busy, like a single write; the write batches of ``_batches``.
        """
        with self._write_lock:
            return self._attempts(functools.partial(self._inside, work), "BEGIN IMMEDIATE")

    def _inside(self, work: Callable[[sqlite3.Connection], R], connection: sqlite3.Connection) -> R:
        self._local.batch = connection
        try:
            return work(connection)
        finally:
            self._local.batch = None

    def run_alone(self, work: Callable[[sqlite3.Connection], R]) -> R:
        """Run ``work`` outside a transaction with the write lock held (for ``VACUUM``)."""
        with self._write_lock:
            return self._attempts(work, None)

    def checkpoint(self, *, truncate: bool) -> bool:
        """Copy the WAL into the database (and cut it to zero bytes with ``truncate``).

        Waits up to the busy timeout for readers of older snapshots; ``False`` means some were
        still reading.
        """
        mode = "TRUNCATE" if truncate else "PASSIVE"
        with self._write_lock:
            return self._checkpoint(self.writer(), mode, wait_ms=int(self.busy_timeout * 1000))

    def _after_commit(self, connection: sqlite3.Connection) -> None:
        """Checkpoint and truncate the WAL once it passes ``wal_size_limit``."""
        if self.wal_size_limit is None:
            return
        # The log exists: this connection has it open (SQLite deletes it with the last one).
        size = os.stat(f"{self.path}-wal").st_size  # noqa: PTH116  # hot path: no Path object
        if size > self.wal_size_limit:
            self._checkpoint(connection, "TRUNCATE", wait_ms=_CHECKPOINT_WAIT_MS)

    def _checkpoint(self, connection: sqlite3.Connection, mode: str, *, wait_ms: int) -> bool:
        connection.execute(f"PRAGMA busy_timeout = {wait_ms}")
        try:
            busy, _log, _done = connection.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
        finally:
            connection.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        return not busy

    def close(self) -> None:
        """Close every connection; later calls raise ``BackendClosedError``. Idempotent."""
        self._closed = True
        with self._write_lock, self._registry_lock:
            connections = list(self._connections)
            self._connections.clear()
            self._writer = None
        for connection in connections:
            if connection.pid == os.getpid():
                connection.close()
            else:  # pragma: no cover  # in a forked child (tested; coverage is not saved there)
                _INHERITED.append(connection)
