"""hermes-sessions for asyncio hosts: the store, the memory files and the tools as coroutines.

* :class:`AsyncSessionStore` — every :class:`~hermes_sessions.store.SessionStore` method as a
  coroutine, serialised per key, with re-entrant turns (:class:`Turn`).
* :class:`AsyncMemoryStore` — the :class:`~hermes_sessions.memory.MemoryStore` operations.
* :func:`handle_memory_async`, :func:`handle_session_search_async` — the LLM tool handlers.

Blocking work runs in worker threads, so the event loop never waits on disk or a database.
"""

from __future__ import annotations

from hermes_sessions.aio._memory import (
    AsyncMemoryStore,
    handle_memory_async,
    handle_session_search_async,
)
from hermes_sessions.aio._store import (
    AsyncSessionStore,
    BeforeRotateCallback,
    RotateCallback,
    Turn,
)

__all__ = [
    "AsyncMemoryStore",
    "AsyncSessionStore",
    "BeforeRotateCallback",
    "RotateCallback",
    "Turn",
    "handle_memory_async",
    "handle_session_search_async",
]
