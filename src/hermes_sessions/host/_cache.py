"""SessionCache: one live object per session key (an agent, a sandbox), never a stale one.

Values are built for one session id. A value is returned only to a lookup of that same session
id, so when a key rotates — here, in another host, or from the CLI — the old value is evicted on
the next lookup instead of leaking the old conversation into the new one. ``on_rotate`` merely
evicts earlier, in the process that rotated.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeAlias, TypeVar

import attrs

from hermes_sessions.clock import SystemClock
from hermes_sessions.exceptions import HermesSessionsError, InvalidArgumentError
from hermes_sessions.models import SessionEntry
from hermes_sessions.protocols import Clock

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from hermes_sessions.store import RotateEvent

__all__ = ["CacheClosedError", "SessionCache"]


class _HasEntry(Protocol):
    """A lookup result: ``SessionLookup``, or the ``Turn`` of ``AsyncSessionStore.turn()``."""

    @property
    def entry(self) -> SessionEntry: ...


Located: TypeAlias = "SessionEntry | _HasEntry"
"""What names a key and its session: an entry, a lookup, or an async turn."""

logger = logging.getLogger(__name__)

T = TypeVar("T")
_Pending = asyncio.Future[Any] | concurrent.futures.Future[Any]


class CacheClosedError(HermesSessionsError, RuntimeError):
    """The :class:`SessionCache` was closed; values can no longer be added.

    .. versionadded:: 0.1.0
    """

    def __init__(self) -> None:
        super().__init__(
            "the session cache is closed; create a new SessionCache (closing evicted every value)"
        )


@attrs.define
class _Slot(Generic[T]):
    session_id: str
    value: T
    last_used: datetime


def _positive_size(_instance: object, _attribute: object, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgumentError(f"max_size must be an int >= 1, got {value!r}")


def _ttl(_instance: object, _attribute: object, value: object) -> None:
    if value is not None and (not isinstance(value, timedelta) or value <= timedelta(0)):
        raise InvalidArgumentError(f"idle_ttl must be a positive timedelta or None, got {value!r}")


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


@attrs.define(eq=False)
class SessionCache(Generic[T]):
    """An LRU cache of per-session objects with an idle TTL and an eviction callback.

    Args:
        max_size: How many values to keep; the least recently used goes first.
        idle_ttl: Values unused for longer are evicted (``None``: never for idleness).
        on_evict: Called exactly once with every value that leaves the cache — through LRU,
            idleness, a rotation, :meth:`evict`, replacement, :meth:`close` or
            :meth:`aclose`. A coroutine function runs on the event loop that was running when
            the cache was made (or ``loop``). Errors are logged, never raised.
        clock: Where the time comes from (:class:`~hermes_sessions.clock.FrozenClock` in tests).
        loop: The loop for an async ``on_evict`` when the cache is made outside one.

    Thread-safe; callbacks run outside the lock. Usable from async code: every method is quick
    and :meth:`aget_or_create` awaits an async factory.

    >>> from hermes_sessions.clock import FrozenClock
    >>> closed = []
    >>> cache = SessionCache(max_size=1, on_evict=closed.append, clock=FrozenClock())

    .. versionadded:: 0.1.0
    """

    max_size: int = attrs.field(default=128, validator=_positive_size, kw_only=True)
    idle_ttl: timedelta | None = attrs.field(
        default=timedelta(hours=1), validator=_ttl, kw_only=True
    )
    on_evict: Callable[[T], Any] | None = attrs.field(default=None, kw_only=True)
    clock: Clock = attrs.field(factory=SystemClock, kw_only=True)
    loop: asyncio.AbstractEventLoop | None = attrs.field(
        factory=_running_loop, kw_only=True, repr=False
    )
    _slots: OrderedDict[str, _Slot[T]] = attrs.field(factory=OrderedDict, init=False)
    _lock: threading.RLock = attrs.field(factory=threading.RLock, init=False, repr=False)
    _closed: bool = attrs.field(default=False, init=False)
    _tasks: set[_Pending] = attrs.field(factory=set, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if inspect.iscoroutinefunction(self.on_evict) and self.loop is None:
            raise InvalidArgumentError(
                "an async on_evict needs an event loop: create the SessionCache inside "
                "the running loop, or pass loop="
            )

    def __repr__(self) -> str:
        return f"<SessionCache {len(self)}/{self.max_size}>"

    def __len__(self) -> int:
        with self._lock:
            return len(self._slots)

    def __contains__(self, session_key: object) -> bool:
        with self._lock:
            return session_key in self._slots

    # -- reading and adding ------------------------------------------------------------------------

    def get(self, lookup: Located) -> T | None:
        """The value built for ``lookup``'s key *and* session id, or ``None``.

        A value built for another session id of the key (it rotated) is evicted here.
        """
        key, session_id = _key_and_id(lookup)
        evicted: list[T] = []
        with self._lock:
            now = self.clock.now()
            self._expire(now, evicted)
            slot = self._slots.get(key)
            value = None
            if slot is not None and slot.session_id != session_id:
                evicted.append(self._slots.pop(key).value)
            elif slot is not None:
                slot.last_used = now
                self._slots.move_to_end(key)
                value = slot.value
        self._evict_all(evicted)
        return value

    def put(self, lookup: Located, value: T) -> None:
        """Keep ``value`` for ``lookup``'s key and session id (evicting what it replaces)."""
        key, session_id = _key_and_id(lookup)
        evicted: list[T] = []
        with self._lock:
            if self._closed:
                raise CacheClosedError
            now = self.clock.now()
            self._expire(now, evicted)
            previous = self._slots.pop(key, None)
            if previous is not None and previous.value is not value:
                evicted.append(previous.value)
            self._slots[key] = _Slot(session_id=session_id, value=value, last_used=now)
            while len(self._slots) > self.max_size:
                evicted.append(self._slots.popitem(last=False)[1].value)
        self._evict_all(evicted)

    def get_or_create(self, lookup: Located, factory: Callable[[], T]) -> T:
        """The cached value for ``lookup``, or a new one from ``factory()``, kept.

        ``factory`` runs outside the lock; if two threads build a value for the same session at
        once, the first one kept wins and the other is evicted (``on_evict`` sees it).
        """
        value = self.get(lookup)
        if value is not None:
            return value
        return self._keep_first(lookup, factory())

    async def aget_or_create(self, lookup: Located, factory: Callable[[], Awaitable[T]]) -> T:
        """:meth:`get_or_create` with an async ``factory``."""
        value = self.get(lookup)
        if value is not None:
            return value
        return self._keep_first(lookup, await factory())

    def _keep_first(self, lookup: Located, value: T) -> T:
        key, session_id = _key_and_id(lookup)
        with self._lock:
            slot = self._slots.get(key)
            if slot is not None and slot.session_id == session_id and slot.value is not value:
                winner = slot.value
            else:
                winner = None
        if winner is not None:
            self._evict_all([value])
            return winner
        self.put(lookup, value)
        return value

    # -- evicting ----------------------------------------------------------------------------------

    def evict(self, session_key: str) -> bool:
        """Evict the value of ``session_key``; return whether there was one."""
        with self._lock:
            slot = self._slots.pop(session_key, None)
        if slot is None:
            return False
        self._evict_all([slot.value])
        return True

    def on_rotate(self, event: RotateEvent) -> None:
        """Evict the rotated key's value now; pass as ``store.on_rotate(cache.on_rotate)``."""
        with self._lock:
            slot = self._slots.get(event.session_key)
            if slot is None or slot.session_id == event.new_session_id:
                return
            del self._slots[event.session_key]
        self._evict_all([slot.value])

    def sweep(self) -> int:
        """Evict every value idle for longer than ``idle_ttl``; return how many."""
        evicted: list[T] = []
        with self._lock:
            self._expire(self.clock.now(), evicted)
        self._evict_all(evicted)
        return len(evicted)

    def close(self) -> None:
        """Evict every value and refuse new ones. Async callbacks are scheduled, not awaited."""
        with self._lock:
            self._closed = True
            evicted = [slot.value for slot in self._slots.values()]
            self._slots.clear()
        self._evict_all(evicted)

    async def aclose(self) -> None:
        """:meth:`close`, then wait for every async ``on_evict`` still running."""
        self.close()
        while self._tasks:
            pending = list(self._tasks)
            await asyncio.gather(*(_awaitable(future) for future in pending))
            self._tasks.difference_update(pending)

    def _expire(self, now: datetime, evicted: list[T]) -> None:
        if self.idle_ttl is None:
            return
        while self._slots:
            key, slot = next(iter(self._slots.items()))
            if now - slot.last_used <= self.idle_ttl:
                return
            del self._slots[key]
            evicted.append(slot.value)

    def _evict_all(self, values: list[T]) -> None:
        for value in values:
            self._evict_one(value)

    def _evict_one(self, value: T) -> None:
        if self.on_evict is None:
            return
        try:
            result = self.on_evict(value)
        except Exception:
            logger.exception("on_evict callback %r failed", self.on_evict)
            return
        if inspect.isawaitable(result):
            self._schedule(result)

    def _schedule(self, awaitable: Awaitable[Any]) -> None:
        loop = self.loop
        assert loop is not None  # noqa: S101  # checked at construction
        future: _Pending
        if _running_loop() is loop:
            future = loop.create_task(_logged(awaitable))
        else:
            future = asyncio.run_coroutine_threadsafe(_logged(awaitable), loop)
        self._tasks.add(future)
        future.add_done_callback(self._tasks.discard)


def _awaitable(future: _Pending) -> asyncio.Future[Any]:
    if isinstance(future, concurrent.futures.Future):
        return asyncio.wrap_future(future)
    return future


async def _logged(awaitable: Awaitable[Any]) -> None:
    try:
        await awaitable
    except Exception:
        logger.exception("async on_evict callback failed")


def _key_and_id(lookup: Located) -> tuple[str, str]:
    entry = lookup if isinstance(lookup, SessionEntry) else lookup.entry
    return entry.session_key, entry.session_id
