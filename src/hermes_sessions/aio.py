"""AsyncSessionStore: the session store for asyncio hosts.

Every method is a coroutine that runs the synchronous :class:`~hermes_sessions.store.SessionStore`
method in a worker thread, so the event loop never blocks on disk or database I/O. Operations on
one session key are serialised in the event loop: two messages of one chat are processed in order
and can never race each other into two sessions. Use :meth:`AsyncSessionStore.turn` to hold a
key for a whole turn (look up the session, call the model, append the reply)::

    async with store.turn(source) as lookup:
        reply = await llm(await store.tail(lookup.session_id, 40))
        await store.append(lookup.session_id, user_message, reply)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Literal, ParamSpec, Self, TypeVar, Unpack

import attrs

from hermes_sessions.store import SessionStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence
    from datetime import datetime, timedelta
    from pathlib import Path
    from types import TracebackType

    from hermes_sessions.models import (
        AppendResult,
        Message,
        MessageContent,
        SessionEntry,
        SessionRecord,
        SessionSource,
    )
    from hermes_sessions.queries import (
        SearchHit,
        SearchQuery,
        SearchQueryFields,
        SessionPage,
        SessionQuery,
        SessionQueryFields,
    )
    from hermes_sessions.store import (
        AnchoredView,
        EraseReport,
        Lineage,
        PruneReport,
        RotateEvent,
        SessionLookup,
        StoreOptions,
    )
    from hermes_sessions.window import ContextWindow

__all__ = ["AsyncSessionStore"]

P = ParamSpec("P")
R = TypeVar("R")


class _KeyLocks:
    """One asyncio lock per key, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)


