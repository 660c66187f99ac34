"""What an inbound platform event means for the store, and :func:`apply`, which performs it.

An adapter turns a framework's event into one of three values: a :class:`NewMessage` (someone
said something), an :class:`Edit` (they changed it) or a :class:`Retract` (they recalled it,
撤回). Each carries the :class:`~hermes_sessions.models.SessionSource` that names the
conversation, so the three go to the same session key. :func:`apply` performs one with a
:class:`~hermes_sessions.store.SessionStore`'s own operations, :func:`aapply` with an
:class:`~hermes_sessions.aio.AsyncSessionStore`'s (for asyncio hosts: nothing blocks the event
loop); adapters themselves never touch a store.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any, TypeAlias

import attrs

from hermes_sessions.exceptions import InvalidArgumentError, SessionNotFoundError
from hermes_sessions.models import Message, MessageContent, SessionSource
from hermes_sessions.window import REACTIONS

if TYPE_CHECKING:
    # Only an annotation on Applied, which attrs never resolves: importing the store here
    # would double the cost of importing an adapter.
    from hermes_sessions.aio import AsyncSessionStore
    from hermes_sessions.store import (
        Acceptance,  # noqa: TC004
        SessionLookup,  # noqa: TC004
        SessionStore,
    )

__all__ = [
    "Applied",
    "Edit",
    "InboundEvent",
    "NewMessage",
    "React",
    "Retract",
    "aapply",
    "apply",
]


def _platform_id(_instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(
            f"{attribute.name} must be the platform's message id as a non-empty string, "
            f"got {value!r}"
        )


@attrs.frozen(kw_only=True)
class NewMessage:
    """A new inbound message: append ``message`` to the session of ``source``.

    .. versionadded:: 0.1.0
    """

    source: SessionSource = attrs.field(validator=attrs.validators.instance_of(SessionSource))
    message: Message = attrs.field(validator=attrs.validators.instance_of(Message))


@attrs.frozen(kw_only=True)
class Edit:
    """The sender edited a message: replace its content (the search index follows).

    .. versionadded:: 0.1.0
    """

    source: SessionSource = attrs.field(validator=attrs.validators.instance_of(SessionSource))
    platform_message_id: str = attrs.field(validator=_platform_id)
    """The qualified id the message was stored under (the same one :class:`NewMessage` used)."""
    content: MessageContent = None


@attrs.frozen(kw_only=True)
class Retract:
    """The sender recalled (deleted) a message: soft-delete it, so search no longer finds it.

    .. versionadded:: 0.1.0
    """

    source: SessionSource = attrs.field(validator=attrs.validators.instance_of(SessionSource))
    platform_message_id: str = attrs.field(validator=_platform_id)


def _reactions(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple) or not all(isinstance(r, str) and r for r in value):
        raise InvalidArgumentError(f"{attribute.name} must be a tuple of non-empty strings")


def _sources(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple) or not all(isinstance(s, SessionSource) for s in value):
        raise InvalidArgumentError(f"{attribute.name} must be a tuple of SessionSource")


@attrs.frozen(kw_only=True)
class React:
    """Someone reacted to a message (an emoji): annotate that message, never add a turn.

    ``source`` is the reactor's (``participant`` is who reacted); the message is looked for in
    its key's session, then in the lanes of ``also`` (the author's lane, where the platform
    names the author). ``added`` and ``removed`` are the reactor's reactions that appeared and
    went away. The message's ``extra["reactions"]`` follows (see
    :func:`~hermes_sessions.window.reactions_of`).

    .. versionadded:: 0.1.0
    """

    source: SessionSource = attrs.field(validator=attrs.validators.instance_of(SessionSource))
    platform_message_id: str = attrs.field(validator=_platform_id)
    """The qualified id of the message reacted to."""
    added: tuple[str, ...] = attrs.field(default=(), validator=_reactions)
    removed: tuple[str, ...] = attrs.field(default=(), validator=_reactions)
    also: tuple[SessionSource, ...] = attrs.field(default=(), validator=_sources)
    """Other lanes the message may be in, looked at after the reactor's."""


