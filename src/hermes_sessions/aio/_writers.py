"""The threads that run :class:`~hermes_sessions.aio.AsyncSessionStore`'s calls.

A backend with group commit (SQLite) commits together the writes that queue while a commit is in
flight, so the more writes wait at once, the fewer commits (and fsyncs) a busy gateway pays. On
a backend with ``SupportsWriteBatches`` (SQLite) the hot calls of a turn hold no thread while
they wait: ``append``, ``update_state`` and ``record_usage`` are queued for one writer thread
that commits everything queued meanwhile as one batch, and the turn's short reads (its lookup,
``seen``, ``entry``, ``context``, ``tail``, ``state``, ``session``) for one reader thread; each
hands a round's outcomes back to the loop at once (``_batcher``). The other writes (rotations,
``touch``, key moves) wait for their group commit in a pool of :data:`WRITERS` threads of the
store's own (started on demand, so a quiet store holds none) — asyncio's default pool has few
threads (five more than the CPUs), which would cap a batch at a handful — and the other reads
run in the default pool. A store given an ``executor`` runs everything there, as asked.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Final, ParamSpec, TypeVar

import attrs

from hermes_sessions.aio._batcher import WriteBatcher, run_each
from hermes_sessions.protocols import SupportsWriteBatches

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["WRITERS", "WritePool"]

P = ParamSpec("P")
R = TypeVar("R")

WRITERS: Final = 64
"""Threads for writes: as many writes as this can wait for one commit together."""


@attrs.define(eq=False)
class WritePool:
    """Where the async store's calls run (see the module docstring); started lazily.

    ``backend`` is the store's: when it has ``SupportsWriteBatches`` (and no ``executor`` is
    given), :meth:`write` queues the call for one writer thread that commits every call queued
    meanwhile at once, and :meth:`read` for one reader thread that hands back every result of a
    round at once (``_batcher``).
    """

    backend: object = None
    executor: Executor | None = None
    batches: bool = attrs.field(default=True, kw_only=True)  # False: the pool only (a baseline)
    _pool: ThreadPoolExecutor | None = attrs.field(default=None, init=False)
    _batcher: WriteBatcher | None = attrs.field(default=None, init=False)
    _reader: WriteBatcher | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        if (
            self.batches
            and self.executor is None
            and isinstance(self.backend, SupportsWriteBatches)
        ):
            self._batcher = WriteBatcher(self.backend.write_batch)
            self._reader = WriteBatcher(run_each, "hermes-sessions-read")

    async def read(self, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run a short read of a turn (its lookup, ``seen``): on the reader, else the executor."""
        if self._reader is not None:
            return await self._reader.run(function, *args, **kwargs)
        call = functools.partial(function, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self.executor, call)

    async def write(self, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run a write that moves no key (an append): on the writer, else as :meth:`run` does."""
        if self._batcher is not None:
            return await self._batcher.run(function, *args, **kwargs)
        return await self.run(function, *args, **kwargs)

    async def run(self, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``function`` in the executor, or in the write pool when there is none."""
        executor = self.executor
        if executor is None:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(WRITERS, thread_name_prefix="hermes-sessions-write")
            executor = self._pool
        call = functools.partial(function, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(executor, call)

    def shutdown(self) -> None:
        """Stop the threads once their work is done (they start again if used later)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)
        for queue in (self._batcher, self._reader):
            if queue is not None:
                queue.shutdown()
