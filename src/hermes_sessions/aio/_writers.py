"""The threads that run :class:`~hermes_sessions.aio.AsyncSessionStore`'s writes.

A backend with group commit (SQLite) commits together the writes that queue while a commit is in
flight, so the more writes wait at once, the fewer commits (and fsyncs) a busy gateway pays. A
write waiting for its batch holds a thread, and asyncio's default pool has few of them (five more
than the CPUs), which caps a batch at a handful of writes however many chats are in a turn. So
the async store runs its writes in a pool of its own with :data:`WRITERS` threads (started on
demand, so a quiet store holds none); reads stay in the default pool. A store given an
``executor`` runs everything there, as asked.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Final, ParamSpec, TypeVar

import attrs

from hermes_sessions.aio._batcher import WriteBatcher
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
    """A lazily started thread pool for writes (see the module docstring).

    ``backend`` is the store's: when it has ``SupportsWriteBatches``, :meth:`write` queues the
    call for one writer thread that commits everything queued at once (``_batcher``).
    """

    backend: object = None
    _pool: ThreadPoolExecutor | None = attrs.field(default=None, init=False)
    _batcher: WriteBatcher | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        if isinstance(self.backend, SupportsWriteBatches):
            self._batcher = WriteBatcher(self.backend)

    async def write(
        self, executor: Executor | None, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """Run a write that moves no key (an append): batched if it can be, else :meth:`run`.

        A store given an ``executor`` runs it there, as asked.
        """
        if executor is None and self._batcher is not None:
            return await self._batcher.run(function, *args, **kwargs)
        return await self.run(executor, function, *args, **kwargs)

    async def run(
        self, executor: Executor | None, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """Run ``function`` in ``executor``, or in the write pool when it is ``None``."""
        if executor is None:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(WRITERS, thread_name_prefix="hermes-sessions-write")
            executor = self._pool
        call = functools.partial(function, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(executor, call)

    def shutdown(self) -> None:
        """Stop the threads once their work is done (the pool starts again if used later)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)
        if self._batcher is not None:
            self._batcher.shutdown()
