"""The one way to wrap a backend: subclass :class:`ForwardingBackend`, override what changes.

:class:`ForwardingBackend` holds the wrapped backend as ``inner`` and forwards every method of
:class:`~hermes_sessions.protocols.Backend` to it, each written out and fully typed (no
``__getattr__``). A wrapper overrides only the methods whose behaviour it changes.

**Optional abilities** (``Supports*``, checked with ``isinstance``) follow one rule: *a wrapper
has an ability only when its inner backend has it*. Each ability the class forwards is a pair in
:attr:`ForwardingBackend.forwarded`, ``(protocol, mixin)``; constructing a wrapper picks the
class that mixes in exactly the mixins whose protocol ``inner`` implements (one class per
combination, cached, with the wrapper's own name). By default every ability of
:mod:`hermes_sessions.protocols` is forwarded unchanged (:class:`ForwardsSearch`,
:class:`ForwardsCheck`, ...). A wrapper that changes what an ability does replaces its pair with
its own mixin; one that must not pass an ability through leaves its pair out; one that always
has an ability defines the method on the class itself (and leaves the pair out).

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self, TypeVar, cast

from hermes_sessions.closing import ClosesOnExit
from hermes_sessions.protocols import (
    Backend,
    SupportsCheck,
    SupportsLedger,
    SupportsReindex,
    SupportsScrub,
    SupportsSearch,
    SupportsStateScopes,
    SupportsUserKeys,
    SupportsWriteBatches,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from datetime import datetime, timedelta

    from hermes_sessions.checks import CheckReport
    from hermes_sessions.ledger import LedgerKind, LedgerRow
    from hermes_sessions.models import EndReason, Message, SessionEntry, SessionRecord
    from hermes_sessions.protocols import Capabilities, ReindexProgress, RotationPlan
    from hermes_sessions.queries import SearchHit, SearchQuery, SessionPage, SessionQuery
    from hermes_sessions.results import AppendResult
    from hermes_sessions.usage import Usage

__all__ = [
    "ForwardingBackend",
    "ForwardsCheck",
    "ForwardsLedger",
    "ForwardsReindex",
    "ForwardsScrub",
    "ForwardsSearch",
    "ForwardsStateScopes",
    "ForwardsUserKeys",
    "ForwardsWriteBatches",
]

InnerT = TypeVar("InnerT", bound=Backend)


# -- one mixin per optional ability ----------------------------------------------------------------


class ForwardsSearch:
    """:class:`~hermes_sessions.protocols.SupportsSearch`, forwarded to ``inner``."""

    __slots__ = ()
    inner: Backend

    def search(self, query: SearchQuery) -> list[SearchHit]:
        """``inner``'s search."""
        return cast("SupportsSearch", self.inner).search(query)


class ForwardsCheck:
    """:class:`~hermes_sessions.protocols.SupportsCheck`, forwarded to ``inner``."""

    __slots__ = ()
    inner: Backend

    def check(self) -> CheckReport:
        """``inner``'s check."""
        return cast("SupportsCheck", self.inner).check()


class ForwardsScrub:
    """:class:`~hermes_sessions.protocols.SupportsScrub`, forwarded to ``inner``."""

    __slots__ = ()
    inner: Backend

    def scrub(self) -> None:
        """``inner``'s scrub."""
        cast("SupportsScrub", self.inner).scrub()


class ForwardsReindex:
    """:class:`~hermes_sessions.protocols.SupportsReindex`, forwarded to ``inner``."""

    __slots__ = ()
    inner: Backend

    def reindex_needed(self) -> bool:
        """Whether ``inner``'s index rows hold an older token stream."""
        return cast("SupportsReindex", self.inner).reindex_needed()

    def reindex(
        self,
        *,
        progress: Callable[[ReindexProgress], None] | None = None,
        batch_size: int = 500,
    ) -> int:
        """``inner``'s re-index."""
        index = cast("SupportsReindex", self.inner)
        return index.reindex(progress=progress, batch_size=batch_size)


class ForwardsStateScopes:
    """:class:`~hermes_sessions.protocols.SupportsStateScopes`, forwarded to ``inner``."""

    __slots__ = ()
    inner: Backend

    def state_scopes(self) -> list[str]:
        """``inner``'s scope ids."""
        return cast("SupportsStateScopes", self.inner).state_scopes()


class ForwardsUserKeys:
    """:class:`~hermes_sessions.protocols.SupportsUserKeys`, forwarded to ``inner``."""

    __slots__ = ()
    inner: Backend

    def destroy_user_keys(self, platform: str, user_ids: Sequence[str]) -> int:
        """Destroy the users' keys on ``inner``."""
        return cast("SupportsUserKeys", self.inner).destroy_user_keys(platform, user_ids)


