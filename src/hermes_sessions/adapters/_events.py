"""What an inbound platform event means for the store, and :func:`apply`, which performs it.

An adapter turns a framework's event into one of three values: a :class:`NewMessage` (someone
said something), an :class:`Edit` (they changed it) or a :class:`Retract` (they recalled it,
撤回). Each carries the :class:`~hermes_sessions.models.SessionSource` that names the
conversation, so the three go to the same session key. :func:`apply` performs one with the
store's own operations; adapters themselves never touch a store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

import attrs

from hermes_sessions.exceptions import InvalidArgumentError, SessionNotFoundError
from hermes_sessions.models import Message, MessageContent, SessionSource

if TYPE_CHECKING:
    # Only an annotation on Applied, which attrs never resolves: importing the store here
    # would double the cost of importing an adapter.
    from hermes_sessions.store import (
        SessionLookup,  # noqa: TC004
        SessionStore,
    )

__all__ = ["Applied", "Edit", "InboundEvent", "NewMessage", "Retract", "apply"]


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


InboundEvent: TypeAlias = NewMessage | Edit | Retract
"""What an adapter returns for an event that concerns the transcript.

.. versionadded:: 0.1.0
"""


@attrs.frozen(kw_only=True)
class Applied:
    """What :func:`apply` did.

    ``session_id`` is the session the event went to (the one holding the message, for a
    redelivery, edit or recall; ``None`` when an edit or recall names a key that has no
    session); ``message`` is the stored, edited or retracted message (for a redelivered
    message, the one stored the first time; ``None`` when an edit or recall names a message
    the key's sessions do not have); ``lookup`` is the result of ``get_or_create`` for a new
    message (``lookup.reset`` says whether the conversation was just reset, to tell the user;
    ``lookup.redelivered`` whether the message is a redelivery, to answer nothing).

    .. versionadded:: 0.1.0
    """

    event: InboundEvent
    session_id: str | None
    message: Message | None
    lookup: SessionLookup | None = None


def apply(store: SessionStore, event: InboundEvent) -> Applied:
    """Perform ``event`` on ``store``.

    A :class:`NewMessage` goes through ``get_or_create`` with its ``platform_message_id``, so a
    redelivery is recognised before the reset policy could rotate the key (even hours later,
    past an idle window): it stores nothing, and ``lookup.redelivered`` says so. A new message
    is appended (the reset policy applied). An :class:`Edit` or :class:`Retract` goes to the
    message where the key's :meth:`~SessionStore.seen` finds it — its current session or the
    one it last left, after a reset — and never creates a session: a recall of a message the
    store never saw changes nothing.

    .. versionadded:: 0.1.0
    """
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
