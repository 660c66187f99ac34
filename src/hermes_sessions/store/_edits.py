"""Edits of a transcript: rewinds (``/retry``, ``/undo``) and the platform's recalls and edits.

A recall or an edit names its message by platform id, in one session or by key: then in the
key's redelivery window (:func:`~hermes_sessions.store._views.stored_copy`), so one that
arrives after the key was reset still reaches the message in the session the key left.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from hermes_sessions.exceptions import SessionNotFoundError
from hermes_sessions.store._views import seen

if TYPE_CHECKING:
    from hermes_sessions.models import Message, MessageContent
    from hermes_sessions.protocols import Backend
    from hermes_sessions.store._session_store import SessionStore

__all__ = ["edit", "retract", "retry", "undo"]

PAGE: int = 64
"""How many messages one backwards read fetches while looking for user turns."""


def _user_turns(backend: Backend, session_id: str, count: int) -> list[Message]:
    """The last ``count`` active user messages, newest first (pages backwards)."""
    found: list[Message] = []
    before: int | None = None
    while len(found) < count:
        page = backend.get_messages(session_id, before_id=before, limit=PAGE, from_end=True)
        if not page:
            break
        found.extend(m for m in reversed(page) if m.role == "user")
        before = page[0].id
    return found[:count]


def retry(backend: Backend, session_id: str) -> Message | None:
    """Soft-delete everything after the last user message; return that (still active) message.

    The user message stays, so a redelivery of it is still recognised and the host appends only
    the new reply; what was removed can be brought back with ``restore``.
    """
    turns = _user_turns(backend, session_id, 1)
    if not turns:
        return None
    last = turns[0]
    after = backend.get_messages(session_id, after_id=last.id)
    backend.set_active(session_id, [m.id or 0 for m in after], active=False)
    return last


def undo(backend: Backend, session_id: str, n: int) -> list[Message]:
    """Soft-delete back to the ``n``-th most recent user message; return what was removed."""
    turns = _user_turns(backend, session_id, n)
    if not turns:
        return []
    first = turns[-1]
    removed = [first, *backend.get_messages(session_id, after_id=first.id)]
    backend.set_active(session_id, [m.id or 0 for m in removed], active=False)
    return [attrs.evolve(m, active=False) for m in removed]


def _target(backend: Backend, key_or_session_id: str, platform_message_id: str) -> Message:
    """The message a recall or an edit names: by key in the key's redelivery window."""
    message = seen(backend, key_or_session_id, platform_message_id)
    if message is None:
        by_key = ":" in key_or_session_id
        raise SessionNotFoundError(
            key=key_or_session_id if by_key else None,
            session_id=None if by_key else key_or_session_id,
            hint=f"it has no message {platform_message_id!r}",
        )
    return message


def retract(
    store: SessionStore, key_or_session_id: str, platform_message_id: str
) -> Message | None:
    """The platform recalled a message (撤回): soft-delete it. ``None`` if it is unknown.

    Given a key, the message is looked for as :meth:`~SessionStore.seen` looks: in the key's
    current session, then in the one it last moved away from, so a recall arriving after a reset
    or ``/new`` still reaches it; given a session id, in that session.
    """
    try:
        message = _target(store.backend, key_or_session_id, platform_message_id)
    except SessionNotFoundError:
        return None
    session_id = message.session_id or key_or_session_id
    store.backend.set_active(session_id, [message.id or 0], active=False)
    return attrs.evolve(message, active=False)


def edit(
    store: SessionStore,
    key_or_session_id: str,
    platform_message_id: str,
    content: MessageContent,
) -> Message:
    """The platform edited a message: replace its content (redacted, re-indexed for search).

    Given a key, the message is looked for as :meth:`retract` looks for it, so an edit arriving
    after a reset updates the message in the session the key left. ``SessionNotFoundError`` if
    it is not there.
    """
    message = _target(store.backend, key_or_session_id, platform_message_id)
    updated = store.redact(attrs.evolve(message, content=content))
    session_id = message.session_id or key_or_session_id
    return store.backend.replace_message(session_id, message.id or 0, updated)