InboundEvent: TypeAlias = NewMessage | Edit | Retract | React
"""What an adapter returns for an event that concerns the transcript.

.. versionadded:: 0.1.0
"""


@attrs.frozen(kw_only=True)
class Applied:
    """What :func:`apply` did.

    ``session_id`` is the session the event went to (the one holding the message, for a
    redelivery, edit, recall or reaction; ``None`` when an edit or recall names a key that has
    no session); ``message`` is the stored, edited, retracted or reacted-to message (for a
    redelivered message, the one stored the first time; ``None`` when an edit, recall or
    reaction names a message the key's sessions do not have); ``lookup`` is the result of
    ``get_or_create`` for a new message (``lookup.reset`` says whether the conversation was just
    reset, to tell the user; ``lookup.redelivered`` whether the message is a redelivery, to
    answer nothing).

    .. versionadded:: 0.1.0
    """

    event: InboundEvent
    session_id: str | None
    message: Message | None
    lookup: SessionLookup | None = None
    acceptance: Acceptance | None = None
    """With ``holder=`` (the turn ledger): what accepting the new message did — ``duplicate``,
    ``in_progress`` and its ledger row (``docs/ledger.md``). Then ``message`` is ``None`` for a
    duplicate the ledger recognised by its row."""


def _accepted(event: NewMessage, acceptance: Acceptance) -> Applied:
    """What a new message accepted through the turn ledger did."""
    session_id, lookup = acceptance.session_id, acceptance.lookup
    message = acceptance.message
    return Applied(
        event=event, session_id=session_id, message=message, lookup=lookup, acceptance=acceptance
    )


def apply(store: SessionStore, event: InboundEvent, *, holder: str | None = None) -> Applied:
    """Perform ``event`` on ``store``.

    A :class:`NewMessage` goes through ``get_or_create`` with its ``platform_message_id``, so a
    redelivery is recognised before the reset policy could rotate the key (even hours later,
    past an idle window): it stores nothing, and ``lookup.redelivered`` says so. A new message
    is appended (the reset policy applied). An :class:`Edit` or :class:`Retract` goes to the
    message where the key's :meth:`~SessionStore.seen` finds it — its current session or the
    one it last left, after a reset — and never creates a session: a recall of a message the
    store never saw changes nothing. With ``holder`` (a store made with ``ledger=True``), a new
    message is accepted through the turn ledger instead: ``applied.acceptance``.

    Raises:
        InvalidArgumentError: ``store`` is an ``AsyncSessionStore`` (use :func:`aapply`).

    .. versionadded:: 0.1.0
    """
    if inspect.iscoroutinefunction(getattr(store, "get_or_create", None)):
        raise InvalidArgumentError(
            "apply() takes a SessionStore; with an AsyncSessionStore, use "
            "'await aapply(store, event)' so the store's work does not block the event loop"
        )
    if isinstance(event, React):
        return react(store, event)
    if isinstance(event, NewMessage) and holder is not None:
        return _accepted(event, store.ledger.accept(event.source, event.message, holder=holder))
    if isinstance(event, NewMessage):
        pmid = event.message.platform_message_id
        lookup = store.get_or_create(event.source, platform_message_id=pmid)
        if lookup.redelivered is not None:  # checked before anything rotated
            copy = lookup.redelivered
            return Applied(event=event, session_id=copy.session_id, message=copy, lookup=lookup)
        stored = store.append(lookup.session_id, event.message)
        return Applied(
            event=event,
            session_id=lookup.session_id,
            message=stored[0] if stored else None,
            lookup=lookup,
        )
    key = store.key_for(event.source)
    try:
        session_id = store.entry(key).session_id
    except SessionNotFoundError:
        return Applied(event=event, session_id=None, message=None)
    changed: Message | None
    if isinstance(event, Retract):
        changed = store.retract(key, event.platform_message_id)
    else:
        try:
            changed = store.edit(key, event.platform_message_id, event.content)
        except SessionNotFoundError:
            changed = None
    if changed is not None and changed.session_id is not None:
        session_id = changed.session_id  # the session the key left, after a reset
    return Applied(event=event, session_id=session_id, message=changed)


