"""The rotation plan: the one atomic write of :class:`~hermes_sessions.protocols.Backend`.

Re-exported by :mod:`hermes_sessions.protocols`, where backends import it from.
"""

from __future__ import annotations

from datetime import datetime  # attrs resolves the annotations at runtime
from typing import TYPE_CHECKING, Any

import attrs

from hermes_sessions.exceptions import InvalidArgumentError
from hermes_sessions.models import EndReason, Message, SessionEntry, SessionRecord

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["EntryWrite", "RotationPlan"]


# -- the rotation plan -----------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class EntryWrite:
    """A compare-and-swap write of one routing entry.

    ``expected_revision`` is the revision the caller read, or ``None`` if it found no entry.
    The entry is stored with revision ``expected_revision + 1`` (1 for a new entry); the
    ``revision`` field of ``entry`` is ignored.

    .. versionadded:: 0.1.0
    """

    entry: SessionEntry
    expected_revision: int | None


def _tuple(value: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class RotationPlan:
    """One atomic write across both layers, computed by the store and applied by the backend.

    The backend checks every precondition first — each :class:`EntryWrite` revision, each
    session in ``require_open`` still open, the session to ``create`` not existing yet, every
    session an entry will point to existing (or being created) — and raises
    :class:`~hermes_sessions.exceptions.ConflictError` or
    :class:`~hermes_sessions.exceptions.SessionNotFoundError` without writing anything if one
    fails. Then, in one transaction:

    1. ``create`` is stored (if given) with ``messages`` as its first messages — after a copy of
       ``copy_messages_from``'s transcript, read in this same transaction;
    2. every session in ``reopen`` loses its end reason;
    3. every key pointing at ``from`` in ``repoint`` is re-pointed at ``to`` (revision bumped);
    4. every key in ``delete`` loses its entry;
    5. every ``entries`` write is stored;
    6. every ``(session_id, session_key)`` in ``rekey`` sets that record's ``session_key``;
    7. every ``(session_id, reason)`` in ``end`` is ended at ``at`` (first reason wins) —
       *unless some key still points at it* after steps 3-5: a session shared by several keys
       ends only when the last one leaves it;
    8. every session in ``drop`` is deleted, as :meth:`TranscriptStore.delete_session` does —
       *only if* its revision (before the plan) is still the one given and no key points at it
       after steps 3-5, both checked in this same transaction (else ``ConflictError``, and
       nothing of the plan is written).

    ``delete`` and ``rekey`` serve :meth:`SessionStore.migrate_keys`; a key is never both
    deleted and written by one plan (``ValueError``).

    .. versionadded:: 0.1.0
    """

    at: datetime
    """When the rotation happens (the end time of ended sessions)."""
    create: SessionRecord | None = None
    messages: tuple[Message, ...] = attrs.field(default=(), converter=_tuple)
    reopen: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    repoint: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_tuple)
    """``(from_session_id, to_session_id)``: move every key, whoever it belongs to."""
    entries: tuple[EntryWrite, ...] = attrs.field(default=(), converter=_tuple)
    end: tuple[tuple[str, EndReason | str], ...] = attrs.field(default=(), converter=_tuple)
    """``(session_id, reason)`` pairs, ended unless still referenced (a host may use its own
    reasons beside :data:`~hermes_sessions.models.EndReason`)."""
    require_open: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    """Sessions that must not have ended (else ``ConflictError``)."""
    delete: tuple[tuple[str, int], ...] = attrs.field(default=(), converter=_tuple)
    """``(key, expected_revision)``: remove the entry, checked like an :class:`EntryWrite`
    (a missing entry or another revision is a ``ConflictError``).

    .. versionadded:: 0.1.0
    """
    rekey: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_tuple)
    """``(session_id, session_key)``: rewrite the key a record was created under (the
    session must exist, else ``SessionNotFoundError``; its revision does not move).

    .. versionadded:: 0.1.0
    """
    copy_state_from: str | None = None
    """A session whose session-scope state ``create`` starts with (compression and branch copy
    it; a reset does not). Needs ``create``; the session must exist (else
    ``SessionNotFoundError``)."""
    drop: tuple[tuple[str, int], ...] = attrs.field(default=(), converter=_tuple)
    """``(session_id, expected_revision)``: delete the session, its messages, search rows and
    session state, orphaning its children — the conditional delete of retention. Checked in
    the plan's transaction: a session whose revision moved on (a message or state change since
    it was read), or that a key points at after steps 3-5 (a ``/resume`` that got there
    first), is a ``ConflictError``; an unknown one is ``SessionNotFoundError``. The session's
    end is not required: the caller decides which sessions may go.

    .. versionadded:: 0.1.0
    """
    copy_messages_from: str | None = None
    """A session whose transcript ``create`` starts with (branch copies it), before
    ``messages``: its active messages in order, with new ids, read in the plan's transaction so
    an append racing the rotation is either in the copy or not at all. Needs ``create``; the
    session must exist (else ``SessionNotFoundError``)."""

    def __attrs_post_init__(self) -> None:
        if self.copy_state_from is not None and self.create is None:
            raise InvalidArgumentError("RotationPlan.copy_state_from needs a session to create")
        if self.copy_messages_from is not None and self.create is None:
            raise InvalidArgumentError("RotationPlan.copy_messages_from needs a session to create")
        written = {write.entry.session_key for write in self.entries}
        both = sorted(written.intersection(key for key, _ in self.delete))
        if both:
            raise InvalidArgumentError(f"RotationPlan deletes and writes the same keys {both}")
        dropped = {session_id for session_id, _ in self.drop}
        kept = set(self.reopen) | {target for _, target in self.repoint}
        kept |= {write.entry.session_id for write in self.entries}
        if self.create is not None:
            kept.add(self.create.id)
        if dropped & kept:
            raise InvalidArgumentError(
                f"RotationPlan drops sessions it creates, reopens or points keys at "
                f"{sorted(dropped & kept)}"
            )
