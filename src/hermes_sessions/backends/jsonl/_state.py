"""The JSONL backend's writes that carry state: appends, ``update_state`` and its reads.

State lives in the journal (and the snapshot it is compacted into), never in session files:
each write stores every changed scope's *new value*, merged under the directory lock from the
current one, so replaying the journal is exact and no concurrent update is lost. A change made
through a session is a ``write`` record (the scopes ride on it, like ``touch``) announcing lines
of that session's file — its messages, or one ``revise`` line — so the state is applied exactly
when those lines all arrived; a write cut short is voided, state included. The revision is
derived from the session file: the header's, plus one for every later transaction that holds a
message, ``active`` or ``revise`` line.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import attrs

from hermes_sessions.backends.jsonl._journal import StateChange, Touch
from hermes_sessions.backends.jsonl._session_records import MessageLine, Revise, Update
from hermes_sessions.backends.rules import (
    check_session_revision,
    check_state_target,
    merged_states,
    missing_session,
    touched_entry,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from datetime import datetime

    from hermes_sessions.backends.jsonl._cache import SessionFile, State
    from hermes_sessions.backends.jsonl._engine import DirectoryEngine
    from hermes_sessions.models import JSONObject, Message, SessionRecord
    from hermes_sessions.results import AppendResult
    from hermes_sessions.usage import Usage

__all__ = [
    "append",
    "plan_ends",
    "read_state",
    "record_of",
    "records",
    "session_file",
    "update_state",
]


def session_file(state: State, session_id: str) -> SessionFile:
    """The cached file of ``session_id``; ``SessionNotFoundError`` when there is none."""
    cached = state.sessions.get(session_id)
    if cached is None:
        raise missing_session(session_id)
    return cached


def records(state: State) -> Iterator[SessionRecord]:
    """The record of every session that may hold a title (checked under the write lock).

    Of the sessions not decoded yet, only those whose snapshot line names a title are.
    """
    return (cached.record for cached in state.sessions.files(containing=b'"title":'))


def _merged(state: State, changes: Mapping[str, Mapping[str, Any]]) -> dict[str, JSONObject]:
    """Every changed scope's new value (raises ``StateTooLargeError`` before any write)."""
    return merged_states(changes, {s: state.scopes[s] for s in changes if s in state.scopes})


def read_state(state: State, scope_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The value of every listed scope that holds one (copies: the cache stays ours)."""
    scopes = state.scopes
    return {s: copy.deepcopy(scopes[s]) for s in dict.fromkeys(scope_ids) if s in scopes}


def append(
    engine: DirectoryEngine,
    session_id: str,
    messages: Sequence[Message],
    *,
    touch_at: datetime | None,
    usage: Usage | None,
    state_changes: Mapping[str, Mapping[str, Any]] | None,
    if_revision: int | None,
) -> AppendResult:
    """``append_messages`` with the directory lock held (see the module docstring)."""
    state = engine.state
    transcript = state.transcript(session_id)
    plan = transcript.prepare(messages)
    if plan.result.duplicate:  # a redelivery: nothing written, never a conflict
        return attrs.evolve(plan.result, revision=transcript.record.revision)
    check_session_revision(session_id, if_revision, transcript.record.revision)
    values = _merged(state, state_changes or {})
    tx = engine.next_tx
    lines: list[MessageLine | Revise | Update] = [MessageLine(tx, m) for m in plan.new]
    if state_changes and not lines:
        lines.append(Revise(tx))
    if lines:
        if usage is not None and (usage.values() or usage.increments()):
            lines.append(Update(tx, usage.values(), usage.increments()))
        engine.write(session_id, lines, touch=touch_at, state=values)
    elif touch_at is not None and any(
        touched_entry(entry, touch_at) != entry for entry in state.table.listing(session_id)
    ):
        engine.log(Touch(tx, touch_at, session=session_id))
    stored = engine.state.transcript(session_id)
    return attrs.evolve(
        plan.result,
        messages=[stored.messages[message.id or 0] for message in plan.result],
        revision=stored.record.revision,
    )


def update_state(
    engine: DirectoryEngine,
    changes: Mapping[str, Mapping[str, Any]],
    *,
    session_id: str | None,
    if_revision: int | None,
) -> SessionRecord | None:
    """``update_state`` with the directory lock held: one journal record, all or nothing."""
    check_state_target(session_id, if_revision)
    state = engine.state
    if session_id is None:
        values = _merged(state, changes)
        if values:
            engine.log(StateChange(engine.next_tx, values))
        return None
    record = session_file(state, session_id).record
    check_session_revision(session_id, if_revision, record.revision)
    values = _merged(state, changes)
    engine.write(session_id, [Revise(engine.next_tx)], state=values)
    return engine.state.sessions[session_id].record


def record_of(state: State) -> Callable[[str], SessionRecord | None]:
    """Look up a session's record in the cache (what resolving a rotation needs)."""

    def record_of(session_id: str) -> SessionRecord | None:
        cached = state.sessions.get(session_id)
        return None if cached is None else cached.record

    return record_of


def plan_ends(state: State, ends: list[tuple[str, str]], reopen: Sequence[str]) -> dict[str, str]:
    """The sessions a plan really ends: not ended already (unless reopened first), once."""
    ending: dict[str, str] = {}
    for session_id, reason in ends:
        cached = state.sessions.get(session_id)
        ended = cached is not None and cached.record.is_ended
        if session_id not in ending and (not ended or session_id in reopen):
            ending[session_id] = reason
    return ending
