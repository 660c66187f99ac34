"""Per-key locks whose ownership travels with the asyncio context.

A task that holds a key (inside ``async with store.turn(source)``) owns it, and so does every task
it starts while it holds it (``asyncio.gather``, ``create_task`` and ``TaskGroup`` copy the
context): their calls on that key go straight through instead of waiting for a lock their own
turn holds. Ownership ends with the block, also for tasks that outlive it; a task that does not
own the key waits for it as before.
"""

from __future__ import annotations

import asyncio
import contextlib
from contextvars import ContextVar
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

import attrs

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

__all__ = ["KeyLocks"]


@attrs.define(eq=False)
class _Hold:
    """One holding of a key; ``active`` until the holding block ends."""

    active: bool = True


_NOBODY: Final[Mapping[tuple[object, str], _Hold]] = MappingProxyType({})
_OWNED: ContextVar[Mapping[tuple[object, str], _Hold]] = ContextVar(
    "hermes_sessions_owned_keys", default=_NOBODY
)


class KeyLocks:
    """One asyncio lock per key, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    def owns(self, key: str) -> bool:
        """Whether the current context holds ``key`` (in its own block or its parent's)."""
        hold = _OWNED.get().get((self, key))
        return hold is not None and hold.active

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold ``key`` for the block; re-entrant within the owning context."""
        if self.owns(key):
            yield
            return
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                hold = _Hold()
                token = _OWNED.set(MappingProxyType({**_OWNED.get(), (self, key): hold}))
                try:
                    yield
                finally:
                    hold.active = False
                    _OWNED.reset(token)
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def held(self) -> frozenset[str]:
        """The keys held or waited for right now."""
        return frozenset(self._locks)

    def __len__(self) -> int:
        return len(self._locks)
