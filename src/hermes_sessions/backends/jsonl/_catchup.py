"""Catching up: which session files changed, how to read each, then one step that cannot fail.

:func:`change_kinds` decides, per session file a batch of journal records (or a new snapshot)
changed, whether to read its tail, read it whole, forget it or take the snapshot's summary of
it; the engine reads and checks accordingly; :func:`apply_changes` then changes the cache.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_sessions.backends.jsonl._cache import (
    Change,
    Kind,
    SessionFile,
    State,
    Tail,
    apply_lines,
    apply_record,
    load_session,
    read_tail,
    touched_sessions,
)
from hermes_sessions.backends.jsonl._journal import Plan, Void
from hermes_sessions.backends.jsonl._search import SearchIndex
from hermes_sessions.backends.jsonl._snapshot import Summary
from hermes_sessions.backends.jsonl._tables import RoutingTable, SessionMap
from hermes_sessions.backends.jsonl._verify import missing_file

if TYPE_CHECKING:
    from hermes_sessions.backends.jsonl._engine import DirectoryEngine
    from hermes_sessions.backends.jsonl._journal import JournalRecord
    from hermes_sessions.backends.jsonl._snapindex import SnapshotIndex
    from hermes_sessions.backends.jsonl._snapshot import Snapshot

__all__ = ["apply_changes", "change_kinds", "gather", "install_index"]


def gather(
    engine: DirectoryEngine, records: list[JournalRecord], base: Snapshot | None
) -> dict[str, Change]:
    """Phase one: read and check every session file the records (or the snapshot) changed."""
    state = engine.state
    changes: dict[str, Change] = {}
    kinds = change_kinds(state, records, base, summaries=engine.use_summaries)
    for session_id, kind in kinds.items():
        cached = state.sessions.get(session_id)
        path = engine.session_path(session_id)
        if kind == "drop":
            changes[session_id] = None
        elif kind == "summary":
            assert base is not None  # noqa: S101  # summaries come with a snapshot
            changes[session_id] = base.summaries[session_id]
        elif kind == "tail" and cached is not None:
            changes[session_id] = read_tail(path, cached, session_id)
        else:
            try:
                changes[session_id] = load_session(path, session_id)
            except FileNotFoundError as error:
                raise missing_file(session_id, path) from error
    return changes


def install_index(state: State, index: SnapshotIndex) -> None:
    """Start the cache over from a lazily read snapshot (nothing is decoded yet).

    The transcripts this process holds of sessions whose version the snapshot has too are kept
    (their files did not change); every other session is read from the snapshot when needed.
    """
    old = state.sessions
    kept: dict[str, SessionFile] = {}
    for session_id, cached in old.held.items():
        found = index.session(session_id) if cached.loaded is not None else None
        if found is not None and found.version == cached.version:
            kept[session_id] = cached
    if state.searching:  # built again by the next search, from the new snapshot's sessions
        state.searching = False
        state.index = SearchIndex()
    for session_id in list(old.held):
        if session_id not in kept:
            state.forget(session_id)
    state.close()
    state.table = RoutingTable(base=index)
    state.sessions = SessionMap(index, bound=old.bound)
    for session_id, cached in kept.items():
        state.sessions.keep(session_id, cached)
    state.leases = dict(index.leases)
    state.scopes = dict(index.scopes)
    state.last_tx = index.last_tx
    state.journal_records = 0


def change_kinds(
    state: State, records: list[JournalRecord], base: Snapshot | None, *, summaries: bool = True
) -> dict[str, Kind]:
    """How to catch up with each session file that ``records`` (or a new ``base``) changed.

    A session the snapshot summarises is not read (unless a record after the snapshot changed
    it, or ``summaries`` is off, or the search index needs every message); a tail of a session
    whose transcript is not loaded is read as the whole file.
    """
    sessions = state.sessions
    kinds: dict[str, Kind] = {}
    if base is not None:
        use = summaries and not state.searching
        for session_id, version in base.versions.items():
            cached = sessions.get(session_id)
            if cached is None or cached.version != version:
                kinds[session_id] = "summary" if use and session_id in base.summaries else "reload"
        kinds.update({sid: "drop" for sid in sessions if sid not in base.versions})
    for record in records:
        for session_id, kind in touched_sessions(record):
            if kind != "tail":
                kinds[session_id] = kind
                continue
            cached = sessions.get(session_id)
            current = kinds.get(session_id)
            if current == "summary" or (
                current is None and (cached is None or cached.loaded is None)
            ):
                kinds[session_id] = "reload"
            else:
                kinds.setdefault(session_id, "tail")
    return kinds


def apply_changes(
    state: State, records: list[JournalRecord], changes: dict[str, Change], base: Snapshot | None
) -> None:
    """Change the cache: the snapshot ``base`` (if any), the files read, then the records.

    Everything was read and checked before, so nothing here can fail.
    """
    if base is not None:
        state.table = RoutingTable()  # the sessions were never read from an index (the engine)
        for entry in base.entries:
            state.table.put(entry)
        state.leases = dict(base.leases)
        state.scopes = dict(base.scopes)
        state.last_tx = base.last_tx
        state.journal_records = 0
    for session_id, change in changes.items():
        _install(state, session_id, change, base)
    state.trim()  # only now: a tail above may extend a transcript a later read would evict
    voided = {record.tx for record in records if isinstance(record, Void)}
    plans: dict[int, Plan] = {}
    for record in records:
        state.last_tx = max(state.last_tx, record.tx)
        state.journal_records += 1
        apply_record(state, record, voided, plans)


def _extend(state: State, old: SessionFile | None, change: Tail) -> None:
    transcript = None if old is None else old.loaded
    assert old is not None  # noqa: S101  # tails are read of loaded files only
    assert transcript is not None  # noqa: S101
    for message in apply_lines(transcript, (p[1] for p in change.parsed)):
        if state.searching:
            state.index.add(message)
    old.offset = change.chunk.end
    old.lines = change.chunk.last_line
    if change.parsed:
        old.newest_tx = change.parsed[-1][1].tx


def _forget(state: State, session_id: str) -> None:
    if state.searching:
        state.index.drop(session_id)
    state.forget(session_id)
    del state.sessions[session_id]


def _install(state: State, session_id: str, change: Change, base: Snapshot | None) -> None:
    old = state.sessions.get(session_id)
    if isinstance(change, Tail):
        _extend(state, old, change)
        return
    if old is not None:
        _forget(state, session_id)
    if isinstance(change, Summary):
        assert base is not None  # noqa: S101  # summaries come with a snapshot
        lines = base.lines.get(session_id, 0)
        state.sessions[session_id] = SessionFile.summarised(
            change, lines, base.versions.get(session_id, 0)
        )
    elif change is not None:
        fresh = change.session
        if base is not None:
            fresh.version = base.versions.get(session_id, 0)
        elif old is not None:
            fresh.version = old.version
        state.sessions[session_id] = fresh
        assert fresh.loaded is not None  # noqa: S101  # read whole
        if state.searching:
            state.index.add_all(fresh.loaded)
        state.hold(session_id, trim=False)