@attrs.define(eq=False)
class AsyncSessionStore:
    """The :class:`~hermes_sessions.store.SessionStore` API as coroutines.

    Args:
        store: The synchronous store to run (``store.store`` gives it back).
        executor: Where blocking calls run (default: asyncio's default thread pool).

    .. versionadded:: 0.1.0
    """

    store: SessionStore = attrs.field(validator=attrs.validators.instance_of(SessionStore))
    _executor: Executor | None = attrs.field(
        default=None,
        kw_only=True,
        validator=attrs.validators.optional(attrs.validators.instance_of(Executor)),
    )
    _keys: _KeyLocks = attrs.field(factory=_KeyLocks, init=False)

    def __repr__(self) -> str:
        return f"<AsyncSessionStore on {self.store.backend!r}>"

    @classmethod
    async def open(
        cls,
        home: Path | str | None = None,
        backend: Literal["sqlite", "jsonl", "memory"] = "sqlite",
        **options: Unpack[StoreOptions],
    ) -> AsyncSessionStore:
        """Open a store like :meth:`SessionStore.open`, without blocking the loop."""
        store = await asyncio.get_running_loop().run_in_executor(
            None, functools.partial(SessionStore.open, home, backend, **options)
        )
        return cls(store)

    async def _run(self, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, functools.partial(function, *args, **kwargs)
        )

    # -- lifecycle ---------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the store and its backend."""
        await self._run(self.store.close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def on_rotate(self, callback: Callable[[RotateEvent], None]) -> Callable[[RotateEvent], None]:
        """Register a rotation callback (it runs in the worker thread that rotated)."""
        return self.store.on_rotate(callback)

    # -- per-key serialisation ---------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lock(self, key: str) -> AsyncIterator[None]:
        """Hold ``key``: other operations on it (in this store) wait until the block ends."""
        async with self._keys.hold(key):
            yield

    @contextlib.asynccontextmanager
    async def turn(
        self, source: SessionSource, *, force_new: bool = False
    ) -> AsyncIterator[SessionLookup]:
        """Look up the source's session and hold its key until the block ends."""
        async with self._keys.hold(self.store.key_for(source)):
            yield await self._run(self.store.get_or_create, source, force_new=force_new)

    async def get_or_create(
        self, source: SessionSource, *, force_new: bool = False
    ) -> SessionLookup:
        """Async :meth:`SessionStore.get_or_create`, serialised per key."""
        async with self._keys.hold(self.store.key_for(source)):
            return await self._run(self.store.get_or_create, source, force_new=force_new)

    async def _keyed(
        self, key: str, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs
    ) -> R:
        async with self._keys.hold(key):
            return await self._run(function, *args, **kwargs)

    # -- key operations (serialised per key) -------------------------------------------------------

    async def touch(self, key: str, *, last_prompt_tokens: int | None = None) -> SessionEntry:
        """Async :meth:`SessionStore.touch`."""
        return await self._keyed(key, self.store.touch, key, last_prompt_tokens=last_prompt_tokens)

    async def reset(self, key: str, *, title: str | None = None) -> SessionEntry:
        """Async :meth:`SessionStore.reset` (``/new``)."""
        return await self._keyed(key, self.store.reset, key, title=title)

    async def suspend(self, key: str) -> SessionEntry:
        """Async :meth:`SessionStore.suspend`."""
        return await self._keyed(key, self.store.suspend, key)

    async def mark_resume_pending(self, key: str, reason: str) -> SessionEntry:
        """Async :meth:`SessionStore.mark_resume_pending`."""
        return await self._keyed(key, self.store.mark_resume_pending, key, reason)

    async def clear_resume_pending(self, key: str) -> SessionEntry:
        """Async :meth:`SessionStore.clear_resume_pending`."""
        return await self._keyed(key, self.store.clear_resume_pending, key)

    async def resume(
        self,
        key: str,
        target: str,
        *,
        requester: SessionSource | None = None,
        allow: Callable[[SessionSource | None, SessionRecord], bool] | None = None,
    ) -> SessionEntry:
        """Async :meth:`SessionStore.resume` (``/resume``)."""
        return await self._keyed(
            key, self.store.resume, key, target, requester=requester, allow=allow
        )

    async def branch(self, key: str, *, title: str | None = None) -> SessionEntry:
        """Async :meth:`SessionStore.branch` (``/branch``)."""
        return await self._keyed(key, self.store.branch, key, title=title)

    async def entry(self, key: str) -> SessionEntry:
        """Async :meth:`SessionStore.entry`."""
        return await self._run(self.store.entry, key)

    # -- transcripts -------------------------------------------------------------------------------

    async def append(self, session_id: str, *messages: Message, touch: bool = True) -> AppendResult:
        """Async :meth:`SessionStore.append`."""
        return await self._run(self.store.append, session_id, *messages, touch=touch)

    async def messages(
        self,
        session_id: str,
        *,
        after_id: int | None = None,
        before_id: int | None = None,
        limit: int | None = None,
        include_inactive: bool = False,
    ) -> list[Message]:
        """Async :meth:`SessionStore.messages`."""
        return await self._run(
            self.store.messages,
            session_id,
            after_id=after_id,
            before_id=before_id,
            limit=limit,
            include_inactive=include_inactive,
        )

    async def tail(self, session_id: str, n: int) -> list[Message]:
        """Async :meth:`SessionStore.tail`."""
        return await self._run(self.store.tail, session_id, n)

    async def context(
        self,
        session_id: str,
        *,
        max_messages: int | None = None,
        max_tokens: int | None = None,
        count_tokens: Callable[[Message], int] | None = None,
        keep_system: bool = True,
    ) -> ContextWindow:
        """Async :meth:`SessionStore.context`."""
        return await self._run(
            self.store.context,
            session_id,
            max_messages=max_messages,
            max_tokens=max_tokens,
            count_tokens=count_tokens,
            keep_system=keep_system,
        )

    async def transcript(self, session_id: str, *, include_inactive: bool = False) -> list[Message]:
        """Async :meth:`SessionStore.transcript`."""
        return await self._run(self.store.transcript, session_id, include_inactive=include_inactive)

    async def session(self, session_id: str) -> SessionRecord:
        """Async :meth:`SessionStore.session`."""
        return await self._run(self.store.session, session_id)

    async def compress(
        self, session_id: str, messages: Sequence[Message], *, holder: str
    ) -> SessionRecord:
        """Async :meth:`SessionStore.compress`."""
        return await self._run(self.store.compress, session_id, messages, holder=holder)

    async def retry(self, session_id: str) -> Message | None:
        """Async :meth:`SessionStore.retry`."""
        return await self._run(self.store.retry, session_id)

    async def undo(self, session_id: str, n: int = 1) -> list[Message]:
        """Async :meth:`SessionStore.undo`."""
        return await self._run(self.store.undo, session_id, n)

    async def restore(self, session_id: str, messages: Sequence[Message | int]) -> int:
        """Async :meth:`SessionStore.restore`."""
        return await self._run(self.store.restore, session_id, messages)

    async def retract(self, session_id: str, platform_message_id: str) -> Message | None:
        """Async :meth:`SessionStore.retract`."""
        return await self._run(self.store.retract, session_id, platform_message_id)

    async def edit(
        self, session_id: str, platform_message_id: str, content: MessageContent
    ) -> Message:
        """Async :meth:`SessionStore.edit`."""
        return await self._run(self.store.edit, session_id, platform_message_id, content)

    async def set_title(self, session_id: str, title: str | None) -> SessionRecord:
        """Async :meth:`SessionStore.set_title`."""
        return await self._run(self.store.set_title, session_id, title)

    # -- views and housekeeping --------------------------------------------------------------------

    async def list_sessions(
        self,
        query: SessionQuery | None = None,
        *,
        include_compressed: bool = False,
        **filters: Unpack[SessionQueryFields],
    ) -> SessionPage:
        """Async :meth:`SessionStore.list_sessions`."""
        return await self._run(
            self.store.list_sessions, query, include_compressed=include_compressed, **filters
        )

    async def lineage(self, session_id: str) -> Lineage:
        """Async :meth:`SessionStore.lineage`."""
        return await self._run(self.store.lineage, session_id)

    async def search(
        self,
        query: str | SearchQuery,
        *,
        group: Literal["lineage"] | None = None,
        **filters: Unpack[SearchQueryFields],
    ) -> list[SearchHit]:
        """Async :meth:`SessionStore.search`."""
        return await self._run(self.store.search, query, group=group, **filters)

    async def messages_around(
        self, session_id: str, message_id: int, window: int = 5
    ) -> list[Message]:
        """Async :meth:`SessionStore.messages_around`."""
        return await self._run(self.store.messages_around, session_id, message_id, window)

    async def anchored_view(
        self, session_id: str, message_id: int, *, window: int = 5, head: int = 2, tail: int = 2
    ) -> AnchoredView:
        """Async :meth:`SessionStore.anchored_view`."""
        return await self._run(
            self.store.anchored_view, session_id, message_id, window=window, head=head, tail=tail
        )

    async def prune(
        self,
        older_than: timedelta | datetime,
        *,
        dry_run: bool = True,
        sources: Sequence[str] | None = None,
    ) -> PruneReport:
        """Async :meth:`SessionStore.prune`."""
        return await self._run(self.store.prune, older_than, dry_run=dry_run, sources=sources)

    async def erase_user(self, user_id: str) -> EraseReport:
        """Async :meth:`SessionStore.erase_user`."""
        return await self._run(self.store.erase_user, user_id)

    async def rebuild_routing(self) -> int:
        """Async :meth:`SessionStore.rebuild_routing`."""
        return await self._run(self.store.rebuild_routing)
