"""The JSONL backend's in-memory cache, and how file lines and journal records change it.

:class:`State` is one process's cache of a whole directory. A :class:`SessionFile` is the
shared :class:`~hermes_sessions.backends.memtables.Transcript` of one
session plus how far its file has been read. Reading happens in two phases so that a malformed
file never leaves the cache half-updated: :func:`load_session` and :func:`read_tail` parse and
check everything (raising ``CorruptRecordError`` with the file and line), then
:func:`apply_lines` changes the cache and cannot fail.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Literal

import attrs

from hermes_sessions.backends.jsonl._journal import (
    Commit,
    Create,
    Delete,
    JournalRecord,
    Lease,
    Plan,
    Put,
    Release,
    Remove,
    Rewrite,
    StateChange,
    Touch,
    Write,
)
from hermes_sessions.backends.jsonl._ledger import rows_of_session as ledger_rows_of
from hermes_sessions.backends.jsonl._lines import Chunk, Line, read_chunk, require_checksums
from hermes_sessions.backends.jsonl._search import SearchIndex
from hermes_sessions.backends.jsonl._session_records import (
    CHECKSUMS_SINCE,
    REVISING,
    Active,
    End,
    Header,
    MessageLine,
    Orphan,
    Reopen,
    Revise,
    SessionLine,
    Update,
    parse_session_line,
)
from hermes_sessions.backends.jsonl._snapshot import Summary
from hermes_sessions.backends.jsonl._tables import RoutingTable, SessionFile, SessionMap
from hermes_sessions.backends.memtables import EntryTable, Transcript
from hermes_sessions.backends.rules import apply_update, missing_session, session_scope
from hermes_sessions.exceptions import CorruptRecordError
from hermes_sessions.models import JSONObject

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from pathlib import Path

    from hermes_sessions.models import Message

__all__ = [
    "Change",
    "Kind",
    "Loaded",
    "Parsed",
    "SessionFile",
    "State",
    "Tail",
    "apply_lines",
    "apply_record",
    "load_session",
    "read_tail",
    "set_scopes",
    "touched_sessions",
    "trailing_group",
]

Parsed = tuple[Line, SessionLine]


@attrs.frozen
class Loaded:
    """A session file read whole: the new cache entry and the lines it was built from."""

    session: SessionFile
    parsed: list[Parsed]
    chunk: Chunk


@attrs.frozen
class Tail:
    """The lines appended to a cached session file since it was last read."""

    parsed: list[Parsed]
    chunk: Chunk


def _parse(chunk: Chunk, path: Path, session_id: str) -> list[Parsed]:
    return [
        (line, parse_session_line(line.data, path=path, line=line.number, session_id=session_id))
        for line in chunk.lines
    ]


def _check_order(parsed: Iterable[Parsed], next_id: int, path: Path) -> None:
    """Message ids must increase through the file; a header may only open it."""
    for line, record in parsed:
        if isinstance(record, Header):
            raise CorruptRecordError(
                "a session header in the middle of the file", path=path, line=line.number
            )
        if isinstance(record, MessageLine):
            message_id = record.message.id or 0
            if message_id < next_id:
                raise CorruptRecordError(
                    f"message id {message_id} does not follow {next_id - 1}",
                    path=path,
                    line=line.number,
                )
            next_id = message_id + 1


def load_session(path: Path, session_id: str, *, end: int | None = None) -> Loaded:
    """Read a whole session file into a new :class:`SessionFile` (version 0).

    With ``end``, only that many bytes are read (what the index accounts for: lines another
    process is appending right now are left for the next catch-up). Raises
    ``FileNotFoundError`` if there is no file, ``CorruptRecordError`` if it is malformed and
    ``IncompatibleStoreError`` if a newer library wrote it.
    """
    chunk = read_chunk(path, offset=0, first_line=1, end=end)
    first = chunk.lines[0] if chunk.lines else None
    header = (
        None
        if first is None
        else parse_session_line(first.data, path=path, line=first.number, session_id=session_id)
    )
    if first is None or not isinstance(header, Header):
        number = 1 if first is None else first.number
        raise CorruptRecordError("a session file starts with its header", path=path, line=number)
    checksums = header.format >= CHECKSUMS_SINCE
    if checksums:
        require_checksums(chunk, path)
    parsed = [
        (first, header),
        *_parse(attrs.evolve(chunk, lines=chunk.lines[1:]), path, session_id),
    ]
    # the header's own group (first messages, or the whole transcript after a rewrite) may hold
    # ids up to header.next_id - 1; lines appended later must continue above them
    group = list(itertools.takewhile(lambda p: p[1].tx == header.tx, parsed[1:]))
    _check_order(group, 1, path)
    group_ids = [p[1].message.id or 0 for p in group if isinstance(p[1], MessageLine)]
    _check_order(parsed[1 + len(group) :], max([header.next_id, *(i + 1 for i in group_ids)]), path)
    record = header.record
    if record.message_count or record.tool_call_count:  # a hand-made file; derived below
        record = attrs.evolve(record, message_count=0, tool_call_count=0)
    transcript = Transcript(record=record, next_id=header.next_id)
    apply_lines(transcript, (p[1] for p in parsed[1:]), quiet_tx=header.tx)
    cached = SessionFile.of(
        transcript, chunk.end, chunk.last_line, newest_tx=parsed[-1][1].tx, checksums=checksums
    )
    return Loaded(cached, parsed, chunk)


def read_tail(path: Path, current: SessionFile, session_id: str) -> Tail:
    """Read and check the lines appended to a cached session file (nothing changes yet)."""
    chunk = read_chunk(path, offset=current.offset, first_line=current.lines + 1)
    if current.checksums:
        require_checksums(chunk, path)
    parsed = _parse(chunk, path, session_id)
    _check_order(parsed, current.next_id, path)
    return Tail(parsed, chunk)


def apply_lines(
    transcript: Transcript, records: Iterable[SessionLine], *, quiet_tx: int | None = None
) -> list[Message]:
    """Apply checked session-file records to ``transcript``; return the messages added.

    Messages of transaction ``quiet_tx`` (a file's header group: its first messages, or all of
    them after a rewrite) do not move ``last_active_at``: the header already accounts for them.
    Every other transaction with a message, ``active`` or ``revise`` line moves the revision by
    one (the header's record holds the revision as of the file's write).
    """
    added: list[Message] = []
    batch: list[Message] = []
    quiet = False
    revised = quiet_tx

    def flush() -> None:
        transcript.add(batch, activity=not quiet)
        added.extend(batch)
        batch.clear()

    for record in records:
        if isinstance(record, REVISING) and record.tx != revised:
            revised = record.tx
            transcript.bump()
        if isinstance(record, MessageLine):
            is_quiet = record.tx == quiet_tx
            if batch and is_quiet != quiet:
                flush()
            quiet = is_quiet
            batch.append(record.message)
            continue
        if batch:
            flush()
        _apply_change(transcript, record)
    if batch:
        flush()
    return added


def _apply_change(transcript: Transcript, record: SessionLine) -> None:
    current = transcript.record
    if isinstance(record, Update):
        transcript.record = apply_update(current, record.values, record.increments)
    elif isinstance(record, End):
        if current.end_reason is None:
            transcript.record = attrs.evolve(current, end_reason=record.reason, ended_at=record.at)
    elif isinstance(record, Reopen):
        transcript.record = attrs.evolve(current, end_reason=None, ended_at=None)
    elif isinstance(record, Active):
        transcript.set_active(record.ids, active=record.active)
    elif isinstance(record, Revise):
        pass  # only the revision moves (apply_lines)
    else:
        assert isinstance(record, Orphan)  # noqa: S101  # headers never reach here
        transcript.record = attrs.evolve(current, parent_session_id=None)


def trailing_group(parsed: list[Parsed], tx: int) -> tuple[int, int | None]:
    """How many lines of transaction ``tx`` end the file, and where the first of them starts."""
    count = 0
    start: int | None = None
    for line, record in reversed(parsed):
        if record.tx != tx:
            break
        count += 1
        start = line.start
    return count, start


# -- the whole cache and the journal records that change it ----------------------------------------


@attrs.define(eq=False)
class State:
    """One process's cache of a directory: every entry and session summary, some transcripts.

    Transcripts are read on demand (:meth:`transcript`, through ``loader``) and the least
    recently used are dropped once more than ``cache_sessions`` are held. The search index is
    built on the first search (:meth:`enable_search`) and kept exact from then on.
    """

    table: EntryTable = attrs.Factory(RoutingTable)
    sessions: SessionMap = attrs.Factory(SessionMap)
    leases: dict[str, tuple[str, datetime]] = attrs.Factory(dict)
    index: SearchIndex = attrs.Factory(SearchIndex)
    scopes: dict[str, JSONObject] = attrs.Factory(dict)
    """Every state scope that holds a value (scope id -> value; an emptied scope is absent)."""
    last_tx: int = 0
    """The newest transaction read."""
    journal_records: int = 0
    """Journal records since the snapshot (drives compaction)."""
    cache_sessions: int | None = None
    """How many transcripts are held at most (``None``: all)."""
    loader: Callable[[str], Transcript] | None = None
    """Reads the transcript of a cached session (the engine's on-demand read)."""
    searching: bool = False
    """Whether the search index is built (then every message is indexed, :mod:`._search`)."""
    _recent: OrderedDict[str, None] = attrs.Factory(OrderedDict)

    def transcript(self, session_id: str) -> Transcript:
        """The whole transcript of ``session_id``, read if needed; ``SessionNotFoundError``."""
        cached = self.sessions.get(session_id)
        if cached is None:
            raise missing_session(session_id)
        if cached.loaded is None:
            assert self.loader is not None  # noqa: S101  # set by the engine
            transcript = self.loader(session_id)
            cached = self.sessions.get(session_id)  # the read may have caught up
            if cached is None:
                raise missing_session(session_id)
            if cached.loaded is None:
                cached.loaded = transcript
        self.hold(session_id)
        return cached.loaded

    def hold(self, session_id: str, *, trim: bool = True) -> None:
        """Mark a loaded transcript most recently used; drop the oldest beyond the bound."""
        self._recent[session_id] = None
        self._recent.move_to_end(session_id)
        if trim:
            self.trim()

    def trim(self) -> None:
        """Drop the least recently used transcripts beyond the bound."""
        bound = self.cache_sessions
        if bound is None:
            return
        self.sessions.trim()
        while len(self._recent) > max(bound, 1):
            oldest, _ = self._recent.popitem(last=False)
            cached = self.sessions.get(oldest)
            if cached is not None:
                cached.unload()

    def close(self) -> None:
        """Close the snapshot the entries and sessions are read from (if any)."""
        table = self.table.base if isinstance(self.table, RoutingTable) else None
        for base in {self.sessions.base, table}:
            if base is not None:
                base.close()

    def forget(self, session_id: str) -> None:
        """The session left the cache (deleted, or replaced by a fresh read)."""
        self._recent.pop(session_id, None)

    @property
    def held(self) -> int:
        """How many transcripts are loaded."""
        return len(self._recent)

    def enable_search(self) -> None:
        """Build the search index over every message (each file is read once, none kept)."""
        if self.searching:
            return
        self.searching = True  # catching up keeps the index exact from here on
        try:
            for session_id in list(self.sessions):
                if session_id in self.sessions:
                    self.index.add_all(self.transcript(session_id))
        except BaseException:
            self.searching = False
            self.index = SearchIndex()
            raise


Kind = Literal["tail", "reload", "drop", "summary"]
"""How a reader catches up with one session file: read its tail, read it whole, forget it, or
take the snapshot's summary of it (reading nothing)."""

Change = Loaded | Tail | Summary | None
"""What catching up does to one cached session: reload it, extend it, install the snapshot's
summary, or drop it (``None``)."""


def touched_sessions(record: JournalRecord) -> list[tuple[str, Kind]]:
    """The session files a journal record changes, and how a reader catches up with each."""
    if isinstance(record, Write):
        return [(record.session, "tail")]
    if isinstance(record, Create):
        return [(record.session.record.id, "reload")]
    if isinstance(record, Rewrite):
        return [(record.session, "reload")]
    touched: list[tuple[str, Kind]] = []
    if isinstance(record, Remove):
        touched.append((record.session, "drop"))
        touched.extend((child, "tail") for child in record.orphans)
    elif isinstance(record, Plan):
        if record.create is not None:
            touched.append((record.create.record.id, "reload"))
        touched.extend((session_id, "tail") for session_id in record.groups())
    return touched


def apply_record(  # noqa: C901, PLR0912  # one branch per record type
    state: State, record: JournalRecord, voided: set[int], plans: dict[int, Plan]
) -> None:
    """Apply one journal record's effect on entries, leases and session versions.

    Session file contents were applied before (:func:`apply_lines`); a ``write`` voided later
    in the journal (``voided``) records no activity. A plan's entries wait for its commit.
    """
    table = state.table
    for session_id, _ in touched_sessions(record):
        cached = state.sessions.get(session_id)
        if cached is not None:
            cached.version = record.tx
    if isinstance(record, Put):
        table.put(record.entry)
    elif isinstance(record, Delete):
        if table.get(record.key) is not None:
            table.delete(record.key)
    elif isinstance(record, Touch):
        if record.key is not None:
            table.touch(record.key, record.at, record.last_prompt_tokens)
        else:
            _touch_session(table, record.session or "", record.at)
    elif isinstance(record, Write):
        if record.tx not in voided:
            if record.touch is not None:
                _touch_session(table, record.session, record.touch)
            set_scopes(state.scopes, record.state)
    elif isinstance(record, StateChange):
        set_scopes(state.scopes, record.scopes)
    elif isinstance(record, Remove):
        state.scopes.pop(session_scope(record.session), None)
        for scope_id in ledger_rows_of(state.scopes, record.session):  # its ledger rows go too
            del state.scopes[scope_id]
    elif isinstance(record, Plan):
        plans[record.tx] = record
    elif isinstance(record, Commit):
        plan = plans.pop(record.tx, None)
        for key in plan.deletes if plan is not None else ():
            if table.get(key) is not None:
                table.delete(key)
        for entry in plan.entries if plan is not None else ():
            table.put(entry)
        if plan is not None:
            set_scopes(state.scopes, plan.state)
    elif isinstance(record, Lease):
        state.leases[record.resource] = (record.holder, record.until)
    elif isinstance(record, Release):
        current = state.leases.get(record.resource)
        if current is not None and current[0] == record.holder:
            del state.leases[record.resource]


def set_scopes(scopes: dict[str, JSONObject], values: Mapping[str, JSONObject]) -> None:
    """Store the new value of every scope a record changed (``{}``: the scope is emptied)."""
    for scope_id, value in values.items():
        if value:
            scopes[scope_id] = value
        else:
            scopes.pop(scope_id, None)


def _touch_session(table: EntryTable, session_id: str, at: datetime) -> None:
    for key in list(table.keys_of(session_id)):
        table.touch(key, at)
