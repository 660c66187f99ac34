"""A session of the OpenAI Agents SDK kept in a hermes-sessions store.

:class:`AgentsSession` implements the SDK's ``Session`` protocol (``get_items``, ``add_items``,
``pop_item``, ``clear_session``) on a :class:`~hermes_sessions.store.SessionStore` or an
:class:`~hermes_sessions.aio.AsyncSessionStore`, so a ``Runner`` keeps its history where the
rest of a host's conversations live: under a session key, with lineage, search, the
``session_search`` tool and, when asked (``resets=True``), the store's reset policy::

    session = AgentsSession("user-42", store)
    result = await Runner.run(agent, "hello", session=session)

The SDK's ``session_id`` names a conversation *lane* (a session key), not one transcript: a
reset, ``clear_session`` or compression gives the lane a new hermes session and keeps the old
one. Each input item is stored as one :class:`~hermes_sessions.models.Message` through
:mod:`hermes_sessions.formats.openai_responses` (text searchable, function calls counted) and
comes back equal to what was added, whatever its type. The SDK is imported when an
``AgentsSession`` is created, not when this module is.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import asyncio
import copy
import weakref
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

import attrs

from hermes_sessions.aio import AsyncSessionStore
from hermes_sessions.exceptions import BackendClosedError, MissingDependencyError
from hermes_sessions.formats.openai_responses import from_openai_responses, to_openai_responses
from hermes_sessions.models import JSONObject, Message, SessionSource
from hermes_sessions.store import SessionStore

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings

__all__ = ["PLATFORM", "AgentsSession", "item_message"]

PLATFORM: Final = "openai-agents"
"""The platform of the lanes :class:`AgentsSession` builds when it is given no ``source``.

.. versionadded:: 0.1.0
"""

_FORMAT: Final = "openai_responses"
_POP_ATTEMPTS: Final = 8
R = TypeVar("R")


def _sdk() -> Any:
    """The SDK's session-settings module, or a :class:`MissingDependencyError` naming the extra."""
    try:
        from agents.memory import session_settings  # noqa: PLC0415  # the SDK loads on first use
    except ImportError as error:
        raise MissingDependencyError(
            "openai-agents", extra="openai-agents", feature="AgentsSession"
        ) from error
    return session_settings


def item_message(item: Mapping[str, Any]) -> Message:
    """The message that stores ``item``, such that converting it back gives ``item`` again.

    The Responses converter maps the item types it knows onto message fields; when its result
    would not convert back to an equal item (a type it does not know, a key it drops), the
    item is kept whole in ``extra`` beside the fields it could fill, so the text stays
    searchable and the item still comes back exactly.

    .. versionadded:: 0.1.0
    """
    exact = copy.deepcopy(dict(item))
    try:
        message = from_openai_responses([exact])[0]
    except (TypeError, ValueError):
        role = exact.get("role")
        return Message(
            role=role if isinstance(role, str) and role else "assistant",
            extra={_FORMAT: {"item": exact}},
        )
    if to_openai_responses([message]) == [exact]:
        return message
    marks = message.extra.get(_FORMAT)
    bookkeeping = dict(marks) if isinstance(marks, dict) else {}
    bookkeeping["item"] = exact
    return attrs.evolve(message, extra={**message.extra, _FORMAT: bookkeeping})


async def _settled(awaitable: Awaitable[R]) -> R:
    """Await a write to its end even when the caller is cancelled, then pass the cancel on.

    A write cancelled half-way in its worker thread would leave the caller not knowing whether
    it happened; this waits for the outcome, so a cancelled ``add_items`` either stored every
    item or none, and the caller's ``CancelledError`` arrives after that is settled.
    """
    task = asyncio.ensure_future(awaitable)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as error:
            cancelled = cancelled or error
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved, so a failure under the cancel is not reported twice
        raise cancelled
    return task.result()


