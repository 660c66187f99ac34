"""Per-key locks whose ownership travels with the asyncio context.

A task that holds a key (inside ``async with store.turn(source)``) owns it, and so does every task
it starts while it holds it (``asyncio.gather``, ``create_task`` and ``TaskGroup`` copy the
context): their calls on that key go straight through instead of waiting for a lock their own
turn holds. Ownership ends with the block, also for tasks that outlive it; a task that does not
own the key waits for it as before.

Keys never wait on each other in a cycle. A single operation on another key from a context that
holds a key (``operation=True``) does not wait for that key's block at all: each store operation
is atomic, so it needs no turn of its own. A block opened inside another (a nested ``turn`` or
``lock``) waits, unless the key's holder is itself waiting — directly or through others — for a
key this context holds: then :class:`~hermes_sessions.exceptions.TurnDeadlockError` is raised
at once, naming both, instead of hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
from contextvars import ContextVar
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

import attrs

from hermes_sessions.exceptions import TurnDeadlockError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

__all__ = ["KeyLocks"]


@attrs.define(eq=False)
class _Hold:
    """One holding of a key; ``active`` until the holding block ends."""

    key: str
    active: bool = True
    waiting: str | None = None
    """The key the holding context waits for right now (a nested block), if any."""


_NOBODY: Final[Mapping[tuple[object, str], _Hold]] = MappingProxyType({})
_OWNED: ContextVar[Mapping[tuple[object, str], _Hold]] = ContextVar(
    "hermes_sessions_owned_keys", default=_NOBODY
)


class KeyLocks:
    """One asyncio lock per key, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self._holders: dict[str, _Hold] = {}

    def owns(self, key: str) -> bool:
        """Whether the current context holds ``key`` (in its own block or its parent's)."""
        hold = _OWNED.get().get((self, key))
        return hold is not None and hold.active

    def _mine(self) -> list[_Hold]:
        """The active holds of the current context."""
        return [h for (locks, _), h in _OWNED.get().items() if locks is self and h.active]

    def _check_cycle(self, key: str, mine: list[_Hold]) -> None:
        """Raise if waiting for ``key`` would close a cycle back to a key of ``mine``."""
        held = {h.key for h in mine}
        seen: set[str] = set()
        current: str | None = key
        while current is not None and current not in seen:
            if current in held:
                raise TurnDeadlockError(key, sorted(held))
            seen.add(current)
            holder = self._holders.get(current)
            current = None if holder is None else holder.waiting

    @contextlib.asynccontextmanager
    async def hold(self, key: str, *, operation: bool = False) -> AsyncIterator[None]:
        """Hold ``key`` for the block; re-entrant within the owning context.

        With ``operation`` (one store operation), a context that holds another key goes
        straight through. A nested block that would close a cycle of waits raises
        ``TurnDeadlockError``.
        """
        if self.owns(key):
            yield
            return
        mine = self._mine()
        if operation and mine:
            yield
            return
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            if mine and lock.locked():
                self._check_cycle(key, mine)
            for held in mine:
                held.waiting = key
            try:
                await lock.acquire()
            finally:
                for held in mine:
                    held.waiting = None
            try:
                hold = _Hold(key)
                self._holders[key] = hold
                token = _OWNED.set(MappingProxyType({**_OWNED.get(), (self, key): hold}))
                try:
                    yield
                finally:
                    hold.active = False
                    del self._holders[key]
                    _OWNED.reset(token)
            finally:
                lock.release()
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def busy(self, key: str) -> bool:
        """Whether ``key`` is held or waited for right now (safe to ask from a worker thread)."""
        return key in self._locks

    def held(self) -> frozenset[str]:
        """The keys held or waited for right now."""
        return frozenset(self._locks)

    def __len__(self) -> int:
        return len(self._locks)
