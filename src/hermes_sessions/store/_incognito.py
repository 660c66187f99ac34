"""Incognito lanes: session keys whose sessions are held in memory and never persisted.

:class:`IncognitoPolicy` says which lanes are incognito: exact session keys, and a predicate on
the inbound message's source. A store given one routes through an :class:`IncognitoRouter`,
which is the store's ``backend``: every call about an incognito key, or a session created under
one, goes to an in-memory overlay (an :class:`~hermes_sessions.backends.InMemoryBackend`); every
other call goes to the persistent backend unchanged. Listings and searches see the overlay only
when they ask from the incognito lane itself. A rotation of an incognito lane deletes the
session it leaves; closing the store drops the overlay. Nothing of an incognito lane is ever
written through the persistent backend: a write that would mix the two is refused with
:class:`~hermes_sessions.exceptions.IncognitoLaneError`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import attrs

from hermes_sessions.exceptions import IncognitoLaneError, InvalidArgumentError
from hermes_sessions.forwarding import (
    ForwardingBackend,
    ForwardsCheck,
    ForwardsReindex,
    ForwardsScrub,
    ForwardsUserKeys,
)
from hermes_sessions.models import SessionSource
from hermes_sessions.protocols import (
    Backend,
    SupportsCheck,
    SupportsLedger,
    SupportsReindex,
    SupportsScrub,
    SupportsUserKeys,
)
from hermes_sessions.queries import SessionPage, encode_cursor
from hermes_sessions.state import StateScope

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from datetime import datetime, timedelta

    from hermes_sessions.ledger import LedgerKind, LedgerRow
    from hermes_sessions.models import Message, SessionEntry, SessionRecord
    from hermes_sessions.protocols import RotationPlan
    from hermes_sessions.queries import SearchHit, SearchQuery, SessionQuery
    from hermes_sessions.results import AppendResult
    from hermes_sessions.usage import Usage

__all__ = ["IncognitoPolicy", "IncognitoRouter", "is_incognito", "lane_side", "note"]


def _keys(value: Iterable[str]) -> frozenset[str]:
    if isinstance(value, str):
        raise InvalidArgumentError(
            f"IncognitoPolicy keys must be a collection of session keys; for one, pass [{value!r}]"
        )
    return frozenset(value)


@attrs.frozen(kw_only=True)
class IncognitoPolicy:
    """Which lanes are incognito: never persisted, searchable only from themselves.

    A lane is incognito when its session key is one of ``keys``, or when ``match(source)`` is
    true for a message of it (checked when the store builds the key, :meth:`SessionStore.key_for`,
    which every per-message call does; from then on the key is incognito until the store closes).

    .. versionadded:: 0.1.0
    """

    keys: frozenset[str] = attrs.field(default=frozenset(), converter=_keys)
    """Exact session keys (``store.key_for(source)``) that are incognito."""
    match: Callable[[SessionSource], bool] | None = None
    """A predicate on the inbound message's source (``None``: keys only)."""

    def covers(self, source: SessionSource) -> bool:
        """Whether ``match`` makes the lane of ``source`` incognito."""
        return self.match is not None and bool(self.match(source))


def _overlay() -> Backend:
    from hermes_sessions.backends import InMemoryBackend  # noqa: PLC0415  # backends load lazily

    return InMemoryBackend()