class AgentsSession:
    """An OpenAI Agents SDK ``Session`` whose history lives in a hermes-sessions store.

    Args:
        session_id: The SDK's session id: it names the conversation lane. Any string.
        store: A :class:`~hermes_sessions.store.SessionStore` (its blocking calls run in worker
            threads) or an :class:`~hermes_sessions.aio.AsyncSessionStore` (its per-key lock
            also orders this session's calls with the host's other work on the key).
        source: Where the conversation happens, when the lane is one of the host's own (a
            Telegram DM, a Slack thread): the lane is then that source's key. By default it is
            ``SessionSource(platform="openai-agents", chat_type="dm", chat_id=session_id)``
            (the id is percent-encoded in the key where needed).
        session_settings: The SDK's ``SessionSettings`` (or a dict of its fields); ``limit`` is
            the default of :meth:`get_items`. Defaults to ``SessionSettings()``.
        resets: Apply the store's reset policy to the lane when it is read, as an inbound
            message would (an idle or daily reset then starts an empty history). Off by
            default: like the SDK's own sessions, an ``AgentsSession`` never forgets by itself.

    The session does not own the store: :meth:`close` ends this session's use of it, and the
    host closes the store. Calls on one ``AgentsSession`` are serialised.

    .. versionadded:: 0.1.0
    """

    session_id: str
    """The SDK's session id, as given."""
    session_settings: SessionSettings | None
    """The SDK's settings, normalised as its own sessions do."""
    source: SessionSource
    """The source of the lane (the default one when none was given)."""
    key: str
    """The hermes session key of the lane."""

    def __init__(
        self,
        session_id: str,
        store: SessionStore | AsyncSessionStore,
        *,
        source: SessionSource | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        resets: bool = False,
    ) -> None:
        if not isinstance(session_id, str):
            raise TypeError(f"session_id must be a str, got {type(session_id).__name__}")
        settings = _sdk()
        if isinstance(store, AsyncSessionStore):
            self._aio: AsyncSessionStore | None = store
            self._store = store.store
        elif isinstance(store, SessionStore):
            self._aio = None
            self._store = store
        else:
            raise TypeError(
                f"store must be a SessionStore or an AsyncSessionStore, got {type(store).__name__}"
            )
        self.session_id = session_id
        self._resets = resets
        self.session_settings = (
            settings.SessionSettings()
            if session_settings is None
            else settings.coerce_session_settings(session_settings)
        )
        self.source = (
            source
            if source is not None
            else SessionSource(platform=PLATFORM, chat_type="dm", chat_id=session_id)
        )
        self.key = self._store.key_for(self.source)
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._closed = False

    def __repr__(self) -> str:
        return f"<AgentsSession {self.session_id!r} on {self.key!r}>"

    # -- running store calls off the event loop ----------------------------------------------------

    async def _call(self, function: Callable[[], R]) -> R:
        self._check_open()
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:  # one lock per event loop: Runner.run_sync runs a loop of its own
            lock = self._locks[loop] = asyncio.Lock()
        async with lock:
            if self._aio is None:
                return await asyncio.to_thread(function)
            async with self._aio.lock(self.key):
                return await asyncio.to_thread(function)

    def _check_open(self) -> None:
        if self._closed:
            raise BackendClosedError(f"AgentsSession {self.session_id!r}")

    def _current(self, *, create: bool) -> str | None:
        """The lane's current session id; ``None`` if it has none and ``create`` is off.

        With ``resets``, the store's reset policy is evaluated first (as for a message).
        """
        entry = self._store.backend.get_entry(self.key)
        if entry is None and not create:
            return None
        if entry is not None and not self._resets:
            return entry.session_id
        return self._store.get_or_create(self.source).entry.session_id

    # -- the Session protocol ----------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The lane's history in order: the newest ``limit`` items, or all of them.

        ``limit`` defaults to ``session_settings.limit``; ``None`` or a negative number means
        all, ``0`` none. Soft-deleted (popped) items are left out. With ``resets=True``,
        evaluates the lane's reset policy first, as an inbound message would: an expired lane
        starts a new, empty session.
        """
        effective = _sdk().resolve_session_limit(limit, self.session_settings)
        return cast("list[TResponseInputItem]", await self._call(lambda: self._read(effective)))

    def _read(self, limit: int | None) -> list[JSONObject]:
        if limit == 0:
            return []
        session_id = self._current(create=False)
        if session_id is None:
            return []
        if limit is None or limit < 0:
            return to_openai_responses(self._store.messages(session_id))
        return to_openai_responses(self._store.tail(session_id, limit))[-limit:]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` to the lane's current session, all or none, in one transaction.

        Each item becomes one message (see :func:`item_message`); the store's ``redact``
        applies to them as to every message.
        """
        self._check_open()
        if not items:
            return
        messages = [item_message(cast("Mapping[str, Any]", item)) for item in items]
        await _settled(self._call(lambda: self._append(messages)))

    def _append(self, messages: Sequence[Message]) -> None:
        session_id = self._current(create=True)
        assert session_id is not None  # noqa: S101  # created above
        self._store.append(session_id, *messages)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the newest item and return it; ``None`` when the lane has none.

        The message is soft-deleted (``active=False``), not erased:
        :meth:`SessionStore.restore <hermes_sessions.store.SessionStore.restore>` brings it back.
        A message the host stored itself that stands for several items (text and tool calls)
        gives up its last item; the others are stored again as new messages.
        """
        popped = await _settled(self._call(self._pop))
        return cast("TResponseInputItem | None", popped)

    def _pop(self) -> JSONObject | None:
        session_id = self._current(create=False)
        if session_id is None:
            return None
        for _ in range(_POP_ATTEMPTS):
            newest = self._store.tail(session_id, 1)
            if not newest:
                return None
            message = newest[0]
            assert message.id is not None  # noqa: S101  # stored messages have ids
            if not self._store.backend.set_active(session_id, [message.id], active=False):
                continue  # another writer removed it first: look again
            items = to_openai_responses([message])
            if len(items) > 1:
                rest = [item_message(item) for item in items[:-1]]
                self._store.append(session_id, *rest, touch=False)
            return items[-1]
        return None  # pragma: no cover  # needs eight lost races in a row

    async def clear_session(self, *, purge: bool = False) -> None:
        """Start the lane afresh: :meth:`get_items` returns nothing afterwards.

        By default the lane moves to a new session and the old one is kept (ended
        ``session_reset``, still searchable and resumable), as ``/new`` does. With ``purge``
        the old session and its messages are deleted instead.
        """
        await _settled(self._call(lambda: self._clear(purge=purge)))

    def _clear(self, *, purge: bool) -> None:
        entry = self._store.backend.get_entry(self.key)
        if entry is None:
            return
        if purge:
            self._store.delete(entry.session_id, force=True)
        elif self._store.session(entry.session_id).message_count:
            self._store.reset(self.key)

    def close(self) -> None:
        """End this session: later calls raise :class:`BackendClosedError` (a RuntimeError).

        The store stays open; the host that opened it closes it.
        """
        self._closed = True