async def aapply(
    store: AsyncSessionStore, event: InboundEvent, *, holder: str | None = None
) -> Applied:
    """Perform ``event`` on an :class:`~hermes_sessions.aio.AsyncSessionStore` (``apply``'s twin).

    The same steps as :func:`apply`, each awaited: the store runs them off the event loop, so
    an asyncio gateway's handlers never wait on a disk commit.

    Raises:
        InvalidArgumentError: ``store`` is a blocking ``SessionStore`` (use :func:`apply`).

    .. versionadded:: 0.1.0
    """
    if not inspect.iscoroutinefunction(getattr(store, "get_or_create", None)):
        raise InvalidArgumentError(
            "aapply() takes an AsyncSessionStore; with a SessionStore, use 'apply(store, event)' "
            "(or wrap it: AsyncSessionStore(store))"
        )
    if isinstance(event, React):
        return await asyncio.to_thread(react, store.store, event)
    if isinstance(event, NewMessage) and holder is not None:
        accepting = store.ledger.accept(event.source, event.message, holder=holder)
        return _accepted(event, await accepting)
    if isinstance(event, NewMessage):
        pmid = event.message.platform_message_id
        lookup = await store.get_or_create(event.source, platform_message_id=pmid)
        if lookup.redelivered is not None:  # checked before anything rotated
            copy = lookup.redelivered
            return Applied(event=event, session_id=copy.session_id, message=copy, lookup=lookup)
        stored = await store.append(lookup.session_id, event.message)
        return Applied(
            event=event,
            session_id=lookup.session_id,
            message=stored[0] if stored else None,
            lookup=lookup,
        )
    key = store.key_for(event.source)
    try:
        session_id = (await store.entry(key)).session_id
    except SessionNotFoundError:
        return Applied(event=event, session_id=None, message=None)
    changed: Message | None
    if isinstance(event, Retract):
        changed = await store.retract(key, event.platform_message_id)
    else:
        try:
            changed = await store.edit(key, event.platform_message_id, event.content)
        except SessionNotFoundError:
            changed = None
    if changed is not None and changed.session_id is not None:
        session_id = changed.session_id  # the session the key left, after a reset
    return Applied(event=event, session_id=session_id, message=changed)


def react(store: SessionStore, event: React) -> Applied:
    """Annotate the message ``event`` reacts to (``apply`` calls this for a :class:`React`)."""
    keys = dict.fromkeys(store.key_for(source) for source in (event.source, *event.also))
    reactor = event.source.participant or event.source.chat_id or "?"
    for key in keys:
        found = store.seen(key, event.platform_message_id)
        if found is None or found.session_id is None or found.id is None:
            continue
        kept = found.extra.get(REACTIONS)
        reactions: dict[str, list[str]] = {
            str(emoji): [str(who) for who in people]
            for emoji, people in (kept.items() if isinstance(kept, dict) else ())
            if isinstance(people, list)
        }
        for emoji in event.removed:
            people = [who for who in reactions.get(emoji, []) if who != reactor]
            reactions[emoji] = people
        for emoji in event.added:
            reactions[emoji] = sorted({*reactions.get(emoji, []), reactor})
        extra = {k: v for k, v in found.extra.items() if k != REACTIONS}
        now = {emoji: people for emoji, people in reactions.items() if people}
        if now:
            extra[REACTIONS] = now
        updated = attrs.evolve(found, extra=extra)
        stored = store.backend.replace_message(found.session_id, found.id, updated)
        return Applied(event=event, session_id=found.session_id, message=stored)
    return Applied(event=event, session_id=None, message=None)
