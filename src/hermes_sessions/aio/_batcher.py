"""One thread for a kind of the async store's calls, taking everything queued at once.

With a backend that has ``SupportsWriteBatches`` (SQLite) and no ``executor`` given,
:class:`~hermes_sessions.aio.AsyncSessionStore` sends ``append``, ``update_state`` and
``record_usage`` to a writer, and the short reads of a turn to a reader, instead of to a thread
each. The event loop queues the call (no thread hop per call: the thread is woken only when it
is idle) and awaits a future. The thread takes every call queued since its last round and runs
them — the writer as one batch, one transaction and one fsync
(:meth:`~hermes_sessions.protocols.SupportsWriteBatches.write_batch`), the reader one after
another (:func:`run_each`) — then hands all the outcomes back with one ``call_soon_threadsafe``
per event loop. So a batch of 64 writes costs one thread wake-up and one loop wake-up instead of
64 of each, and no thread waits.

The writer keeps the guarantees of group commit: each call's future completes only after the
``COMMIT`` holding its write; a call's own error is raised to it alone; the database's errors
to every call of the batch. Cancelling a call that the thread has not taken yet drops it (it is
never run); once taken it runs to the end (a write may already be committed) and its outcome is
dropped, as when a call is cancelled while it runs in an executor.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar, cast

import attrs

__all__ = ["WriteBatcher", "run_each"]

P = ParamSpec("P")
R = TypeVar("R")


@attrs.define(eq=False)
class _Write:
    """One queued call and the future its caller awaits."""

    call: Callable[[], object]
    future: asyncio.Future[object]
    loop: asyncio.AbstractEventLoop


Outcome = tuple[object, BaseException | None]


def run_each(calls: list[Callable[[], object]]) -> list[Outcome]:
    """Run ``calls`` one after another, each on its own (the reads' ``execute``)."""
    outcomes: list[Outcome] = []
    for call in calls:
        try:
            outcomes.append((call(), None))
        except BaseException as error:  # noqa: BLE001  # the call's outcome, raised to its caller
            outcomes.append((None, error))
    return outcomes


@attrs.define(eq=False)
class WriteBatcher:
    """A queue of calls and the one thread that runs them (see the module docstring).

    ``execute`` runs the calls taken at once and returns their outcomes: the backend's
    ``write_batch`` for writes (one commit), :func:`run_each` for reads. The thread starts on
    demand.
    """

    execute: Callable[[list[Callable[[], object]]], list[Outcome]]
    name: str = "hermes-sessions-batch"
    _lock: threading.Condition = attrs.field(factory=threading.Condition, init=False)
    _queue: list[_Write] = attrs.field(factory=list, init=False)
    _draining: bool = attrs.field(default=False, init=False)
    _thread: ThreadPoolExecutor | None = attrs.field(default=None, init=False)

    async def run(self, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``function(*args, **kwargs)`` in the next batch; return once it is committed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[object] = loop.create_future()
        write = _Write(functools.partial(function, *args, **kwargs), future, loop)
        with self._lock:
            self._queue.append(write)
            wake, self._draining = not self._draining, True
            if wake and self._thread is None:
                self._thread = ThreadPoolExecutor(1, thread_name_prefix=self.name)
            thread = self._thread
        if wake and thread is not None:
            thread.submit(self._drain)
        return cast("R", await future)

    def _drain(self) -> None:
        """The writer: commit batches until the queue is empty."""
        while True:
            with self._lock:
                queued, self._queue = self._queue, []
                self._lock.notify_all()  # for wait_taken
                if not queued:
                    self._draining = False
                    return
            batch = [write for write in queued if not write.future.cancelled()]
            if batch:
                _deliver_all(batch, self._commit(batch))

    def queued(self) -> int:
        """Calls waiting for the writer to take them (for tests and diagnostics)."""
        with self._lock:
            return len(self._queue)

    def wait_taken(self, timeout: float) -> bool:
        """Wait until the writer has taken every queued call; ``False`` on timeout (for tests)."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._queue, timeout)

    def _commit(self, batch: list[_Write]) -> list[Outcome]:
        try:
            return self.execute([write.call for write in batch])
        except BaseException as error:  # noqa: BLE001  # a failing backend fails the batch
            return [(None, error)] * len(batch)

    def shutdown(self) -> None:
        """Stop the thread once the queued batches are committed (it starts again if used)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.shutdown(wait=False)


def _deliver_all(batch: list[_Write], outcomes: list[tuple[object, BaseException | None]]) -> None:
    """Hand the outcomes to their loops, one ``call_soon_threadsafe`` for each loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Write, object, BaseException | None]]]
    by_loop = {}
    for write, (result, error) in zip(batch, outcomes, strict=True):
        by_loop.setdefault(write.loop, []).append((write, result, error))
    for loop, done in by_loop.items():
        try:
            loop.call_soon_threadsafe(_deliver, done)
        except RuntimeError:  # the loop is closed: nobody awaits these any more
            continue


def _deliver(done: list[tuple[_Write, object, BaseException | None]]) -> None:
    """On the loop: complete the futures still awaited."""
    for write, result, error in done:
        if write.future.cancelled():
            continue
        if error is None:
            write.future.set_result(result)
        else:
            write.future.set_exception(error)
