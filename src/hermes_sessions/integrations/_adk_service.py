"""The ADK session service; :mod:`hermes_sessions.integrations.adk` loads it on first use.

It imports ``google.adk`` at the top, so nothing imports this module but that one's
``__getattr__``, which names the extra when ADK is missing.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Self, TypeVar
from urllib.parse import quote

from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events import Event
from google.adk.sessions import BaseSessionService, Session, State
from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
from google.genai import types
from pydantic_core import to_jsonable_python
from typing_extensions import override

from hermes_sessions.aio import AsyncSessionStore
from hermes_sessions.exceptions import ConflictError
from hermes_sessions.exceptions import SessionNotFoundError as StoreSessionNotFoundError
from hermes_sessions.integrations.adk import PLATFORM
from hermes_sessions.models import Message, SessionSource
from hermes_sessions.state import StateScope
from hermes_sessions.store import SessionStore
from hermes_sessions.text import searchable_text

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import TracebackType

    from hermes_sessions.models import SessionEntry, SessionRecord

__all__ = ["HermesSessionService", "event_message", "lane_source", "message_event"]

_EXTRA_KEY: Final = "adk"
_READ_ATTEMPTS: Final = 8
_DELETE_ATTEMPTS: Final = 8
STALE_MESSAGE: Final = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)
R = TypeVar("R")


def lane_source(app_name: str, user_id: str, session_id: str) -> SessionSource:
    """The source of the lane that holds one ADK session.

    ``scope_id`` is the app, ``user_id`` the user and ``chat_id`` the session id; the thread
    holds the app and user (percent-encoded, ``/`` between them) so that the key tells apart
    sessions of one id in different apps or of different users.
    """
    thread = f"{quote(app_name, safe='')}/{quote(user_id, safe='')}"
    return SessionSource(
        platform=PLATFORM,
        chat_type="dm",
        scope_id=app_name,
        user_id=user_id,
        chat_id=session_id,
        thread_id=thread,
    )


def event_message(event: Event) -> Message:
    """The message that stores ``event``: its text as content, the whole event in ``extra``."""
    parts = event.content.parts if event.content is not None else None
    text = "\n".join(part.text for part in parts or () if part.text and not part.thought)
    return Message(
        role="user" if event.author == "user" else "assistant",
        content=text or None,
        timestamp=datetime.fromtimestamp(event.timestamp, UTC),
        extra={_EXTRA_KEY: {"event": event.model_dump(mode="json", exclude_none=True)}},
    )


def message_event(message: Message) -> Event:
    """The event a message stores; a message the host added itself becomes a text event."""
    held = message.extra.get(_EXTRA_KEY)
    if isinstance(held, dict) and isinstance(held.get("event"), dict):
        return Event.model_validate(held["event"])
    user = message.role == "user"
    text = message.content if isinstance(message.content, str) else searchable_text(message)
    stamp = message.timestamp or datetime.now(UTC)
    return Event(
        id=f"hermes-{message.id}",
        invocation_id="",
        author="user" if user else message.role,
        content=types.Content(role="user" if user else "model", parts=[types.Part(text=text)]),
        timestamp=stamp.timestamp(),
    )


def _marker(record: SessionRecord) -> str:
    return f"{record.id}@{record.revision}"


def _revision_of(marker: str | None, session_id: str) -> int | None:
    """The revision ``marker`` was read at, if it is a marker of ``session_id``; else ``None``."""
    if marker is None:
        return None
    held, _, revision = marker.rpartition("@")
    if held != session_id or not revision.isdigit():
        return -1  # read from another session of the lane (or not by us): always stale
    return int(revision)


class HermesSessionService(BaseSessionService):
    """An ADK session service whose sessions, events and state live in a hermes-sessions store.

    Args:
        store: A :class:`~hermes_sessions.store.SessionStore` (its blocking calls run in worker
            threads) or an :class:`~hermes_sessions.aio.AsyncSessionStore` (its per-key lock
            also orders the service's calls with the host's other work on the lane).
        resets: Apply the store's reset policy for platform ``adk`` when a session is read,
            as an inbound message would. Off by default: an ADK session never resets.
        owns_store: Close the store when the service closes. Off by default: a store handed
            in is the host's, which closes it (as ADK's ``DatabaseSessionService`` leaves an
            engine it was given open).

    ``async with HermesSessionService(store) as service:`` gives the service and calls
    :meth:`close` when the block ends, as ADK's own services do.

    .. versionadded:: 0.1.0
    """

    store: SessionStore
    """The store the sessions live in."""

    def __init__(
        self,
        store: SessionStore | AsyncSessionStore,
        *,
        resets: bool = False,
        owns_store: bool = False,
    ) -> None:
        if isinstance(store, AsyncSessionStore):
            self._aio: AsyncSessionStore | None = store
            self.store = store.store
        elif isinstance(store, SessionStore):
            self._aio = None
            self.store = store
        else:
            raise TypeError(
                f"store must be a SessionStore or an AsyncSessionStore, got {type(store).__name__}"
            )
        self._resets = resets
        self._owns_store = owns_store
        self._closed = False

    def __repr__(self) -> str:
        return f"<HermesSessionService on {self.store!r}>"

    # -- lifecycle ---------------------------------------------------------------------------------

    async def close(self) -> None:
        """Release what the service owns: the store when ``owns_store=True``; else nothing.

        Closing again does nothing.
        """
        if self._closed:
            return
        self._closed = True
        if not self._owns_store:
            return
        if self._aio is not None:
            await self._aio.aclose()
        else:
            await asyncio.to_thread(self.store.close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def _call(self, key: str | None, function: Callable[[], R]) -> R:
        if self._aio is None or key is None:
            return await asyncio.to_thread(function)
        async with self._aio.lock(key):
            return await asyncio.to_thread(function)

    # -- state -------------------------------------------------------------------------------------

    @staticmethod
    def _delta(
        app_name: str, user_id: str, session_id: str, flat: Mapping[str, Any]
    ) -> dict[StateScope, dict[str, Any]]:
        """ADK's flat state (``app:``/``user:``/``temp:`` prefixes) as a delta on store scopes."""
        app: dict[str, Any] = {}
        user: dict[str, Any] = {}
        own: dict[str, Any] = {}
        for key, value in to_jsonable_python(dict(flat)).items():
            if key.startswith(State.TEMP_PREFIX):
                continue
            if key.startswith(State.APP_PREFIX):
                app[key.removeprefix(State.APP_PREFIX)] = value
            elif key.startswith(State.USER_PREFIX):
                user[key.removeprefix(State.USER_PREFIX)] = value
            else:
                own[key] = value
        scopes = (
            (StateScope.app(app_name), app),
            (StateScope.user(app_name, PLATFORM, user_id), user),
            (StateScope.session(session_id), own),
        )
        return {scope: changes for scope, changes in scopes if changes}

    def _state(self, app_name: str, user_id: str, session_id: str) -> dict[str, Any]:
        """The session's state as ADK shows it: its own keys, then ``app:`` and ``user:`` ones."""
        app = StateScope.app(app_name).id
        user = StateScope.user(app_name, PLATFORM, user_id).id
        own = StateScope.session(session_id).id
        found = self.store.backend.get_state([app, user, own])
        merged: dict[str, Any] = dict(found.get(own, {}))
        merged.update({State.APP_PREFIX + k: v for k, v in found.get(app, {}).items()})
        merged.update({State.USER_PREFIX + k: v for k, v in found.get(user, {}).items()})
        return merged

    def _session(
        self, source: SessionSource, record: SessionRecord, events: list[Event]
    ) -> Session:
        assert source.scope_id is not None  # noqa: S101  # lane sources carry all three
        assert source.user_id is not None  # noqa: S101
        assert source.chat_id is not None  # noqa: S101
        session = Session(
            id=source.chat_id,
            app_name=source.scope_id,
            user_id=source.user_id,
            state=self._state(source.scope_id, source.user_id, record.id),
            events=events,
            last_update_time=self._last_update(record),
        )
        session._storage_update_marker = _marker(record)  # noqa: SLF001  # ADK's staleness slot
        return session

    def _last_update(self, record: SessionRecord) -> float:
        """When ADK last changed the session: its newest event's time, else its creation."""
        newest = self.store.tail(record.id, 1)
        if newest:
            return message_event(newest[0]).timestamp
        return record.started_at.timestamp()

    def _entry(self, source: SessionSource) -> SessionEntry | None:
        entry = self.store.backend.get_entry(self.store.key_for(source))
        if entry is None or not self._resets:
            return entry
        return self.store.get_or_create(source).entry

    # -- the session service -----------------------------------------------------------------------

    @override
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create a session (a new lane); an id already in use raises ``AlreadyExistsError``.

        ``state`` is split by prefix: ``app:`` keys go to the app's scope, ``user:`` keys to
        the user's, ``temp:`` keys are dropped and the rest is the session's own state.
        """
        chosen = session_id.strip() if session_id and session_id.strip() else str(uuid.uuid4())
        source = lane_source(app_name, user_id, chosen)
        initial = dict(state or {})
        return await self._call(self.store.key_for(source), lambda: self._create(source, initial))

    def _create(self, source: SessionSource, state: dict[str, Any]) -> Session:
        taken = AlreadyExistsError(f"Session with id {source.chat_id} already exists.")
        if self.store.backend.get_entry(self.store.key_for(source)) is not None:
            raise taken
        lookup = self.store.get_or_create(source)
        if not lookup.created:
            raise taken
        record = self.store.session(lookup.entry.session_id)
        assert source.scope_id is not None  # noqa: S101
        assert source.user_id is not None  # noqa: S101
        delta = self._delta(source.scope_id, source.user_id, record.id, state)
        if delta:
            record = self.store.update_state(delta, session_id=record.id) or record
        return self._session(source, record, [])

    @override
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session with its merged state and events (``config`` narrows them); or ``None``."""
        source = lane_source(app_name, user_id, session_id.strip())
        return await self._call(self.store.key_for(source), lambda: self._get(source, config))

    def _get(self, source: SessionSource, config: GetSessionConfig | None) -> Session | None:
        recent = config.num_recent_events if config is not None else None
        after = config.after_timestamp if config is not None else None
        for _ in range(_READ_ATTEMPTS):
            entry = self._entry(source)
            if entry is None:
                return None
            record = self.store.session(entry.session_id)
            if recent == 0:
                messages: list[Message] = []
            elif recent is not None:
                messages = self.store.tail(record.id, recent)
            else:
                messages = self.store.messages(record.id)
            events = [message_event(message) for message in messages]
            if after is not None:
                events = [event for event in events if event.timestamp >= after]
            session = self._session(source, record, events)
            if self.store.session(record.id).revision == record.revision:
                return session  # events and state are of the revision the marker names
        raise ConflictError(session_id=source.chat_id)  # pragma: no cover  # 8 lost races

    @override
    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The app's sessions (of one user, or of all users), without events, oldest first."""
        found = await asyncio.to_thread(self._list, app_name, user_id)
        return ListSessionsResponse(sessions=found)

    def _list(self, app_name: str, user_id: str | None) -> list[Session]:
        page = self.store.list_sessions(
            sources=(PLATFORM,), user_id=user_id, limit=None, descending=False
        )
        found: list[Session] = []
        for summary in page.items:
            record = summary.record
            if record.session_key is None:
                continue
            entry = self.store.backend.get_entry(record.session_key)
            origin = entry.origin if entry is not None else None
            if entry is None or entry.session_id != record.id or origin is None:
                continue  # a session the lane left behind (a reset), or not an ADK lane
            if origin.scope_id != app_name or origin.chat_id is None:
                continue
            found.append(self._session(origin, record, []))
        found.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return found

    @override
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete the session: the lane, and every hermes session it has held, with their state."""
        source = lane_source(app_name, user_id, session_id.strip())
        key = self.store.key_for(source)
        await self._call(key, lambda: self._delete(key))

    def _delete(self, key: str) -> None:
        for _ in range(_DELETE_ATTEMPTS):
            entry = self.store.backend.get_entry(key)
            if entry is None:
                return
            page = self.store.list_sessions(session_key=key, limit=None, include_compressed=True)
            doomed = {summary.record.id for summary in page.items} | {entry.session_id}
            for session_id in list(doomed):
                doomed.update(link.record.id for link in self.store.lineage(session_id).links)
            try:
                self.store.backend.delete_entry(key, expected_revision=entry.revision)
            except ConflictError:
                continue  # the lane moved on meanwhile: look again
            for session_id in sorted(doomed):
                try:
                    self.store.delete(session_id)
                except StoreSessionNotFoundError:
                    continue
            return
        raise ConflictError(key)  # pragma: no cover  # needs eight lost races in a row

    @override
    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state in the app, keys without the ``user:`` prefix."""
        scope = StateScope.user(app_name, PLATFORM, user_id).id
        found = await asyncio.to_thread(self.store.backend.get_state, [scope])
        return dict(found.get(scope, {}))

    @override
    async def append_event(self, session: Session, event: Event) -> Event:
        """Store ``event`` and its state delta in one commit; a stale ``session`` is refused.

        Partial (streamed) events are not stored, nor is a re-delivery of the newest stored
        event (an equal event of the same id: a retried call). ``temp:`` keys change
        ``session.state`` only.
        When the stored session changed since ``session`` was read, ``StaleSessionError`` (a
        ``ValueError``) is raised and nothing is stored: reload the session and try again.
        """
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        source = lane_source(session.app_name, session.user_id, session.id)
        marker = session._storage_update_marker  # noqa: SLF001  # ADK's staleness slot
        revision = await self._call(
            self.store.key_for(source), lambda: self._append(source, session, event, marker)
        )
        if revision is None:
            return event  # a redelivery of the stored newest event: nothing changes
        session._storage_update_marker = revision  # noqa: SLF001
        session.last_update_time = event.timestamp
        return self._commit_event_to_session(session, event)

    def _append(
        self, source: SessionSource, session: Session, event: Event, marker: str | None
    ) -> str | None:
        """Store the event; its session's new marker, or ``None`` when it was stored already."""
        entry = self.store.backend.get_entry(self.store.key_for(source))
        if entry is None:
            raise SessionNotFoundError(f"Session {session.id} not found.")
        record = self.store.session(entry.session_id)
        newest = self.store.tail(record.id, 1)
        last = message_event(newest[0]) if newest else None
        if last is not None and last.id == event.id and last == event:
            return None  # an equal re-delivery (a retried call), as ADK's in-memory service
        expected = _revision_of(marker, record.id)
        if expected is None:  # a Session built by hand: it must hold the newest stored event
            stored = last.id if last is not None else None
            held = session.events[-1].id if session.events else None
            if stored != held:
                raise StaleSessionError(STALE_MESSAGE)
            expected = record.revision
        if expected < 0:
            raise StaleSessionError(STALE_MESSAGE)
        delta = self._delta(
            session.app_name,
            session.user_id,
            record.id,
            event.actions.state_delta,
        )
        try:
            result = self.store.append(
                record.id, event_message(event), state_delta=delta or None, if_revision=expected
            )
        except ConflictError as error:
            raise StaleSessionError(STALE_MESSAGE) from error
        revision = result.revision if result.revision is not None else expected + 1
        return f"{record.id}@{revision}"
