"""AsyncSessionStore: the session store for asyncio hosts.

Every method is a coroutine that runs the synchronous :class:`~hermes_sessions.store.SessionStore`
method in a worker thread (writes in a pool of their own, ``_writers``), so the event loop never
blocks on disk or database I/O. Operations on one session key are serialised in the event loop:
two messages of one chat are processed in order and never race into two sessions. Use
:meth:`AsyncSessionStore.turn` to hold a key for a whole turn (look up the session, call the
model, append the reply); inside the block, and in tasks it starts, the key's operations run
without waiting for the turn::

    async with store.turn(source, platform_message_id=message.platform_message_id) as turn:
        if turn.redelivered is None:  # checked before the reset policy could rotate the key
            reply = await llm((await store.context(turn.session_id, max_messages=40)).messages)
            await store.append(turn.session_id, message, reply)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Literal, ParamSpec, Self, TypeVar, Unpack

import attrs

from hermes_sessions.aio import _maintenance, _migration
from hermes_sessions.aio._callbacks import LoopCallbacks
from hermes_sessions.aio._ledger import AsyncLedger
from hermes_sessions.aio._ownership import KeyLocks
from hermes_sessions.aio._searching import AsyncSearches
from hermes_sessions.aio._turn import Turn, accepted_turn
from hermes_sessions.aio._writers import WritePool
from hermes_sessions.store import SessionStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence
    from datetime import datetime, timedelta
    from pathlib import Path
    from types import TracebackType

    from hermes_sessions.cipher import Cipher
    from hermes_sessions.models import (
        Message,
        MessageContent,
        SessionEntry,
        SessionRecord,
        SessionSource,
    )
    from hermes_sessions.queries import (
        SessionPage,
        SessionQuery,
        SessionQueryFields,
    )
    from hermes_sessions.results import AppendResult
    from hermes_sessions.state import SessionState, StateDelta
    from hermes_sessions.store import (
        EndingSession,
        EraseReport,
        Lineage,
        MemoryEraser,
        PruneReport,
        RetentionPolicy,
        RetentionReport,
        RotateEvent,
        SessionLookup,
        StoreOptions,
    )
    from hermes_sessions.usage import Usage
    from hermes_sessions.window import ContextWindow

__all__ = ["AsyncSessionStore", "BeforeRotateCallback", "RotateCallback", "Turn"]

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

RotateCallback = Callable[["RotateEvent"], None] | Callable[["RotateEvent"], Awaitable[None]]
"""An ``on_rotate`` callback: a function, or a coroutine function run on the event loop.

.. versionadded:: 0.1.0
"""

BeforeRotateCallback = (
    Callable[["EndingSession"], None] | Callable[["EndingSession"], Awaitable[None]]
)
"""A ``before_rotate`` callback: a function, or a coroutine function the rotation waits for.

