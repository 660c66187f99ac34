"""Migrating a data directory from format 1 (lines without checksums) to format 2.

Opening also compacts a directory whose snapshot has no index yet (:func:`needs_index`).

Opening a directory runs the migration under the directory lock when the journal, or any
session file, is still in format 1 (a directory written by hermes-sessions before checksums,
or files bulk-loaded in format 1). Each format 1 session file is rewritten the way every
rewrite is — announced in the journal, written to a temporary file, fsynced, renamed — so the
migration is safe to kill at any moment: a file is in one format or the other, and the next
open migrates what is left. Then the journal is compacted, which writes the snapshot and a new
journal in format 2. Processes that had the directory open re-read each rewritten file, as
after any rewrite.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_sessions.backends.jsonl._journal import NewSession

if TYPE_CHECKING:
    from hermes_sessions.backends.jsonl._engine import DirectoryEngine

__all__ = ["migrate", "migrate_session_file", "needs_index", "needs_migration"]


def needs_migration(engine: DirectoryEngine) -> bool:
    """Whether the journal or a session file of the (caught up) directory is in format 1."""
    if not engine.journal_checksums:
        return True
    # a snapshot read lazily summarises checksummed files only: the held sessions tell
    return any(not cached.checksums for cached in engine.state.sessions.held.values())


def needs_index(engine: DirectoryEngine) -> bool:
    """Whether the snapshot was read whole for want of an index (written by an older version).

    Opening then compacts once, so the next open reads the snapshot lazily (:mod:`._snapindex`).
    """
    return (
        engine.use_summaries
        and engine.verify_files
        and engine.state.sessions.base is None
        and engine.snapshot_path.exists()
    )


def migrate_session_file(engine: DirectoryEngine, session_id: str) -> None:
    """Rewrite one session file in the current format, from what was read of it."""
    transcript = engine.state.transcript(session_id)
    messages = tuple(transcript.messages.values())
    new = NewSession(transcript.record, transcript.next_id, messages)
    engine.rewrite(engine.next_tx, new)


def migrate(engine: DirectoryEngine) -> None:
    """Bring every file of the directory to the current format (the lock is held)."""
    for session_id in sorted(engine.state.sessions):
        if not engine.state.sessions[session_id].checksums:
            migrate_session_file(engine, session_id)
    engine.compact()
