"""``JSONLBackend.repair``: make a damaged data directory usable again, keeping a backup.

Under the directory lock, in two passes:

1. **Lines.** Every file is read line by line. Unreadable lines (not JSON, not a known record,
   a message id that goes backwards) and torn last lines are dropped; every readable line is
   kept. A session file whose header is unreadable is moved to the backup whole. A file is
   copied to ``backups/repair-<time>/`` (mode ``0600``) before it is changed.
2. **Index.** The directory is opened the normal way, which completes an unfinished rotation.
   If that still fails (a lost journal or snapshot, a session file that disappeared), the
   routing index is rebuilt from what is readable: the snapshot's entries, then the journal's.
   Either way, session files the index does not list are adopted, entries pointing at missing
   sessions are dropped, keys left without any entry after a lost index get one pointing at
   their newest session, and a fresh snapshot and journal are written.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final

import attrs

from hermes_sessions.backends.jsonl._cache import (
    State,
    apply_record,
    load_session,
    trailing_group,
)
from hermes_sessions.backends.jsonl._engine import JOURNAL, SNAPSHOT, DirectoryEngine
from hermes_sessions.backends.jsonl._journal import (
    Commit,
    JournalHeader,
    JournalRecord,
    Plan,
    Void,
    Write,
    parse_journal,
)
from hermes_sessions.backends.jsonl._ledger import is_ledger_scope
from hermes_sessions.backends.jsonl._lines import make_private_dir, parse_line, truncate
from hermes_sessions.backends.jsonl._session_records import (
    CHECKSUMS_SINCE,
    Header,
    MessageLine,
    SessionLine,
    encode,
    parse_session_line,
)
from hermes_sessions.backends.jsonl._snapshot import (
    SnapshotHeader,
    SnapshotLease,
    SnapshotSession,
    SnapshotState,
    Summary,
    parse_snapshot_line,
    snapshot_lines,
)
from hermes_sessions.backends.memtables import EntryTable
from hermes_sessions.backends.rules import session_scope
from hermes_sessions.exceptions import CorruptRecordError
from hermes_sessions.files import create_file, replace_file
from hermes_sessions.ids import validate_session_id
from hermes_sessions.models import SessionEntry, SessionRecord

if TYPE_CHECKING:
    from collections.abc import Callable

    from hermes_sessions.models import JSONObject

__all__ = ["BACKUPS", "DroppedLine", "LineChecker", "RepairReport", "repair"]

BACKUPS: Final = "backups"
SESSION_SCOPE: Final = session_scope("x").removesuffix("x")
"""How every session scope's id starts."""


@attrs.frozen(kw_only=True)
class DroppedLine:
    """A line ``repair`` removed, and why (the original is in the backup)."""

    path: Path
    line: int
    reason: str


@attrs.frozen(kw_only=True)
class RepairReport:
    """What ``JSONLBackend.repair`` did.

    .. versionadded:: 0.1.0
    """

    backup: Path | None = None
    """The directory holding a copy of every file changed (``None``: nothing was changed)."""
    dropped_lines: tuple[DroppedLine, ...] = ()
    moved_files: tuple[Path, ...] = ()
    """Session files without a readable header, moved into the backup whole."""
    adopted_sessions: tuple[str, ...] = ()
    """Session files the index did not list, listed now."""
    dropped_entries: tuple[str, ...] = ()
    """Keys whose entry pointed at a session that no longer exists."""
    rebuilt_index: bool = False
    """Whether the routing index had to be rebuilt (from the snapshot, journal and sessions)."""

    @property
    def changed(self) -> bool:
        """Whether anything was repaired, adopted or rebuilt."""
        return bool(
            self.backup
            or self.dropped_lines
            or self.moved_files
            or self.adopted_sessions
            or self.dropped_entries
            or self.rebuilt_index
        )