class ForwardsWriteBatches:
    """:class:`~hermes_sessions.protocols.SupportsWriteBatches`, forwarded to ``inner``.

    The calls still go through the wrapper (they are store methods calling it), inside
    ``inner``'s transaction.
    """

    __slots__ = ()
    inner: Backend

    def write_batch(
        self, calls: Sequence[Callable[[], object]]
    ) -> list[tuple[object, BaseException | None]]:
        """``inner``'s batch."""
        return cast("SupportsWriteBatches", self.inner).write_batch(calls)


class ForwardsLedger:
    """:class:`~hermes_sessions.ledger.SupportsLedger`, forwarded to ``inner``."""

    __slots__ = ()
    inner: Backend

    def ledger_rows(
        self,
        kind: LedgerKind,
        *,
        ids: Sequence[str] | None = None,
        status: str | None = None,
        session_key: str | None = None,
    ) -> list[LedgerRow]:
        """``inner``'s rows."""
        ledger = cast("SupportsLedger", self.inner)
        return ledger.ledger_rows(kind, ids=ids, status=status, session_key=session_key)

    def ledger_write(
        self,
        session_id: str,
        rows: Sequence[LedgerRow],
        *,
        messages: Sequence[Message] = (),
        touch_at: datetime | None = None,
        usage: Usage | None = None,
    ) -> AppendResult:
        """Write on ``inner``."""
        return cast("SupportsLedger", self.inner).ledger_write(
            session_id, rows, messages=messages, touch_at=touch_at, usage=usage
        )


# -- the base ------------------------------------------------------------------------------------


