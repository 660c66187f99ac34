"""The JSONL backend's on-demand reads: a session's transcript, read when a call needs it.

Opening (and catching up after a compaction) installs each session from the snapshot's summary
without reading its file; the cache (:class:`~._cache.State`) calls :func:`load_transcript`
the first time a call needs a session's messages, and drops the least recently used
transcripts beyond its bound. A read without the directory lock takes only the bytes the index
accounts for, so lines another process is appending are left for the next catch-up; a file
that does not match (another process rewrote it meanwhile) is read again after catching up
under the lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_sessions.backends.jsonl._cache import load_session
from hermes_sessions.backends.jsonl._verify import missing_file
from hermes_sessions.backends.rules import missing_session
from hermes_sessions.exceptions import CorruptRecordError

if TYPE_CHECKING:
    from hermes_sessions.backends.jsonl._engine import DirectoryEngine
    from hermes_sessions.backends.memtables import Transcript

__all__ = ["load_transcript"]


def load_transcript(engine: DirectoryEngine, session_id: str) -> Transcript:
    """Read the transcript of a cached session (the cache's on-demand read).

    Reads the file as far as the index accounts for and checks it holds what the index
    says (line count, record). Without the lock, a mismatch means another process changed
    the file since this one caught up: catch up under the lock and read again. With the
    lock held (or after catching up) a mismatch is damage: ``CorruptRecordError``.
    """
    loaded = _read_cached(engine, session_id)
    if loaded is not None:
        return loaded
    if engine.locked:
        raise _mismatch(engine, session_id)
    with engine.exclusive():
        engine.sync()
        cached = engine.state.sessions.get(session_id)
        if cached is None:
            raise missing_session(session_id)
        if cached.loaded is not None:  # catching up read it
            return cached.loaded
        loaded = _read_cached(engine, session_id)
        if loaded is None:
            raise _mismatch(engine, session_id)
        return loaded


def _read_cached(engine: DirectoryEngine, session_id: str) -> Transcript | None:
    cached = engine.state.sessions[session_id]
    path = engine.session_path(session_id)
    try:
        read = load_session(path, session_id, end=cached.offset)
    except FileNotFoundError:
        return None
    except CorruptRecordError:
        if engine.locked:
            raise
        return None  # perhaps rewritten meanwhile: decided under the lock
    fresh = read.session
    if (fresh.offset, fresh.lines, fresh.record, fresh.next_id) != (
        cached.offset,
        cached.lines,
        cached.record,
        cached.next_id,
    ):
        return None
    cached.newest_tx = fresh.newest_tx
    assert fresh.loaded is not None  # noqa: S101  # read whole
    return fresh.loaded


def _mismatch(engine: DirectoryEngine, session_id: str) -> CorruptRecordError:
    path = engine.session_path(session_id)
    if not path.exists():
        return missing_file(session_id, path)
    cached = engine.state.sessions[session_id]
    whole = load_session(path, session_id).session  # a malformed line raises, naming it
    if (whole.lines, whole.offset) != (cached.lines, cached.offset):
        what = "lines were lost" if whole.lines < cached.lines else "lines were added"
        found = f"the file has {whole.lines} lines ({whole.offset} bytes)"
        reason = (
            f"the journal and the snapshot account for {cached.lines} ({cached.offset}): {what}"
        )
    else:
        found = "the session the file holds"
        reason = "differs from the snapshot's summary of it"
    return CorruptRecordError(
        f"{found}, but {reason}",
        path=path,
        hint=f"stop every process using {engine.directory} and run JSONLBackend.repair(), "
        "which keeps every readable line",
    )
