"""``JSONLBackend.check``: what is wrong with the files of a data directory, changing nothing.

Two passes, both reusing what already guards the data:

1. **Lines.** :mod:`._repair`'s first pass in ``dry_run`` mode: every line of every session
   file, the journal and the snapshot is read, and each one whose CRC32 fails, that is not a
   known record, is out of order, or is torn, is a problem, as is a file without a readable
   header. Nothing is copied or rewritten.
2. **Index.** A fresh engine reads the snapshot and the whole journal, as a first open does,
   with the checks it always runs: the line counts the journal announces against each session
   file, and every session file on disk against the index (:mod:`._verify`). Like every
   reader of the directory, it completes a write a killed process left unfinished at the
   journal's end (under the lock); that is the only thing ``check()`` may write. It reads
   every session file (ignoring the snapshot's summaries), then compares each summary with
   the file it summarises, unless the journal changed that file since.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_sessions.backends.jsonl._engine import DirectoryEngine
from hermes_sessions.backends.jsonl._repair import BACKUPS, LineChecker
from hermes_sessions.checks import CheckProblem, corrupt_problem
from hermes_sessions.exceptions import CorruptRecordError

if TYPE_CHECKING:
    from pathlib import Path

    from hermes_sessions.backends.jsonl._snapshot import Snapshot

__all__ = ["storage_problems"]

_NEVER_COMPACT = 2**62


def _where(path: Path | str | None, line: int | None) -> str:
    if path is None:
        return ""
    return f"{path}" + ("" if line is None else f" line {line}")


def storage_problems(directory: Path, *, lock_timeout: float) -> list[CheckProblem]:
    """The problems of the files under ``directory`` (see the module docstring)."""
    engine = DirectoryEngine(
        directory,
        sync_writes=False,
        lock_timeout=lock_timeout,
        compact_threshold=_NEVER_COMPACT,
        use_summaries=False,  # read every session file: check the summaries against them
    )
    looker = LineChecker(engine, directory / BACKUPS / "unused", dry_run=True)
    problems: list[CheckProblem] = []
    try:
        with engine.exclusive():
            looker.fix_lines()
            problems.extend(
                CheckProblem("storage", _where(d.path, d.line), f"{d.reason}; run repair()")
                for d in looker.dropped
            )
            problems.extend(
                CheckProblem("storage", str(path), "no readable header; run repair()")
                for path in looker.moved
                if path not in {d.path for d in looker.dropped}
            )
            try:
                engine.sync()
            except CorruptRecordError as error:
                problems.append(corrupt_problem(error, "storage"))
            else:
                problems.extend(_summary_problems(engine))
    finally:
        engine.close()
    return problems


def _summary_problems(engine: DirectoryEngine) -> list[CheckProblem]:
    """Sessions whose snapshot summary does not match their file (read whole just before)."""
    snapshot = engine.read_snapshot()
    if snapshot is None:
        return []
    problems = _index_problems(engine, snapshot)
    for session_id, summary in sorted(snapshot.summaries.items()):
        cached = engine.state.sessions.get(session_id)
        if cached is None or cached.version != snapshot.versions.get(session_id):
            continue  # changed since the snapshot: the journal accounts for it
        if summary != cached.summary():
            problems.append(
                CheckProblem(
                    "storage",
                    str(engine.session_path(session_id)),
                    "the snapshot's summary of this session (record, next id, preview, length) "
                    "does not match its file; run repair()",
                )
            )
    return problems


def _index_problems(engine: DirectoryEngine, snapshot: Snapshot) -> list[CheckProblem]:
    """What a lazy reader of the snapshot relies on: sorted keys and ids, each session's keys."""
    if not snapshot.index:
        return []
    keys = [entry.session_key for entry in snapshot.entries]
    ids = list(snapshot.versions)
    pointing: dict[str, list[str]] = {}
    for entry in snapshot.entries:
        pointing.setdefault(entry.session_id, []).append(entry.session_key)
    reasons = []
    if keys != sorted(set(keys)) or ids != sorted(set(ids)):
        reasons.append("its entries or sessions are not in key order")
    if any(tuple(pointing.get(i, ())) != snapshot.keys.get(i) for i in ids):
        reasons.append("a session line's keys differ from the entries pointing at it")
    return [
        CheckProblem("storage", str(engine.snapshot_path), f"{reason}; run repair()")
        for reason in reasons
    ]