class ForwardingBackend(ClosesOnExit, Generic[InnerT]):
    """A backend that forwards every call to ``inner``; subclass it to wrap a backend.

    Override only what the wrapper changes; every other method of
    :class:`~hermes_sessions.protocols.Backend` reaches ``inner`` unchanged. Optional abilities
    are forwarded by the mixins in :attr:`forwarded`, and only those ``inner`` has: the
    constructor returns an instance of the subclass mixing in exactly those (the module's
    docstring has the rule). ``isinstance(wrapper, SupportsScrub)`` is therefore true exactly
    when ``isinstance(wrapper.inner, SupportsScrub)`` is, unless the wrapper says otherwise.

    A subclass with its own ``__init__`` takes the inner backend as its first argument and sets
    ``self.inner`` (or calls ``super().__init__(inner)``).

    .. versionadded:: 0.1.0
    """

    forwarded: ClassVar[tuple[tuple[type, type], ...]] = (
        (SupportsSearch, ForwardsSearch),
        (SupportsCheck, ForwardsCheck),
        (SupportsScrub, ForwardsScrub),
        (SupportsReindex, ForwardsReindex),
        (SupportsStateScopes, ForwardsStateScopes),
        (SupportsUserKeys, ForwardsUserKeys),
        (SupportsWriteBatches, ForwardsWriteBatches),
        (SupportsLedger, ForwardsLedger),
    )
    """``(ability, mixin)`` pairs: the mixin is added when ``inner`` has the ability."""

    inner: InnerT
    """The wrapped backend."""

    def __new__(cls, inner: InnerT, *args: Any, **kwargs: Any) -> Self:  # noqa: ARG004  # __init__'s
        """Pick the class that offers exactly ``inner``'s forwarded abilities."""
        base = cls.__dict__.get("_wrapper_class", cls)
        mixins = tuple(mixin for ability, mixin in base.forwarded if isinstance(inner, ability))
        return cast("Self", super().__new__(_with_abilities(base, mixins)))

    def __init__(self, inner: InnerT) -> None:
        self.inner = inner

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"

    # -- lifecycle ---------------------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        """Those of ``inner``."""
        return self.inner.capabilities()

    def close(self) -> None:
        """Close ``inner``."""
        self.inner.close()

    # -- routing index -----------------------------------------------------------------------------

    def get_entry(self, key: str) -> SessionEntry | None:
        """The entry of ``key``."""
        return self.inner.get_entry(key)

    def put_entry(self, entry: SessionEntry, *, expected_revision: int | None) -> SessionEntry:
        """Store an entry (compare-and-swap)."""
        return self.inner.put_entry(entry, expected_revision=expected_revision)

    def delete_entry(self, key: str, *, expected_revision: int) -> None:
        """Delete an entry (compare-and-swap)."""
        self.inner.delete_entry(key, expected_revision=expected_revision)

    def entries(self, *, session_id: str | None = None) -> list[SessionEntry]:
        """Every entry, or those pointing at ``session_id``."""
        return self.inner.entries(session_id=session_id)

    def record_activity(
        self, key: str, at: datetime, *, last_prompt_tokens: int | None = None
    ) -> SessionEntry | None:
        """Move an entry's activity time forward."""
        return self.inner.record_activity(key, at, last_prompt_tokens=last_prompt_tokens)

    # -- transcripts -------------------------------------------------------------------------------

    def create_session(self, record: SessionRecord) -> SessionRecord:
        """Store a new session."""
        return self.inner.create_session(record)

    def get_session(self, session_id: str) -> SessionRecord | None:
        """The record of a session."""
        return self.inner.get_session(session_id)

    def update_session(
        self,
        session_id: str,
        *,
        values: Mapping[str, Any] | None = None,
        increments: Mapping[str, int | float] | None = None,
    ) -> SessionRecord:
        """Set fields and add to counters."""
        return self.inner.update_session(session_id, values=values, increments=increments)

    def end_session(
        self, session_id: str, reason: EndReason | str, *, at: datetime
    ) -> SessionRecord:
        """End a session."""
        return self.inner.end_session(session_id, reason, at=at)

    def reopen_session(self, session_id: str) -> SessionRecord:
        """Reopen a session."""
        return self.inner.reopen_session(session_id)

    def delete_session(self, session_id: str) -> bool:
        """Delete a session and everything of it."""
        return self.inner.delete_session(session_id)

    def list_sessions(self, query: SessionQuery) -> SessionPage:
        """A page of sessions."""
        return self.inner.list_sessions(query)

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
        """Append messages."""
        return self.inner.append_messages(
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
        """Messages in insertion order."""
        return self.inner.get_messages(
            session_id,
            after_id=after_id,
            before_id=before_id,
            limit=limit,
            include_inactive=include_inactive,
            from_end=from_end,
        )

    def get_message(self, session_id: str, message_id: int) -> Message | None:
        """One message."""
        return self.inner.get_message(session_id, message_id)

    def find_message(self, session_id: str, platform_message_id: str) -> Message | None:
        """The message with this platform id."""
        return self.inner.find_message(session_id, platform_message_id)

    def replace_message(self, session_id: str, message_id: int, message: Message) -> Message:
        """Replace one message."""
        return self.inner.replace_message(session_id, message_id, message)

    def replace_messages(self, session_id: str, messages: Sequence[Message]) -> list[Message]:
        """Replace the whole transcript."""
        return self.inner.replace_messages(session_id, messages)

    def set_active(self, session_id: str, message_ids: Sequence[int], *, active: bool) -> int:
        """Soft-delete or restore messages."""
        return self.inner.set_active(session_id, message_ids, active=active)

    def delete_messages(self, session_id: str, message_ids: Sequence[int]) -> int:
        """Delete messages for good."""
        return self.inner.delete_messages(session_id, message_ids)

    # -- state -------------------------------------------------------------------------------------

    def get_state(self, scope_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Scope values."""
        return self.inner.get_state(scope_ids)

    def update_state(
        self,
        changes: Mapping[str, Mapping[str, Any]],
        *,
        session_id: str | None = None,
        if_revision: int | None = None,
    ) -> SessionRecord | None:
        """Merge state changes."""
        return self.inner.update_state(changes, session_id=session_id, if_revision=if_revision)

    # -- rotations and leases ----------------------------------------------------------------------

    def apply(self, plan: RotationPlan) -> list[SessionEntry]:
        """Commit a rotation plan."""
        return self.inner.apply(plan)

    def acquire_lease(self, resource: str, holder: str, *, ttl: timedelta, now: datetime) -> bool:
        """Take or renew a lease."""
        return self.inner.acquire_lease(resource, holder, ttl=ttl, now=now)

    def release_lease(self, resource: str, holder: str) -> None:
        """Release a lease."""
        self.inner.release_lease(resource, holder)


@functools.cache
def _with_abilities(base: type[Any], mixins: tuple[type, ...]) -> type[Any]:
    """``base`` with ``mixins`` mixed in (one class per combination, named as ``base``)."""
    if not mixins:
        return base
    namespace = {"__slots__": (), "__module__": base.__module__, "_wrapper_class": base}
    return type(base.__name__, (*mixins, base), namespace)


if TYPE_CHECKING:

    def _is_a_backend(wrapper: ForwardingBackend[Backend]) -> Backend:
        return wrapper  # mypy checks the base against the whole protocol
