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

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["WRITERS", "WritePool"]

P = ParamSpec("P")
R = TypeVar("R")

WRITERS: Final = 64
"""Threads for writes: as many writes as this can wait for one commit together."""


@attrs.define(eq=False)
class WritePool:
    """A lazily started thread pool for writes (see the module docstring)."""

    _pool: ThreadPoolExecutor | None = attrs.field(default=None, init=False)

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
