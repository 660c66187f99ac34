"""Write batches of whole calls: group commit for a writer that does not wait per write.

:class:`~hermes_sessions.backends.sqlite._group.GroupCommit` batches the writes of threads that
each block until their commit, so a batch of 64 needs 64 waiting threads, each woken on its own
once the batch is committed. :class:`~hermes_sessions.aio.AsyncSessionStore` needs none of that:
its one writer thread takes every write call queued since its last commit and hands them here
(:meth:`SQLiteBackend.write_batch`, the ``SupportsWriteBatches`` ability). They run one after
another in one ``BEGIN IMMEDIATE`` transaction on that thread, each call inside its own
``SAVEPOINT``, and are committed once. While a call runs, every statement it makes through the
backend — its writes and its reads, so that it sees the earlier calls' writes — runs on the
batch's connection inside the transaction (``Connections.run_inside``).

The semantics are ``_group``'s: as if the calls committed one after another in order; a call's
own error (a conflict, a missing session, a refused value) rolls back only its savepoint and is
its outcome alone; an error of the database itself (I/O, full disk, corruption, a failed
``COMMIT``) is the outcome of every call, since none of them is durable; a database busy with
another process's write rolls the whole batch back and runs it again after the usual backoff.
Nothing is returned before the ``COMMIT``. A batch of one runs without a savepoint. A backend
opened with ``group_commit=False`` runs the calls one after another, each write committed alone.
"""

from __future__ import annotations

import functools
import sqlite3
from typing import TYPE_CHECKING

from hermes_sessions.backends.sqlite._group import BatchFailed, copy_error, is_busy, is_fatal
from hermes_sessions.backends.sqlite._guard import guarded

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from hermes_sessions.backends.sqlite._backend import SQLiteBackend

__all__ = ["write_batch"]

Outcome = tuple[object, BaseException | None]


def write_batch(backend: SQLiteBackend, calls: Sequence[Callable[[], object]]) -> list[Outcome]:
    """Run ``calls`` in order in one committed transaction; each call's ``(result, error)``."""
    if not backend.group_commit:  # one commit per write, as asked: each call alone
        return [_one(call) for call in calls]
    outcomes: list[Outcome] = [(None, None)] * len(calls)
    if not calls:
        return outcomes
    try:
        _commit(backend, calls, outcomes)
    except BaseException as error:  # noqa: BLE001  # the batch failed: it is every call's outcome
        failure = error.error if isinstance(error, BatchFailed) else error
        failed: list[Outcome] = [(None, failure)]
        return failed + [(None, copy_error(failure)) for _ in calls[1:]]
    return outcomes


def _one(call: Callable[[], object]) -> Outcome:
    """``call`` with its writes committed as usual (without group commit: one commit each)."""
    try:
        return call(), None
    except BaseException as error:  # noqa: BLE001  # the call's outcome, raised to its caller
        return None, error


def _commit(
    backend: SQLiteBackend, calls: Sequence[Callable[[], object]], outcomes: list[Outcome]
) -> None:
    """The batch's transaction, with the backend's own error translation (``guarded``)."""

    def commit(backend: SQLiteBackend) -> None:
        work = functools.partial(_run_calls, calls, outcomes)
        backend._connections.run_inside(work)  # noqa: SLF001  # the backend's own connections

    guarded(commit)(backend)


def _run_calls(
    calls: Sequence[Callable[[], object]], outcomes: list[Outcome], connection: sqlite3.Connection
) -> None:
    """Run each call in the open transaction (run again from the start if the batch is retried)."""
    if len(calls) == 1:
        outcomes[0] = (calls[0](), None)  # its error rolls back the transaction, holding only it
        return
    for index, call in enumerate(calls):
        connection.execute("SAVEPOINT hermes_call")
        try:
            result = call()
        except BaseException as error:  # noqa: BLE001  # the call's own failure is its outcome
            _settle(connection, error)
            outcomes[index] = (None, error)
        else:
            connection.execute("RELEASE hermes_call")
            outcomes[index] = (result, None)


def _settle(connection: sqlite3.Connection, error: BaseException) -> None:
    """Roll back the call alone, or fail (or retry) the batch if the error is the database's."""
    cause = error if isinstance(error, sqlite3.Error) else error.__cause__
    if isinstance(cause, sqlite3.OperationalError) and is_busy(cause):
        raise cause  # the whole batch is rolled back and retried
    if (
        not isinstance(error, Exception)
        or (isinstance(cause, sqlite3.Error) and is_fatal(cause))
        or not connection.in_transaction
    ):
        raise BatchFailed(error) from error
    connection.execute("ROLLBACK TO hermes_call")
    connection.execute("RELEASE hermes_call")
