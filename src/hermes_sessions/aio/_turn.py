"""The chat of one inbound message, held for the block of :meth:`AsyncSessionStore.turn`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from hermes_sessions.models import SessionEntry
from hermes_sessions.store import SessionLookup

if TYPE_CHECKING:
    from hermes_sessions.models import Message, ResetDecision

__all__ = ["Turn"]


@attrs.define(eq=False)
class Turn:
    """The chat of one inbound message, held for the block of :meth:`AsyncSessionStore.turn`.

    ``entry`` (and ``session_id``) follow rotations made inside the block — ``/new``, resume,
    branch, compression — so a reply appended after ``/new`` lands in the new session. ``lookup``
    is what the block started with.

    .. versionadded:: 0.1.0
    """

    key: str
    lookup: SessionLookup
    entry: SessionEntry

    @property
    def session_id(self) -> str:
        """The key's session now."""
        return self.entry.session_id

    @property
    def created(self) -> bool:
        """Whether the lookup at the start created (or rotated into) the session."""
        return self.lookup.created

    @property
    def reset(self) -> ResetDecision | None:
        """Why the lookup at the start reset the session automatically, if it did."""
        return self.lookup.reset

    @property
    def redelivered(self) -> Message | None:
        """The stored copy, when the turn's message is a redelivery (then nothing rotated)."""
        return self.lookup.redelivered
