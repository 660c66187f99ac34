"""Group commit: concurrent writers of one process share one transaction and one fsync.

A writer thread hands its work (a function of the connection) to :class:`GroupCommit`. When no
commit is in flight it leads at once: a batch of one, committed like a plain write. When one is
in flight it waits; as the commit ends, the first waiter becomes the next leader and takes every
writer that queued meanwhile, in arrival order. There is no timer: the batch is whatever arrived
while the previous commit ran, so a lone writer never waits for company.

The leader runs the batch in one ``BEGIN IMMEDIATE`` transaction, each member inside its own
``SAVEPOINT``, and commits once. The batch behaves exactly as if its members had committed one
after another in arrival order: each sees the writes of the earlier ones (two deliveries of one
turn in one batch store it once, the second is a duplicate). A member's own error (a conflict, a
missing session, a constraint) rolls back only its savepoint and is raised only to its caller;
an error of the database itself (I/O, full disk, corruption, a failed ``COMMIT``) fails every
member of the batch, since none of them is durable. While the database stays busy (another
process writing) the whole batch is rolled back and retried with the same backoff as a single
write. Every caller returns only after the ``COMMIT`` that holds its write.
"""

from __future__ import annotations

import copy
import sqlite3
import threading
from collections.abc import Callable  # attrs reads the annotations
from typing import Final, Generic, TypeVar

import attrs

__all__ = ["BatchFailed", "GroupCommit", "Member", "copy_error", "is_busy", "is_fatal"]

R = TypeVar("R")

_FATAL_CODES: Final = frozenset(
    {
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CORRUPT,
        sqlite3.SQLITE_NOTADB,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_READONLY,
    }
)


def is_fatal(error: BaseException) -> bool:
    """Whether ``error`` is the database's own failure (not one member's), failing its batch."""
    if not isinstance(error, sqlite3.Error):
        return not isinstance(error, Exception)  # KeyboardInterrupt, SystemExit: stop the batch
    code = getattr(error, "sqlite_errorcode", None)
    if code is None:
        return isinstance(error, sqlite3.OperationalError | sqlite3.DatabaseError) and not (
            isinstance(error, sqlite3.IntegrityError | sqlite3.ProgrammingError)
        )
    return (code & 0xFF) in _FATAL_CODES


class BatchFailed(Exception):  # noqa: N818  # internal signal, never escapes the module's caller
    """The whole batch failed with ``error``: nothing of it was committed."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


@attrs.define(eq=False)
class Member(Generic[R]):
    """One writer's work in a batch, and how it ended."""

    work: Callable[[sqlite3.Connection], R]
    result: R | None = None
    error: BaseException | None = None
    done: threading.Event | None = None
    """Set when the member's batch ends or it becomes the leader; made only for a writer that
    queues (a lone writer leads at once and never waits on it)."""
    leads: bool = False

    def outcome(self) -> R:
        """The work's result, or raise what it (or its batch) raised."""
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]  # set when error is None


@attrs.define(eq=False)
class GroupCommit:
    """The queue of writers of one backend object (see the module docstring).

    ``commit`` runs a batch in one transaction (the caller's retry loop around
    :func:`run_batch`); it is called by one leader at a time.
    """

    commit: Callable[[list[Member[object]]], None]
    _mutex: threading.Condition = attrs.field(factory=threading.Condition, init=False)
    _queue: list[Member[object]] = attrs.field(factory=list, init=False)
    _busy: bool = attrs.field(default=False, init=False)

    def submit(self, work: Callable[[sqlite3.Connection], R]) -> R:
        """Run ``work`` in the next batch; return once the batch holding it is committed."""
        member: Member[R] = Member(work)
        with self._mutex:
            if self._busy:
                member.done = threading.Event()
                self._queue.append(member)  # type: ignore[arg-type]  # results stay per member
            else:
                self._busy = member.leads = True
            self._mutex.notify_all()  # for wait_queued
        if member.done is not None:
            member.done.wait()
            if not member.leads:
                return member.outcome()
        self._lead(member)  # type: ignore[arg-type]  # results stay per member
        return member.outcome()

    def wait_queued(self, count: int, timeout: float) -> bool:
        """Wait until a commit is in flight and ``count`` writers wait for it; ``False`` on timeout.

        For tests and diagnostics: it shows what the next batch will hold.
        """
        with self._mutex:
            return self._mutex.wait_for(lambda: self._busy and len(self._queue) >= count, timeout)

    def _lead(self, member: Member[object]) -> None:
        with self._mutex:
            batch, self._queue = [member, *self._queue], []
        try:
            self.commit(batch)
        except BaseException as error:  # noqa: BLE001  # the batch failed: each member gets it
            failure = error.error if isinstance(error, BatchFailed) else error
            for index, each in enumerate(batch):
                each.result = None
                each.error = failure if index == 0 else copy_error(failure)
        finally:
            with self._mutex:
                if self._queue:
                    following = self._queue.pop(0)
                    following.leads = True
                    following.done.set()  # type: ignore[union-attr]  # queued members have one
                else:
                    self._busy = False
            for each in batch[1:]:
                each.done.set()  # type: ignore[union-attr]  # queued members have one


def copy_error(error: BaseException) -> BaseException:
    """A copy of ``error`` for another thread to raise (so tracebacks do not mix)."""
    try:
        duplicate = copy.copy(error)
    except Exception:  # noqa: BLE001  # an exception that cannot be copied is raised as it is
        return error
    duplicate.__cause__, duplicate.__traceback__ = error.__cause__, error.__traceback__
    return duplicate


def run_batch(connection: sqlite3.Connection, batch: list[Member[object]]) -> None:
    """Run each member of ``batch`` in the open transaction, in order, each in a savepoint.

    A batch of one runs without a savepoint (its error rolls back the transaction, which holds
    only it). Raises :class:`BatchFailed` for an error that fails the batch; a busy database
    propagates as it is, so the caller rolls back and retries the whole batch.
    """
    if len(batch) == 1:
        (only,) = batch
        only.result, only.error = only.work(connection), None
        return
    for member in batch:
        member.result = member.error = None
        connection.execute("SAVEPOINT hermes_member")
        try:
            member.result = member.work(connection)
        except sqlite3.OperationalError as error:
            if is_busy(error):
                raise
            _settle(connection, member, error)
        except BaseException as error:  # noqa: BLE001  # the member's own failure is kept for it
            _settle(connection, member, error)
        else:
            connection.execute("RELEASE hermes_member")


def _settle(connection: sqlite3.Connection, member: Member[object], error: BaseException) -> None:
    """Roll back ``member`` alone, or fail the batch if the error is the database's."""
    if is_fatal(error) or not connection.in_transaction:
        raise BatchFailed(error) from error
    connection.execute("ROLLBACK TO hermes_member")
    connection.execute("RELEASE hermes_member")
    member.error = error


def is_busy(error: sqlite3.Error) -> bool:
    """Whether ``error`` says another connection holds the database (retry the batch)."""
    return (getattr(error, "sqlite_errorcode", 0) & 0xFF) in {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
    }