@attrs.define
class _Repair:
    engine: DirectoryEngine
    backup_dir: Path
    dropped: list[DroppedLine] = attrs.Factory(list)
    moved: list[Path] = attrs.Factory(list)
    adopted: list[str] = attrs.Factory(list)
    dropped_entries: list[str] = attrs.Factory(list)
    rebuilt: bool = False
    rebuild_needed: bool = False
    """Session files but no index at all: every entry comes from the session records."""
    created_journal: bool = False
    backed_up: bool = False
    newest_tx: int = 0
    """The newest transaction found in a session file."""
    line_counts: dict[str, int] = attrs.Factory(dict)
    summaries: dict[str, Summary | None] = attrs.Factory(dict)
    """How many lines each session file holds (the fresh snapshot records them)."""
    dry_run: bool = False
    """Only look (``check()``): drops are noted, nothing is copied, moved or rewritten."""

    # -- backups -----------------------------------------------------------------------------------

    def backup(self, path: Path, *, move: bool = False) -> None:
        """Copy (or move) ``path`` into the backup directory, keeping its relative place."""
        if self.dry_run:
            return
        target = self.backup_dir / path.relative_to(self.engine.directory)
        make_private_dir(self.engine.directory / BACKUPS)
        make_private_dir(self.backup_dir)
        make_private_dir(target.parent)
        if move:
            path.replace(target)
        else:
            create_file(target, path.read_bytes(), exclusive=True)
        self.backed_up = True

    def rewrite(self, path: Path, lines: list[bytes]) -> None:
        if self.dry_run:
            return
        self.backup(path)
        replace_file(path, b"".join(lines), sync=True)

    # -- pass one: lines ---------------------------------------------------------------------------

    def lines(
        self, path: Path, read: Callable[[JSONObject, int], object]
    ) -> tuple[list[tuple[int, bytes, object]], bool]:
        """The readable lines of ``path`` and whether any line was dropped.

        Each kept line is ``(number, bytes, what read() made of it)``. A line whose checksum
        fails is unreadable; so is a line without one (or a blank line) in a file whose header
        says it is checksummed (format 2).
        """
        pieces = path.read_bytes().split(b"\n")
        found: list[tuple[int, bytes, object, bool]] = []
        drops: list[tuple[int, str]] = []
        blank: list[int] = []
        for number, piece in enumerate(pieces[:-1], 1):
            if not piece.strip():
                blank.append(number)
                continue
            try:
                data, checked = parse_line(piece, path=path, number=number)
                found.append((number, piece + b"\n", read(data, number), checked))
            except ValueError as error:  # CorruptRecordError is a ValueError too
                drops.append((number, _reason(error)))
        first = found[0][2] if found else None
        version = getattr(first, "format", None)
        checksums = version >= CHECKSUMS_SINCE if isinstance(version, int) else False
        if checksums:
            drops.extend(
                (number, "a line without a checksum") for number, *_, ok in found if not ok
            )
            drops.extend((number, "an empty line") for number in blank)
        if pieces[-1]:
            drops.append((len(pieces), "torn last line (a write cut short)"))
        dropped = {number for number, _ in drops}
        for number, reason in sorted(drops):
            self.drop(path, number, reason)
        kept = [(n, raw, record) for n, raw, record, _ in found if n not in dropped]
        return kept, bool(drops)

    def drop(self, path: Path, line: int, reason: str) -> None:
        self.dropped.append(DroppedLine(path=path, line=line, reason=reason))

    def fix_session(self, path: Path, session_id: str) -> None:
        def read(data: JSONObject, number: int) -> SessionLine:
            return parse_session_line(data, path=path, line=number, session_id=session_id)

        kept, changed = self.lines(path, read)
        header = kept[0][2] if kept else None
        if not isinstance(header, Header):
            self.backup(path, move=True)
            self.moved.append(path)
            return
        good = [kept[0][1]]
        next_id = 1
        in_group = True
        for number, raw, record in kept[1:]:
            assert isinstance(record, SessionLine)  # noqa: S101  # made by read()
            if in_group and record.tx != header.tx:
                in_group = False
                next_id = max(next_id, header.next_id)
            if isinstance(record, Header):
                self.drop(path, number, "a second session header")
                changed = True
                continue
            if isinstance(record, MessageLine):
                message_id = record.message.id or 0
                if message_id < next_id:
                    self.drop(
                        path, number, f"message id {message_id} does not follow {next_id - 1}"
                    )
                    changed = True
                    continue
                next_id = message_id + 1
            good.append(raw)
        if changed:
            self.rewrite(path, good)

    def fix_journal(self, path: Path) -> None:
        def read(data: JSONObject, number: int) -> JournalHeader | JournalRecord:
            return parse_journal(data, path=path, line=number)

        kept, changed = self.lines(path, read)
        header = kept[0][2] if kept else None
        if isinstance(header, JournalHeader):
            good, last = [kept[0][1]], header.base_tx
            kept = kept[1:]
        else:  # the header is lost: continue from the start (the snapshot wins where it covers)
            good, last = [encode(JournalHeader(0).to_json())], 0
            changed = True
        for number, raw, record in kept:
            assert isinstance(record, JournalHeader | JournalRecord)  # noqa: S101
            if isinstance(record, JournalHeader):
                follows = False
            elif isinstance(record, Commit | Void):
                follows = record.tx == last
            else:
                follows = record.tx > last
            if not follows:
                self.drop(path, number, "a record out of order")
                changed = True
                continue
            assert not isinstance(record, JournalHeader)  # noqa: S101
            last = record.tx
            good.append(raw)
        if changed:
            self.rewrite(path, good)

    def fix_snapshot(self, path: Path) -> None:
        def read(data: JSONObject, number: int) -> object:
            return parse_snapshot_line(data, path=path, line=number)

        kept, changed = self.lines(path, read)
        header = kept[0][2] if kept else None
        if not isinstance(header, SnapshotHeader):
            self.backup(path, move=True)
            self.moved.append(path)
            self.rebuilt = True
            return
        body = [(raw, record) for _, raw, record in kept[1:]]
        counts = (
            sum(isinstance(r, SessionEntry) for _, r in body),
            sum(isinstance(r, SnapshotLease) for _, r in body),
            sum(isinstance(r, SnapshotSession) for _, r in body),
            sum(isinstance(r, SnapshotState) for _, r in body),
        )
        if changed or counts != (header.entries, header.leases, header.sessions, header.states):
            fixed = attrs.evolve(
                header, entries=counts[0], leases=counts[1], sessions=counts[2], states=counts[3]
            )
            self.rewrite(path, [encode(fixed.to_json())] + [raw for raw, _ in body])

    def fix_lines(self) -> None:
        engine = self.engine
        for path in sorted(engine.sessions_dir.glob("*.jsonl")):
            try:
                session_id = validate_session_id(path.stem)
            except ValueError:
                continue
            self.fix_session(path, session_id)
        if engine.journal_path.exists():
            self.fix_journal(engine.journal_path)
        if engine.snapshot_path.exists():
            self.fix_snapshot(engine.snapshot_path)

    # -- pass two: the index -----------------------------------------------------------------------

    def on_disk(self, known: State | None) -> dict[str, SessionRecord]:
        """The record of every readable session file (those ``known`` holds are not re-read).

        Also notes the newest transaction any file holds (the fresh snapshot starts after it).
        """
        found = {}
        for path in sorted(self.engine.sessions_dir.glob("*.jsonl")):
            with contextlib.suppress(ValueError):
                session_id = validate_session_id(path.stem)
                cached = None if known is None else known.sessions.get(session_id)
                if cached is None:
                    cached = load_session(path, session_id).session
                found[session_id] = cached.record
                self.newest_tx = max(self.newest_tx, cached.newest_tx)
                self.line_counts[session_id] = cached.lines
                self.summaries[session_id] = cached.summary() if cached.checksums else None
        return found

    def open_normally(self) -> State | None:
        """Open the directory the normal way (completing unfinished work); ``None`` if it fails."""
        engine = self.engine
        if not engine.journal_path.exists():
            if engine.snapshot_path.exists():
                return None  # the journal is lost: salvage from the snapshot
            self.rebuild_needed = any(engine.sessions_dir.glob("*.jsonl"))
            replace_file(engine.journal_path, encode(JournalHeader(0).to_json()), sync=True)
            self.created_journal = True
        try:
            engine.initialize()
            engine.sync()
        except CorruptRecordError:
            return None
        return engine.state

    def salvaged(self, disk: dict[str, SessionRecord]) -> State:
        """The index from whatever is readable, when the normal open failed."""
        self.rebuilt = True
        engine = self.engine
        state = State()
        snapshot = None
        with contextlib.suppress(CorruptRecordError):
            snapshot = engine.read_snapshot()
        base = 0
        if snapshot is not None:
            for entry in snapshot.entries:
                state.table.put(entry)
            state.leases = dict(snapshot.leases)
            state.scopes = dict(snapshot.scopes)
            base = snapshot.last_tx
        else:  # the entries before the journal are lost: derive them, then replay the journal
            self.rebuild_entries(state, disk)
        records: list[JournalRecord] = []
        if engine.journal_path.exists():
            for number, raw in enumerate(engine.journal_path.read_bytes().split(b"\n"), 1):
                if not raw.strip():
                    continue
                data, _ = parse_line(raw, path=engine.journal_path, number=number)
                record = parse_journal(data, path=engine.journal_path, line=number)
                if not isinstance(record, JournalHeader) and record.tx > base:
                    records.append(record)
        voided = {record.tx for record in records if isinstance(record, Void)}
        if records and self.cut_short(records[-1], disk):
            voided.add(records[-1].tx)
        plans: dict[int, Plan] = {}
        for record in records:
            apply_record(state, record, voided, plans)
        state.last_tx = max([base, *(record.tx for record in records)])
        return state

    def cut_short(self, last: JournalRecord, disk: dict[str, SessionRecord]) -> bool:
        """Whether the last record is a ``write`` whose lines did not all arrive (they are cut)."""
        if not isinstance(last, Write) or last.session not in disk:
            return False
        path = self.engine.session_path(last.session)
        count, start = trailing_group(load_session(path, last.session).parsed, last.tx)
        if count >= last.lines:
            return False
        if start is not None:
            self.backup(path)
            truncate(path, start, sync=True)
            cut = load_session(path, last.session).session
            disk[last.session] = cut.record
            self.line_counts[last.session] = cut.lines
            self.summaries[last.session] = cut.summary() if cut.checksums else None
        return True

    def rebuild_entries(self, state: State, disk: dict[str, SessionRecord]) -> None:
        """Give every key named by a session record an entry pointing at its newest session.

        Newest means: an open session before an ended one, then the latest start.
        """
        newest: dict[str, tuple[bool, datetime, str]] = {}
        for session_id, record in disk.items():
            if record.session_key is None:
                continue
            rank = (not record.is_ended, record.started_at, session_id)
            if record.session_key not in newest or rank > newest[record.session_key]:
                newest[record.session_key] = rank
        for key, (_, _, session_id) in sorted(newest.items()):
            record = disk[session_id]
            state.table.put(
                SessionEntry(
                    session_key=key,
                    session_id=session_id,
                    created_at=record.started_at,
                    updated_at=record.last_active,
                    platform=record.source,
                    revision=1,
                )
            )

    def finish(self, state: State, disk: dict[str, SessionRecord]) -> None:
        """Reconcile the index with the files and write a fresh snapshot and journal."""
        listed = set(state.sessions)
        self.adopted.extend(sorted(set(disk) - listed))
        table = EntryTable()
        for entry in state.table.listing():
            if entry.session_id in disk:
                table.put(entry)
            else:
                self.dropped_entries.append(entry.session_key)
        state.table = table
        if self.rebuild_needed:
            self.rebuild_entries(state, disk)
        else:  # keys of adopted sessions that lost their entry with the index get one back
            keys = {disk[s].session_key for s in self.adopted} - {None} - set(table.entries)
            self.rebuild_entries(state, {s: r for s, r in disk.items() if r.session_key in keys})
        engine = self.engine
        self.rebuilt = self.rebuilt or self.rebuild_needed
        if self.backed_up or self.adopted or self.dropped_entries or self.rebuilt:
            for name in (JOURNAL, SNAPSHOT):
                path = engine.directory / name
                fresh = name == JOURNAL and self.created_journal
                if path.exists() and not fresh and not self.backed_up_path(path):
                    self.backup(path)
        # Always a fresh snapshot and journal with new versions: every process using the
        # directory notices the new journal and re-reads every session file.
        if self.newest_tx > state.last_tx:  # the journal lost records the files still show
            self.rebuilt = True
        last_tx = max(state.last_tx, self.newest_tx) + 1
        files = {
            session_id: (last_tx, self.line_counts[session_id], self.summaries.get(session_id))
            for session_id in disk
        }
        kept = {session_scope(session_id) for session_id in disk}
        scopes = {  # a session's own scope and ledger rows go with its file
            scope_id: value
            for scope_id, value in state.scopes.items()
            if scope_id in kept
            or (
                not scope_id.startswith(SESSION_SCOPE)
                and not (is_ledger_scope(scope_id) and value.get("session_id") not in disk)
            )
        }
        data = snapshot_lines(last_tx, state.table.listing(), state.leases, files, scopes)
        replace_file(engine.snapshot_path, data, sync=True)
        replace_file(engine.journal_path, encode(JournalHeader(last_tx).to_json()), sync=True)

    def backed_up_path(self, path: Path) -> bool:
        return (self.backup_dir / path.relative_to(self.engine.directory)).exists()

    def report(self) -> RepairReport:
        return RepairReport(
            backup=self.backup_dir if self.backed_up else None,
            dropped_lines=tuple(self.dropped),
            moved_files=tuple(self.moved),
            adopted_sessions=tuple(self.adopted),
            dropped_entries=tuple(self.dropped_entries),
            rebuilt_index=self.rebuilt,
        )


LineChecker = _Repair
"""Repair's first pass run with ``dry_run=True`` is ``check()``'s line check."""


def _reason(error: ValueError) -> str:
    return error.reason if isinstance(error, CorruptRecordError) else str(error)


def repair(directory: Path, *, lock_timeout: float) -> RepairReport:
    """Repair ``directory`` (see the module docstring): ``JSONLBackend.repair``."""
    if not directory.is_dir():
        raise FileNotFoundError(f"no data directory at {directory}")
    engine = DirectoryEngine(
        directory,
        sync_writes=True,
        lock_timeout=lock_timeout,
        compact_threshold=1,
        verify_files=False,
        use_summaries=False,
    )
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    fixer = _Repair(engine, directory / BACKUPS / f"repair-{stamp}")
    try:
        with engine.exclusive():
            fixer.fix_lines()
            state = fixer.open_normally()
            disk = fixer.on_disk(state)
            if state is None:
                state = fixer.salvaged(disk)
            fixer.finish(state, disk)
    finally:
        engine.close()
    return fixer.report()
