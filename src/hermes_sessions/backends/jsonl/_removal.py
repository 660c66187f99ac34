"""Deleting sessions on JSONL: ``delete_session`` and the ``drop`` of a rotation plan.

Both run with the directory lock held. A plan's drops are removed right after the plan's own
record commits, under that same lock, so no other writer sees the state between; a crash in
between leaves the dropped session in place, unreferenced, for the next retention pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_sessions.backends.jsonl._journal import Plan, Remove

if TYPE_CHECKING:
    from hermes_sessions.backends.jsonl._cache import State
    from hermes_sessions.backends.jsonl._engine import DirectoryEngine

__all__ = ["commit_plan", "remove_session"]


def remove_session(engine: DirectoryEngine, state: State, session_id: str) -> None:
    """Delete a session's file and orphan its children."""
    parent = f'"parent_session_id":"{session_id}"'.encode()
    children = sorted(
        cached.record.id
        for cached in state.sessions.files(containing=parent)
        if cached.record.parent_session_id == session_id
    )
    engine.remove(Remove(engine.next_tx, session_id, tuple(children)))


def commit_plan(
    engine: DirectoryEngine, state: State, record: Plan, drop: tuple[tuple[str, int], ...]
) -> None:
    """Apply a checked plan, then remove the sessions it drops."""
    if not drop or record != Plan(record.tx, record.at):  # a drop-only plan logs no plan
        engine.apply_plan(record)
    for session_id, _ in drop:
        remove_session(engine, state, session_id)
