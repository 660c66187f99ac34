"""The memory files and the LLM tool handlers for asyncio hosts (file locks wait in a thread)."""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import attrs

from hermes_sessions.aio._store import AsyncSessionStore
from hermes_sessions.memory import MemoryStore
from hermes_sessions.tools import SearchToolContext, handle_memory, handle_session_search

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

    from hermes_sessions.memory import MemoryContext, MemoryResult, MemorySnapshot, ScopedMemory
    from hermes_sessions.store import SessionStore

__all__ = ["AsyncMemoryStore", "handle_memory_async", "handle_session_search_async"]

P = ParamSpec("P")
R = TypeVar("R")


async def _in_thread(
    executor: Executor | None, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs
) -> R:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(executor, functools.partial(function, *args, **kwargs))


@attrs.define(eq=False)
class AsyncMemoryStore:
    """The :class:`~hermes_sessions.memory.MemoryStore` operations as coroutines.

    Reads of the files and writes (which wait for the file lock) run in a worker thread;
    ``snapshot()``, ``path()`` and ``limit()`` read nothing and stay plain methods.

    .. versionadded:: 0.1.0
    """

    store: MemoryStore = attrs.field(validator=attrs.validators.instance_of(MemoryStore))
    executor: Executor | None = attrs.field(default=None, kw_only=True)
    """Where blocking calls run (default: asyncio's default thread pool)."""

    def path(self, target: str) -> Path:
        """:meth:`MemoryStore.path <hermes_sessions.memory.MemoryStore.path>`."""
        return self.store.path(target)

    def limit(self, target: str) -> int:
        """:meth:`MemoryStore.limit <hermes_sessions.memory.MemoryStore.limit>`."""
        return self.store.limit(target)

    def snapshot(self) -> MemorySnapshot:
        """The frozen snapshot (in memory: no I/O)."""
        return self.store.snapshot()

    async def entries(self, target: str) -> tuple[str, ...]:
        """Async :meth:`MemoryStore.entries <hermes_sessions.memory.MemoryStore.entries>`."""
        return await _in_thread(self.executor, self.store.entries, target)

    async def reload(self) -> MemorySnapshot:
        """Async :meth:`MemoryStore.reload <hermes_sessions.memory.MemoryStore.reload>`."""
        return await _in_thread(self.executor, self.store.reload)

    async def add(self, target: str, content: str) -> MemoryResult:
        """Async :meth:`MemoryStore.add <hermes_sessions.memory.MemoryStore.add>`."""
        return await _in_thread(self.executor, self.store.add, target, content)

    async def replace(self, target: str, old_text: str, new_content: str) -> MemoryResult:
        """Async :meth:`MemoryStore.replace <hermes_sessions.memory.MemoryStore.replace>`."""
        return await _in_thread(self.executor, self.store.replace, target, old_text, new_content)

    async def remove(self, target: str, old_text: str) -> MemoryResult:
        """Async :meth:`MemoryStore.remove <hermes_sessions.memory.MemoryStore.remove>`."""
        return await _in_thread(self.executor, self.store.remove, target, old_text)

    async def repair(self, target: str) -> MemoryResult:
        """Async :meth:`MemoryStore.repair <hermes_sessions.memory.MemoryStore.repair>`."""
        return await _in_thread(self.executor, self.store.repair, target)


async def handle_memory_async(
    store: MemoryStore | ScopedMemory | AsyncMemoryStore,
    arguments: Mapping[str, Any] | str,
    *,
    sessions: SessionStore | AsyncSessionStore | None = None,
    current_key: str | None = None,
    context: MemoryContext | None = None,
) -> dict[str, Any]:
    """:func:`~hermes_sessions.tools.handle_memory` without blocking the event loop.

    ``sessions`` (a session store, sync or async) and ``current_key`` refuse a call from an
    incognito lane, as there; ``context`` is the lane and user a ``ScopedMemory`` call comes from.

    .. versionadded:: 0.1.0
    """
    lanes = sessions.store if isinstance(sessions, AsyncSessionStore) else sessions
    memory = store.store if isinstance(store, AsyncMemoryStore) else store
    executor = store.executor if isinstance(store, AsyncMemoryStore) else None
    return await _in_thread(
        executor,
        handle_memory,
        memory,
        arguments,
        sessions=lanes,
        current_key=current_key,
        context=context,
    )


async def handle_session_search_async(
    context: SearchToolContext, arguments: Mapping[str, Any] | str
) -> dict[str, Any]:
    """:func:`~hermes_sessions.tools.handle_session_search` without blocking the event loop.

    .. versionadded:: 0.1.0
    """
    if not isinstance(context, SearchToolContext):
        raise TypeError(f"expected a SearchToolContext, got {type(context).__name__}")
    return await _in_thread(None, handle_session_search, context, arguments)
