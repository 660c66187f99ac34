"""Edits of a transcript: rewinds (``/retry``, ``/undo``) and the platform's recalls and edits."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from hermes_sessions.exceptions import SessionNotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable

    from hermes_sessions.models import Message, MessageContent
    from hermes_sessions.protocols import Backend

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


def retract(backend: Backend, session_id: str, platform_message_id: str) -> Message | None:
    """Soft-delete the message the platform recalled; ``None`` if it is unknown."""
    message = backend.find_message(session_id, platform_message_id)
    if message is None:
        return None
    backend.set_active(session_id, [message.id or 0], active=False)
    return attrs.evolve(message, active=False)


def edit(
    backend: Backend,
    redact: Callable[[Message], Message],
    session_id: str,
    platform_message_id: str,
    content: MessageContent,
) -> Message:
    """Replace the content of the message the platform edited (redacted, re-indexed)."""
    message = backend.find_message(session_id, platform_message_id)
    if message is None:
        raise SessionNotFoundError(
            session_id=session_id, hint=f"it has no message {platform_message_id!r}"
        )
    updated = redact(attrs.evolve(message, content=content))
    return backend.replace_message(session_id, message.id or 0, updated)
