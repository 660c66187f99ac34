"""The rotation on SQLite: a :class:`RotationPlan` checked, then applied, in one transaction.

The preconditions are the shared rule (:func:`hermes_sessions.backends.rules.check_plan`) over
lookups in the caller's write transaction, so nothing can change between check and write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from hermes_sessions.backends.rules import (
    check_drop_revisions,
    check_drops_unreferenced,
    check_plan,
    first_messages,
)
from hermes_sessions.backends.sqlite import _entries as entries
from hermes_sessions.backends.sqlite import _ledger as ledger
from hermes_sessions.backends.sqlite import _messages as messages
from hermes_sessions.backends.sqlite import _sessions as sessions
from hermes_sessions.backends.sqlite import _state as state

if TYPE_CHECKING:
    import sqlite3

    from hermes_sessions.models import Message, SessionEntry
    from hermes_sessions.protocols import RotationPlan

__all__ = ["apply_plan", "drop_session"]


def drop_session(connection: sqlite3.Connection, session_id: str, *, fts: bool) -> bool:
    """Delete a session, its messages, search rows, state and ledger rows; orphan its children."""
    found = connection.execute("SELECT seq FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if found is None:
        return False
    seq = int(found[0])
    messages.remove_all(connection, seq, fts=fts)
    sessions.delete(connection, seq, session_id)
    state.forget(connection, session_id)
    ledger.forget(connection, session_id)
    return True


def _first_messages(connection: sqlite3.Connection, plan: RotationPlan) -> list[Message]:
    """The created session's first messages: the copied transcript, then ``plan.messages``."""
    copied: list[Message] = []
    if plan.copy_messages_from is not None:
        copied = messages.window(
            connection,
            plan.copy_messages_from,
            after_id=None,
            before_id=None,
            limit=None,
            include_inactive=False,
            from_end=False,
        )
    return first_messages(plan, copied)


def _write_entries(connection: sqlite3.Connection, plan: RotationPlan) -> list[SessionEntry]:
    """Steps 3-5 of a plan: re-point, delete, then write entries; return those written."""
    written: list[SessionEntry] = []
    for source, target in plan.repoint:
        for entry in entries.listing(connection, source):
            moved = attrs.evolve(entry, session_id=target)
            written.append(entries.store(connection, moved, moved.revision))
    for key, _ in plan.delete:
        entries.delete(connection, key)
    for write in plan.entries:
        expected = write.expected_revision
        current = entries.revision(connection, write.entry.session_key)
        if current is not None and expected is not None and current != expected:
            expected = current  # a repoint in this same plan moved the key
        written.append(entries.store(connection, write.entry, expected))
    return written


def apply_plan(
    connection: sqlite3.Connection, plan: RotationPlan, *, fts: bool
) -> list[SessionEntry]:
    """Check every precondition of ``plan``, then make every change (see ``RotationPlan``)."""
    check_plan(
        plan,
        lambda key: entries.revision(connection, key),
        lambda session_id: sessions.ended(connection, session_id),
    )
    check_drop_revisions(plan, lambda session_id: _revision(connection, session_id))
    if plan.create is not None:
        first = _first_messages(connection, plan)
        sessions.create(connection, plan.create)
        seq = sessions.seq_of(connection, plan.create.id)
        messages.append(connection, seq, plan.create.id, first, fts=fts)
        if plan.copy_state_from is not None:
            state.copy(connection, plan.copy_state_from, plan.create.id)
    for session_id in plan.reopen:
        sessions.reopen(connection, session_id)
    written = _write_entries(connection, plan)
    for session_id, key in plan.rekey:
        rekeyed = attrs.evolve(sessions.existing(connection, session_id), session_key=key)
        sessions.update(connection, rekeyed, ["session_key"])
    for session_id, reason in plan.end:
        if not entries.points_at(connection, session_id):
            sessions.end(connection, session_id, reason, plan.at)
    check_drops_unreferenced(plan, lambda session_id: entries.points_at(connection, session_id))
    for session_id, _ in plan.drop:
        drop_session(connection, session_id, fts=fts)
    return written


def _revision(connection: sqlite3.Connection, session_id: str) -> int | None:
    found = sessions.record(connection, session_id)
    return None if found is None else found.revision