.. versionadded:: 0.1.0
"""


@attrs.define(eq=False)
class AsyncSessionStore(AsyncSearches):
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
    _keys: KeyLocks = attrs.field(factory=KeyLocks, init=False)
    _writes: WritePool = attrs.field(init=False)  # see _writers
    _turns: dict[str, list[Turn]] = attrs.field(factory=dict, init=False)
    _on_loop: LoopCallbacks = attrs.field(factory=LoopCallbacks, init=False)
    _maintenance: asyncio.Task[None] | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        self._writes = WritePool(self.store.backend, self._executor)
        self.store.on_rotate(self._follow)

    def __repr__(self) -> str:
        return f"<AsyncSessionStore on {self.store.backend!r}>"

    @classmethod
    async def open(
        cls,
        home: Path | str | None = None,
        backend: Literal["sqlite", "jsonl", "memory", "postgres"] = "sqlite",
        *,
        dsn: str | None = None,
        cipher: Cipher | None = None,
        **options: Unpack[StoreOptions],
    ) -> AsyncSessionStore:
        """Open a store like :meth:`SessionStore.open`, without blocking the loop (await it).

        ``store = await AsyncSessionStore.open(home)``; ``async with store:`` closes it.
        """
        opening = functools.partial(SessionStore.open, dsn=dsn, cipher=cipher, **options)
        return cls(await asyncio.get_running_loop().run_in_executor(None, opening, home, backend))

    async def _run(self, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        loop = self._on_loop.loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, functools.partial(function, *args, **kwargs)
        )

    # -- lifecycle ---------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Stop the maintenance schedule, wait for coroutine callbacks, close the store."""
        if self._maintenance is not None:
            self._maintenance.cancel()
            await asyncio.gather(self._maintenance, return_exceptions=True)
        await self._on_loop.drain()
        await self._run(self.store.close)
        self._writes.shutdown()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def on_rotate(self, callback: RotateCallback) -> RotateCallback:
        """Call ``callback`` after a key's session id changes; usable as a decorator.

        A plain function runs in the worker thread that rotated, before the call returns. A
        coroutine function runs as a task on the event loop, after the rotation (``aclose``
        waits for such tasks); what it raises is logged, as for plain callbacks.
        """
        if not inspect.iscoroutinefunction(callback):
            self.store.on_rotate(callback)  # type: ignore[arg-type]  # not a coroutine function
            return callback
        self._on_loop.capture()
        self.store.on_rotate(self._on_loop.later(callback, "on_rotate"))
        return callback

    def before_rotate(self, callback: BeforeRotateCallback) -> BeforeRotateCallback:
        """Call ``callback`` before a rotation ends a session; usable as a decorator.

        See :meth:`SessionStore.before_rotate`. A plain function runs in the worker thread that
        rotates. A coroutine function runs on the event loop and the rotation waits for it (the
        worker thread waits, the loop does not), so the session is still open while it runs; it
        may read the store but must not write to the rotating key, which the rotation holds.
        What it raises is logged and the rotation goes ahead.
        """
        if not inspect.iscoroutinefunction(callback):
            self.store.before_rotate(callback)  # type: ignore[arg-type]  # not a coroutine function
            return callback
        self._on_loop.capture()
        self.store.before_rotate(self._on_loop.waited(callback, "before_rotate"))
        return callback

    def _follow(self, event: RotateEvent) -> None:
        """Keep the turns held on a rotated key pointing at its new session."""
        if event.entry is not None:
            for turn in self._turns.get(event.session_key, ()):
                turn.entry = event.entry

    # -- per-key serialisation ---------------------------------------------------------------------

    def key_for(self, source: SessionSource) -> str:
        """The session key of ``source`` (no I/O, so not a coroutine)."""
        return self.store.key_for(source)

    @property
    def ledger(self) -> AsyncLedger:
        """:attr:`SessionStore.ledger` as coroutines (``ledger=True``; ``docs/ledger.md``)."""
        return AsyncLedger(self.store.ledger, self._writes, self._keys)

    def is_incognito(self, key_or_session_id: str) -> bool:
        """:meth:`SessionStore.is_incognito` (memory only, so not a coroutine)."""
        return self.store.is_incognito(key_or_session_id)

    @contextlib.asynccontextmanager
    async def lock(self, key: str) -> AsyncIterator[None]:
        """Hold ``key`` until the block ends (re-entrant: the block's own tasks do not wait)."""
        async with self._keys.hold(key):
            yield

    @contextlib.asynccontextmanager
    async def turn(
        self,
        source: SessionSource,
        *,
        force_new: bool = False,
        platform_message_id: str | None = None,
        message: Message | None = None,
        holder: str | None = None,
    ) -> AsyncIterator[Turn]:
        """Look up the source's session and hold its key until the block ends.

        Inside the block, and in tasks it starts (``gather``, ``create_task``), ``reset``,
        ``resume``, ``branch``, ``get_or_create``, ``touch`` and ``append`` on the same key run at
        once; other tasks wait. The :class:`Turn` follows rotations made in the block. With
        ``platform_message_id``, ``turn.redelivered`` reports a redelivery (``get_or_create``).
        With the turn ledger, ``message`` and ``holder`` accept the message first (``ledger.md``).
        """
        key = self.store.key_for(source)
        pmid, lookup_of = platform_message_id, self.store.get_or_create
        async with self._keys.hold(key):
            if message is not None:
                turn = await accepted_turn(self.ledger, key, source, message, holder)
            else:
                lookup = await self._writes.read(
                    lookup_of, source, force_new=force_new, platform_message_id=pmid
                )
                turn = Turn(key=key, lookup=lookup, entry=lookup.entry)
            self._turns.setdefault(key, []).append(turn)
            try:
                yield turn
            finally:
                held = self._turns[key]
                held.remove(turn)
                if not held:
                    del self._turns[key]

    async def get_or_create(
        self,
        source: SessionSource,
        *,
        force_new: bool = False,
        platform_message_id: str | None = None,
    ) -> SessionLookup:
        """Async :meth:`SessionStore.get_or_create`, serialised per key."""
        key, pmid = self.store.key_for(source), platform_message_id
        lookup_of = self.store.get_or_create
        return await self._keyed(
            key, lookup_of, source, force_new=force_new, platform_message_id=pmid
        )

    async def _keyed(
        self, key: str, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs
    ) -> R:
        async with self._keys.hold(key, operation=True):
            return await self._writes.run(function, *args, **kwargs)

    # -- key operations (serialised per key) -------------------------------------------------------

    async def touch(self, key: str, *, last_prompt_tokens: int | None = None) -> SessionEntry:
        """Async :meth:`SessionStore.touch`."""
        return await self._keyed(key, self.store.touch, key, last_prompt_tokens=last_prompt_tokens)

    async def reset(
        self, key: str, *, source: SessionSource | None = None, title: str | None = None
    ) -> SessionEntry:
        """Async :meth:`SessionStore.reset` (``/new``)."""
        return await self._keyed(key, self.store.reset, key, source=source, title=title)

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
        source: SessionSource | None = None,
        requester: SessionSource | None = None,
        allow: Callable[[SessionSource | None, SessionRecord], bool] | None = None,
    ) -> SessionEntry:
        """Async :meth:`SessionStore.resume` (``/resume``)."""
        return await self._keyed(
            key,
            self.store.resume,
            key,
            target,
            source=source,
            requester=requester,
            allow=allow,
        )

    async def branch(
        self, key: str, *, source: SessionSource | None = None, title: str | None = None
    ) -> SessionEntry:
        """Async :meth:`SessionStore.branch` (``/branch``)."""
        return await self._keyed(key, self.store.branch, key, source=source, title=title)

    async def entry(self, key: str) -> SessionEntry:
        """Async :meth:`SessionStore.entry`."""
        return await self._writes.read(self.store.entry, key)

    async def seen(self, key_or_session_id: str, platform_message_id: str) -> Message | None:
        """Async :meth:`SessionStore.seen` (call it before the model)."""
        return await self._writes.read(self.store.seen, key_or_session_id, platform_message_id)

    # -- transcripts -------------------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        *messages: Message,
        touch: bool = True,
        usage: Usage | None = None,
        state_delta: StateDelta | None = None,
        if_revision: int | None = None,
    ) -> AppendResult:
        """Async :meth:`SessionStore.append`."""
        return await self._writes.write(
            self.store.append,
            session_id,
            *messages,
            touch=touch,
            usage=usage,
            state_delta=state_delta,
            if_revision=if_revision,
        )

    async def state(self, session_id: str) -> SessionState:
        """Async :meth:`SessionStore.state`."""
        return await self._writes.read(self.store.state, session_id)

    async def update_state(
        self,
        delta: StateDelta,
        *,
        session_id: str | None = None,
        if_revision: int | None = None,
    ) -> SessionRecord | None:
        """Async :meth:`SessionStore.update_state`."""
        return await self._writes.write(
            self.store.update_state,
            delta,
            session_id=session_id,
            if_revision=if_revision,
        )

    async def record_usage(self, session_id: str, usage: Usage) -> SessionRecord:
        """Async :meth:`SessionStore.record_usage`."""
        return await self._writes.write(self.store.record_usage, session_id, usage)

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
        return await self._writes.read(self.store.tail, session_id, n)

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
        return await self._writes.read(
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
        return await self._writes.read(self.store.session, session_id)

    @contextlib.asynccontextmanager
    async def compression_lease(self, session_id: str, holder: str) -> AsyncIterator[None]:
        """Async :meth:`SessionStore.compression_lease`: hold it while the model summarises."""
        lease = self.store.compression_lease(session_id, holder)
        await self._run(lease.__enter__)
        try:
            yield
        except BaseException as error:
            if not await self._run(lease.__exit__, type(error), error, error.__traceback__):
                raise
        else:
            await self._run(lease.__exit__, None, None, None)

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

    async def retract(self, key_or_session_id: str, platform_message_id: str) -> Message | None:
        """Async :meth:`SessionStore.retract`."""
        return await self._run(self.store.retract, key_or_session_id, platform_message_id)

    async def edit(
        self, key_or_session_id: str, platform_message_id: str, content: MessageContent
    ) -> Message:
        """Async :meth:`SessionStore.edit`."""
        return await self._run(self.store.edit, key_or_session_id, platform_message_id, content)

    async def archive(self, session_id: str) -> SessionRecord:
        """Async :meth:`SessionStore.archive`."""
        return await self._run(self.store.archive, session_id)

    async def unarchive(self, session_id: str) -> SessionRecord:
        """Async :meth:`SessionStore.unarchive`."""
        return await self._run(self.store.unarchive, session_id)

    async def delete(self, session_id: str, *, force: bool = False) -> tuple[str, ...]:
        """Async :meth:`SessionStore.delete`."""
        return await self._run(self.store.delete, session_id, force=force)

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

    async def prune(
        self,
        older_than: timedelta | datetime,
        *,
        dry_run: bool = True,
        sources: Sequence[str] | None = None,
    ) -> PruneReport:
        """Async :meth:`SessionStore.prune`; keys held in this store count as active work."""
        held = self._keys.held()
        return await self._run(
            self.store.prune, older_than, dry_run=dry_run, sources=sources, busy=self._busy(held)
        )

    async def maintain(
        self, policy: RetentionPolicy | None = None, *, dry_run: bool = False
    ) -> RetentionReport:
        """Async :meth:`SessionStore.maintain`; keys held in this store count as active work.

        A key is held by a :meth:`turn` or :meth:`lock` block, or waited for, when the pass starts
        or when it is about to delete one of the key's sessions.
        """
        held = self._keys.held()
        return await self._run(self.store.maintain, policy, dry_run=dry_run, busy=self._busy(held))

    def _busy(self, held: frozenset[str]) -> Callable[[str], bool]:
        """Keys held when the pass started, or held (or waited for) now."""
        return lambda key: key in held or self._keys.busy(key)

    def start_maintenance(
        self,
        every: timedelta,
        policy: RetentionPolicy | None = None,
        *,
        on_report: Callable[[RetentionReport], object] | None = None,
    ) -> asyncio.Task[None]:
        """Run :meth:`maintain` now and then every ``every`` (for real), until stopped.

        ``policy`` defaults to the store's ``retention``. Each report goes to ``on_report``; a
        failing pass is logged and retried next time. Cancel the returned task to stop early;
        :meth:`aclose` stops it. One schedule per store: starting another while one runs raises.
        """
        _maintenance.check_schedule(every, policy or self.store.retention, self._maintenance)
        task = asyncio.get_running_loop().create_task(
            _maintenance.run_schedule(functools.partial(self.maintain, policy), every, on_report),
            name="hermes-sessions retention",
        )
        self._maintenance = task
        return task

    async def erase_user(
        self,
        platform: str,
        *user_ids: str,
        dry_run: bool = False,
        memory: MemoryEraser | None = None,
    ) -> EraseReport:
        """Async :meth:`SessionStore.erase_user`."""
        return await self._run(
            self.store.erase_user, platform, *user_ids, dry_run=dry_run, memory=memory
        )

    migrate_keys = _migration.migrate_keys  # async SessionStore.migrate_keys, a dry run by default

    async def rebuild_routing(self) -> int:
        """Async :meth:`SessionStore.rebuild_routing`."""
        return await self._run(self.store.rebuild_routing)
