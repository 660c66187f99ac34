"""Checks of the session files against the index, run while catching up (nothing is changed).

Checksums find a line that changed; these checks find lines that are *missing* (or were added
by another program), which no checksum can:

* :func:`check_line_counts` — every write the journal announces says how many lines it adds to
  which file (``line_effects``), and the snapshot records each file's line count at the
  compaction. A file read whole, or the tail read from a file, must hold exactly that many
  lines (a lost ``end`` line would otherwise reopen a session behind its key's back), and no
  line of a transaction newer than the journal's last (the journal lost records).
* :func:`cross_check` — after reading the whole index: every session file on disk is in it.
* :func:`check_end` — before an append: the file ends where the index says.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from hermes_sessions.backends.jsonl._cache import Loaded, Tail
from hermes_sessions.backends.jsonl._journal import Void, Write, line_effects
from hermes_sessions.backends.jsonl._lines import read_chunk, truncate
from hermes_sessions.exceptions import CorruptRecordError
from hermes_sessions.ids import validate_session_id

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from hermes_sessions.backends.jsonl._cache import Change, SessionFile, State
    from hermes_sessions.backends.jsonl._journal import JournalRecord
    from hermes_sessions.backends.jsonl._snapshot import Snapshot

__all__ = ["check_end", "check_line_counts", "cross_check", "expected_counts", "missing_file"]


def _repair_hint(directory: Path) -> str:
    """What to do about a file that disagrees with the index."""
    return (
        f"stop every process using {directory} and run JSONLBackend.repair(), which keeps "
        "every readable line"
    )


def expected_counts(records: Sequence[JournalRecord]) -> dict[str, tuple[int | None, int]]:
    """Per session file the records change: ``(lines, added)``.

    ``lines`` is the count a record that (re)wrote the file gave it (``None``: none did,
    ``-1``: not known), ``added`` the lines appended after that. A voided write adds nothing.
    """
    voided = {record.tx for record in records if isinstance(record, Void)}
    counts: dict[str, tuple[int | None, int]] = {}
    for record in records:
        if isinstance(record, Write) and record.tx in voided:
            continue
        for session_id, lines, added in line_effects(record):
            if lines is not None:
                counts[session_id] = (lines, 0)
            else:
                start, before = counts.get(session_id, (None, 0))
                counts[session_id] = (start, before + added)
    return counts


def check_line_counts(
    state: State,
    records: Sequence[JournalRecord],
    changes: dict[str, Change],
    *,
    base: Snapshot | None,
    path_of: Callable[[str], Path],
) -> None:
    """Refuse a file ahead of the journal, or a checksummed one of the wrong length.

    ``changes`` is what catching up read of each file the ``records`` (after ``base``, when the
    whole index is being read) changed; nothing has been applied yet.
    """
    counts = expected_counts(records)
    last_tx = max([base.last_tx if base is not None else state.last_tx, *(r.tx for r in records)])
    for session_id, change in changes.items():
        if not isinstance(change, Loaded | Tail):  # dropped, or installed from its summary
            continue
        path = path_of(session_id)
        ahead = next((pair for pair in change.parsed if pair[1].tx > last_tx), None)
        if ahead is not None:
            raise CorruptRecordError(
                f"the line belongs to transaction {ahead[1].tx}, but the journal ends at "
                f"{last_tx}: the journal lost records",
                path=path,
                line=ahead[0].number,
                hint=_repair_hint(path.parent.parent),
            )
        lengths = _lengths(state, session_id, change, counts.get(session_id, (None, 0)), base)
        if lengths is not None and lengths[0] != lengths[1]:
            actual, expected = lengths
            what = "lines were lost" if actual < expected else "lines were added by another program"
            raise CorruptRecordError(
                f"the file has {actual} lines, but the journal and the snapshot account for "
                f"{expected}: {what}",
                path=path,
                hint=_repair_hint(path.parent.parent),
            )


def _lengths(
    state: State,
    session_id: str,
    change: Loaded | Tail,
    count: tuple[int | None, int],
    base: Snapshot | None,
) -> tuple[int, int] | None:
    """The (actual, expected) line count of a checksummed file, if the index knows it."""
    start, added = count
    if isinstance(change, Tail):
        cached = state.sessions[session_id]
        if not cached.checksums:
            return None
        return change.chunk.last_line, cached.lines + added
    if not change.session.checksums:
        return None
    if start is None and base is not None:
        start = base.lines.get(session_id)
    elif start is None and session_id in state.sessions:  # tails of a file read whole
        start = state.sessions[session_id].lines
    if start is None or start < 0:
        return None  # no record says how long the file is (written in format 1)
    return change.session.lines, start + added


def cross_check(state: State, sessions_dir: Path) -> None:
    """Refuse session files the index does not list.

    Opening a directory whose journal lost records would otherwise start those sessions' keys
    over on top of their transcripts.
    """
    directory = sessions_dir.parent
    with os.scandir(os.fsencode(sessions_dir)) as found:
        names = {entry.name[:-6] for entry in found if entry.name.endswith(b".jsonl")}
    unknown = state.sessions.unlisted(names)
    for session_id in sorted(unknown):
        name = f"{session_id}.jsonl"
        try:
            validate_session_id(session_id)
        except ValueError:
            continue  # not a name this backend writes: never a session of ours
        raise CorruptRecordError(
            f"session {session_id} has a file but is not in the index: the journal or the "
            "snapshot lost records, and opening would start the session's key over",
            path=sessions_dir / name,
            hint=f"stop every process using {directory} and run JSONLBackend.repair(), which "
            "adopts the file and gives its key an entry again",
        )


def missing_file(session_id: str, path: Path) -> CorruptRecordError:
    """The error for a session the index lists whose file is gone."""
    return CorruptRecordError(
        f"session {session_id} is in the index but its file is missing; run JSONLBackend.repair()",
        path=path,
    )


def check_end(path: Path, cached: SessionFile) -> None:
    """Before an append: cut a torn last line; refuse lines the journal never announced."""
    size = path.stat().st_size
    if size == cached.offset:
        return
    if size > cached.offset:
        chunk = read_chunk(path, offset=cached.offset, first_line=cached.lines + 1)
        if not chunk.lines:
            truncate(path, cached.offset, sync=False)
            return
    raise CorruptRecordError(
        f"the file is {size} bytes, but the journal accounts for {cached.offset}: it was "
        "changed by another program; stop every process using the directory and run "
        "JSONLBackend.repair()",
        path=path,
        line=cached.lines + 1,
    )