@attrs.define(eq=False)
class IncognitoRouter(ForwardingBackend[Backend]):
    """The backend of a store with incognito lanes: an in-memory overlay over ``persistent``.

    Calls about incognito keys and their sessions go to the overlay; all others to
    ``persistent`` (the :class:`~hermes_sessions.forwarding.ForwardingBackend`'s ``inner``). The
    router has the optional abilities of ``persistent`` among ``check``, ``scrub``,
    ``reindex``, ``destroy_user_keys`` and the ledger (kept per side), and only those:
    ``isinstance`` checks keep working. Other attributes of ``persistent`` (``path``, ...) are
    reached through it unchanged.

    .. versionadded:: 0.1.0
    """

    @classmethod
    def over(cls, persistent: Backend, policy: IncognitoPolicy) -> IncognitoRouter:
        """A router over ``persistent`` with its optional abilities."""
        return cls(persistent, policy)

    inner: Backend
    policy: IncognitoPolicy
    overlay: Backend = attrs.field(factory=_overlay, kw_only=True)
    _lanes: set[str] = attrs.field(factory=set, init=False)
    _lane_scopes: set[str] = attrs.field(factory=set, init=False)
    """The state scope ids of the lanes (``StateScope.lane(key).id``), for one lookup per scope."""
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)

    def __attrs_post_init__(self) -> None:
        for key in self.policy.keys:
            self._add_lane(key)

    def _add_lane(self, key: str) -> None:
        with self._lock:
            self._lane_scopes.add(StateScope.lane(key).id)
            self._lanes.add(key)

    @property
    def persistent(self) -> Backend:
        """The persistent backend (``inner``)."""
        return self.inner

    def __repr__(self) -> str:
        return f"<IncognitoRouter over {self.persistent!r}>"

    def __getattr__(self, name: str) -> Any:  # the backend's own extras
        if name.startswith("_") or name in {"inner", "persistent", "overlay", "policy"}:
            raise AttributeError(name)
        return getattr(self.persistent, name)

    # -- which side --------------------------------------------------------------------------------

    def note(self, source: SessionSource, key: str) -> str:
        """Remember ``key`` as incognito if the policy's predicate covers ``source``."""
        if key not in self._lanes and self.policy.covers(source):
            self._add_lane(key)
        return key

    def is_lane(self, key: str | None) -> bool:
        """Whether ``key`` is an incognito lane."""
        return key is not None and key in self._lanes

    def holds(self, session_id: str | None) -> bool:
        """Whether ``session_id`` is a session of an incognito lane (held in memory)."""
        return session_id is not None and self.overlay.get_session(session_id) is not None

    def _by_session(self, session_id: str) -> Backend:
        return self.overlay if self.holds(session_id) else self.persistent

    def _by_key(self, key: str) -> Backend:
        return self.overlay if self.is_lane(key) else self.persistent

    def _scope_in_overlay(self, scope_id: str) -> bool:
        kind, _, rest = scope_id.partition("|")
        if kind == "session":
            return self.holds(rest)
        return kind == "lane" and scope_id in self._lane_scopes

    def _state_side(self, scope_ids: Iterable[str], session_id: str | None, action: str) -> Backend:
        """The one side all of a state change belongs to; refuse a change spanning both."""
        sides = {self._scope_in_overlay(s) for s in scope_ids}
        if session_id is not None:
            sides.add(self.holds(session_id))
        if len(sides) > 1:
            raise IncognitoLaneError(
                action,
                "an incognito session can change only its own and its lane's state (app and "
                "user state are persisted); make that change from a persisted lane",
            )
        return self.overlay if sides == {True} else self.persistent

    def _asking_lane(self, query: SessionQuery | SearchQuery) -> str | None:
        """The incognito lane a listing or search asks from, if it asks from one."""
        lane = query.visible_to.session_key if query.visible_to is not None else None
        lane = lane if lane is not None else query.session_key
        return lane if self.is_lane(lane) else None

    # -- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Drop every incognito lane, then close the persistent backend."""
        try:
            self.overlay.close()
        finally:
            self.persistent.close()

    # -- routing index -----------------------------------------------------------------------------

    def get_entry(self, key: str) -> SessionEntry | None:
        """The entry of ``key`` from its side."""
        return self._by_key(key).get_entry(key)

    def put_entry(self, entry: SessionEntry, *, expected_revision: int | None) -> SessionEntry:
        """Store ``entry`` on its key's side; refuse pointing across sides."""
        side = self._by_key(entry.session_key)
        if (side is self.overlay) != self.holds(entry.session_id) and self._exists(entry):
            raise IncognitoLaneError("point a key", _CROSSING)
        return side.put_entry(entry, expected_revision=expected_revision)

    def _exists(self, entry: SessionEntry) -> bool:
        return self.persistent.get_session(entry.session_id) is not None or self.holds(
            entry.session_id
        )

    def delete_entry(self, key: str, *, expected_revision: int) -> None:
        """Remove the entry of ``key`` on its side."""
        self._by_key(key).delete_entry(key, expected_revision=expected_revision)

    def entries(self, *, session_id: str | None = None) -> list[SessionEntry]:
        """The persistent entries, or those pointing at ``session_id`` (on its side)."""
        if session_id is None:
            return self.persistent.entries()
        return self._by_session(session_id).entries(session_id=session_id)

    def record_activity(
        self, key: str, at: datetime, *, last_prompt_tokens: int | None = None
    ) -> SessionEntry | None:
        """Record activity on ``key``'s side."""
        return self._by_key(key).record_activity(key, at, last_prompt_tokens=last_prompt_tokens)

    # -- transcripts -------------------------------------------------------------------------------

    def create_session(self, record: SessionRecord) -> SessionRecord:
        """Create ``record`` in memory if it belongs to an incognito lane, else persistently."""
        incognito = self.is_lane(record.session_key) or self.holds(record.parent_session_id)
        return (self.overlay if incognito else self.persistent).create_session(record)

    def get_session(self, session_id: str) -> SessionRecord | None:
        """The record, from whichever side holds it."""
        return self._by_session(session_id).get_session(session_id)

    def update_session(
        self,
        session_id: str,
        *,
        values: Mapping[str, Any] | None = None,
        increments: Mapping[str, int | float] | None = None,
    ) -> SessionRecord:
        """Change the record on its side."""
        return self._by_session(session_id).update_session(
            session_id, values=values, increments=increments
        )

    def end_session(self, session_id: str, reason: str, *, at: datetime) -> SessionRecord:
        """End the session on its side."""
        return self._by_session(session_id).end_session(session_id, reason, at=at)

    def reopen_session(self, session_id: str) -> SessionRecord:
        """Reopen the session on its side."""
        return self._by_session(session_id).reopen_session(session_id)

    def delete_session(self, session_id: str) -> bool:
        """Delete the session on its side."""
        return self._by_session(session_id).delete_session(session_id)

    def list_sessions(self, query: SessionQuery) -> SessionPage:
        """Persistent sessions; asked from an incognito lane, that lane's sessions merged in."""
        page = self.persistent.list_sessions(query)
        lane = self._asking_lane(query)
        if lane is None:
            return page
        own = [s for s in self.overlay.list_sessions(query).items if s.record.session_key == lane]
        if not own:
            return page
        merged = sorted(
            [*own, *page.items],
            key=lambda s: (query.sort_value(s.record), s.record.id),
            reverse=query.descending,
        )
        if query.limit is None or (len(merged) <= query.limit and page.next_cursor is None):
            return SessionPage(items=merged)
        kept = merged[: query.limit]
        last = kept[-1].record
        return SessionPage(items=kept, next_cursor=encode_cursor(query.sort_value(last), last.id))

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        touch_at: datetime | None = None,
        usage: Usage | None = None,
        state: Mapping[str, Mapping[str, Any]] | None = None,
        if_revision: int | None = None,
    ) -> AppendResult:
        """Append on the session's side (state changes must belong to the same side)."""
        side = self._state_side(state or (), session_id, "append with a state change")
        return side.append_messages(
            session_id,
            messages,
            touch_at=touch_at,
            usage=usage,
            state=state,
            if_revision=if_revision,
        )

    def get_messages(
        self,
        session_id: str,
        *,
        after_id: int | None = None,
        before_id: int | None = None,
        limit: int | None = None,
        include_inactive: bool = False,
        from_end: bool = False,
    ) -> list[Message]:
        """Messages from the session's side."""
        return self._by_session(session_id).get_messages(
            session_id,
            after_id=after_id,
            before_id=before_id,
            limit=limit,
            include_inactive=include_inactive,
            from_end=from_end,
        )

    def get_message(self, session_id: str, message_id: int) -> Message | None:
        """One message from the session's side."""
        return self._by_session(session_id).get_message(session_id, message_id)

    def find_message(self, session_id: str, platform_message_id: str) -> Message | None:
        """A delivery's stored copy, from the session's side."""
        return self._by_session(session_id).find_message(session_id, platform_message_id)

    def replace_message(self, session_id: str, message_id: int, message: Message) -> Message:
        """Replace a message on the session's side."""
        return self._by_session(session_id).replace_message(session_id, message_id, message)

    def replace_messages(self, session_id: str, messages: Sequence[Message]) -> list[Message]:
        """Replace a transcript on the session's side."""
        return self._by_session(session_id).replace_messages(session_id, messages)

    def set_active(self, session_id: str, message_ids: Sequence[int], *, active: bool) -> int:
        """Soft-delete or restore messages on the session's side."""
        return self._by_session(session_id).set_active(session_id, message_ids, active=active)

    def delete_messages(self, session_id: str, message_ids: Sequence[int]) -> int:
        """Delete messages on the session's side."""
        return self._by_session(session_id).delete_messages(session_id, message_ids)

    # -- state -------------------------------------------------------------------------------------

    def get_state(self, scope_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Each scope from its side (an incognito turn reads persisted app and user state)."""
        mine = [s for s in scope_ids if self._scope_in_overlay(s)]
        found = self.persistent.get_state([s for s in scope_ids if s not in mine])
        if mine:
            found.update(self.overlay.get_state(mine))
        return found

    def update_state(
        self,
        changes: Mapping[str, Mapping[str, Any]],
        *,
        session_id: str | None = None,
        if_revision: int | None = None,
    ) -> SessionRecord | None:
        """Change state on one side; a change spanning both is refused."""
        side = self._state_side(changes, session_id, "change state")
        return side.update_state(changes, session_id=session_id, if_revision=if_revision)

    # -- rotations and leases ----------------------------------------------------------------------

    def apply(self, plan: RotationPlan) -> list[SessionEntry]:
        """Apply ``plan`` on its side; in memory, delete the sessions it leaves behind."""
        if not self._in_overlay(plan):
            return self.persistent.apply(plan)
        for write in plan.entries:
            target = plan.create
            if target is None or target.id != write.entry.session_id:
                target = self.overlay.get_session(write.entry.session_id)
            if target is not None and target.session_key != write.entry.session_key:
                raise IncognitoLaneError("rotate", "an incognito session belongs to its lane only")
        written = self.overlay.apply(plan)
        for session_id, _reason in plan.end:
            record = self.overlay.get_session(session_id)
            if record is not None and record.is_ended:
                self.overlay.delete_session(session_id)
        return written

    def _in_overlay(self, plan: RotationPlan) -> bool:
        """Whether ``plan`` is about incognito lanes; refuse one that spans both sides."""
        sessions = [
            *plan.reopen,
            *(s for pair in plan.repoint for s in pair),
            *(write.entry.session_id for write in plan.entries),
            *(session_id for session_id, _reason in plan.end),
            *plan.require_open,
            *(session_id for session_id, _revision in plan.drop),
            *(s for s in (plan.copy_state_from, plan.copy_messages_from) if s is not None),
        ]
        created = None if plan.create is None else plan.create.id
        sides = {self.holds(s) for s in sessions if s != created}
        sides.update(self.is_lane(write.entry.session_key) for write in plan.entries)
        if plan.create is not None:
            sides.add(
                self.is_lane(plan.create.session_key) or self.holds(plan.create.parent_session_id)
            )
        if len(sides) > 1:
            raise IncognitoLaneError("rotate", _CROSSING)
        return sides == {True}

    def _lease_side(self, resource: str) -> Backend:
        """A lease names a session (``compress:<id>``) or a key (``branch:<key>``): its side."""
        named = resource.partition(":")[2]
        return self.overlay if self.is_lane(named) or self.holds(named) else self.persistent

    def acquire_lease(self, resource: str, holder: str, *, ttl: timedelta, now: datetime) -> bool:
        """Take a lease on the side of the session or key it names."""
        return self._lease_side(resource).acquire_lease(resource, holder, ttl=ttl, now=now)

    def release_lease(self, resource: str, holder: str) -> None:
        """Release a lease on the side of the session or key it names."""
        self._lease_side(resource).release_lease(resource, holder)

    # -- search ------------------------------------------------------------------------------------

    def search(self, query: SearchQuery) -> list[SearchHit]:
        """Persistent hits; asked from an incognito lane, that lane's own hits come first."""
        lane = self._asking_lane(query)
        own: list[SearchHit] = []
        if lane is not None:
            hits = _search(self.overlay, attrs.evolve(query, limit=None, offset=0))
            own = [hit for hit in hits if hit.session.session_key == lane]
        end = None if query.limit is None else query.offset + query.limit
        first = own[query.offset : end]
        if query.limit is not None and len(first) >= query.limit:
            return first
        rest = attrs.evolve(
            query,
            offset=max(0, query.offset - len(own)),
            limit=None if query.limit is None else query.limit - len(first),
        )
        return [*first, *_search(self.persistent, rest)]


class _KeepsLedger:
    """``SupportsLedger``: an incognito session's rows stay in the overlay, never persisted."""

    __slots__ = ()
    inner: Backend
    overlay: Backend

    def _ledger_sides(self, session_key: str | None) -> list[SupportsLedger]:
        router = cast("IncognitoRouter", self)
        sides = [self.inner, self.overlay]
        if session_key is not None:
            sides = [self.overlay if router.is_lane(session_key) else self.inner]
        return [cast("SupportsLedger", side) for side in sides]

    def ledger_rows(
        self,
        kind: LedgerKind,
        *,
        ids: Sequence[str] | None = None,
        status: str | None = None,
        session_key: str | None = None,
    ) -> list[LedgerRow]:
        """The rows of both sides (of the lane's side, given ``session_key``)."""
        found = [
            row
            for side in self._ledger_sides(session_key)
            for row in side.ledger_rows(kind, ids=ids, status=status, session_key=session_key)
        ]
        return sorted(found, key=lambda row: (row.updated_at, row.id))

    def ledger_write(
        self,
        session_id: str,
        rows: Sequence[LedgerRow],
        *,
        messages: Sequence[Message] = (),
        touch_at: datetime | None = None,
        usage: Usage | None = None,
    ) -> AppendResult:
        """Write on the session's side (the overlay for an incognito session)."""
        side = cast("IncognitoRouter", self)._by_session(session_id)  # noqa: SLF001  # ours
        return cast("SupportsLedger", side).ledger_write(
            session_id, rows, messages=messages, touch_at=touch_at, usage=usage
        )


IncognitoRouter.forwarded = (
    (SupportsCheck, ForwardsCheck),
    (SupportsLedger, _KeepsLedger),
    (SupportsScrub, ForwardsScrub),
    (SupportsReindex, ForwardsReindex),
    (SupportsUserKeys, ForwardsUserKeys),
)

_CROSSING = (
    "an incognito lane's sessions stay in memory and a persisted lane's on disk, so no key may "
    "move between them (resume, branch or compress within one kind of lane)"
)


def _search(backend: Backend, query: SearchQuery) -> list[SearchHit]:
    search = getattr(backend, "search", None)
    if search is None:
        raise TypeError(f"{backend!r} cannot search; use a backend with search")
    hits: list[SearchHit] = search(query)
    return hits


def note(backend: Backend, source: SessionSource, key: str) -> str:
    """``key``, remembered as incognito if ``backend`` routes lanes and the policy covers it."""
    return backend.note(source, key) if isinstance(backend, IncognitoRouter) else key


def lane_side(backend: Backend, key: str | None) -> Backend:
    """The backend holding ``key``'s lane: the overlay for an incognito lane, else ``backend``."""
    if isinstance(backend, IncognitoRouter) and backend.is_lane(key):
        return backend.overlay
    return backend


def is_incognito(backend: Backend, key_or_session_id: str) -> bool:
    """Whether a key (keys contain ``:``) or a session is an incognito lane's."""
    if not isinstance(backend, IncognitoRouter):
        return False
    if ":" in key_or_session_id:
        return backend.is_lane(key_or_session_id)
    return backend.holds(key_or_session_id)
