"""The JSONL backend's routing snapshot, ``routing.jsonl``, that the journal is compacted into.

A :class:`SnapshotHeader` (the last transaction it covers and how many lines follow, so a
half-written snapshot is detected), every routing entry in key order, every lease, every
session file's *version* (the transaction of its last write) and line count, and every state
scope's value. A reader compares
the line counts with the files, so a file that lost a line since the compaction is found.

Each session line also carries the session's :class:`Summary` (its record with counters and
revision, next message id, listing preview and file size), so a process opens the directory
from the snapshot and the journal alone and reads a session file only when it needs the
messages. A session line without one (written before summaries existed, or for a format 1
file) makes the reader read that file once.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, BinaryIO, Final, TypeAlias

import attrs

from hermes_sessions.backends.jsonl._lines import parse_line
from hermes_sessions.backends.jsonl._session_records import (
    CHECKSUMS_SINCE,
    FORMAT_VERSION,
    Fields,
    encode,
)
from hermes_sessions.exceptions import CorruptRecordError
from hermes_sessions.models import JSONObject, SessionEntry, SessionRecord
from hermes_sessions.serde import dump_datetime, unstructure

if TYPE_CHECKING:
    from pathlib import Path


__all__ = [
    "EMPTY_SNAPSHOT",
    "INDEX_FORMAT",
    "Snapshot",
    "SnapshotHeader",
    "SnapshotLease",
    "SnapshotSession",
    "SnapshotState",
    "Summary",
    "parse_snapshot_line",
    "read_snapshot",
    "snapshot_lines",
]

INDEX_FORMAT: Final = 1
"""The ``index`` of a snapshot header whose snapshot opens lazily (:mod:`._snapindex`)."""


@attrs.frozen
class SnapshotHeader:
    """The first line of ``routing.jsonl``: what it covers and how many lines follow."""

    last_tx: int
    entries: int
    leases: int
    sessions: int
    format: int = FORMAT_VERSION
    states: int = 0
    """State scope lines (none in a snapshot written before state existed)."""
    index: int = 0
    """``1``: every session line has its summary and keys, so the snapshot opens lazily
    (:mod:`._snapindex`); ``0`` (left out): it is read whole."""

    def to_json(self) -> JSONObject:
        out: JSONObject = {
            "type": "snapshot",
            "format": FORMAT_VERSION,
            "last_tx": self.last_tx,
            "entries": self.entries,
            "leases": self.leases,
            "sessions": self.sessions,
        }
        if self.states:
            out["states"] = self.states
        if self.index:
            out["index"] = self.index
        return out


@attrs.frozen
class SnapshotState:
    """A state line: one scope's value."""

    scope: str
    value: JSONObject


@attrs.frozen
class SnapshotLease:
    """A lease line: who holds the resource, until when."""

    resource: str
    holder: str
    until: datetime


@attrs.frozen
class Summary:
    """What listing and routing need of a session without reading its file.

    ``size`` is the file's length in bytes as of the snapshot (where its last line ends): a
    reader that loads the file later reads that far and checks the lines and record match.
    """

    record: SessionRecord
    next_id: int
    preview: str | None
    size: int

    def to_json(self) -> JSONObject:
        out: JSONObject = {
            "bytes": self.size,
            "next_id": self.next_id,
            "record": unstructure(self.record),
        }
        if self.preview is not None:
            out["preview"] = self.preview
        return out


@attrs.frozen
class SnapshotSession:
    """A session line: the file's version and line count (``None``: a format 1 snapshot)."""

    id: str
    version: int
    lines: int | None = None
    summary: Summary | None = None
    """``None``: the line has no summary (an older snapshot); the file is read on opening."""
    keys: tuple[str, ...] | None = None
    """The keys whose entry points at the session (``None``: an older snapshot)."""


def snapshot_lines(
    last_tx: int,
    entries: list[SessionEntry],
    leases: dict[str, tuple[str, datetime]],
    files: dict[str, tuple[int, int, Summary | None]],
    scopes: dict[str, JSONObject],
) -> bytes:
    """The whole snapshot file; ``files`` maps each session to (version, line count, summary)."""
    stored = {scope_id: value for scope_id, value in scopes.items() if value}
    lazy = all(summary is not None for _, _, summary in files.values())
    header = SnapshotHeader(
        last_tx,
        len(entries),
        len(leases),
        len(files),
        states=len(stored),
        index=INDEX_FORMAT if lazy else 0,
    )
    keys: dict[str, list[str]] = {}
    for entry in entries:  # in key order, so each session's keys are too
        keys.setdefault(entry.session_id, []).append(entry.session_key)
    parts = [encode(header.to_json())]
    parts.extend(encode({"type": "entry", "entry": unstructure(e)}) for e in entries)
    for resource, (holder, until) in sorted(leases.items()):
        lease = {"resource": resource, "holder": holder, "until": dump_datetime(until)}
        parts.append(encode({"type": "lease", **lease}))
    for session_id, (version, lines, summary) in sorted(files.items()):
        line: JSONObject = {"type": "session", "id": session_id, "version": version, "lines": lines}
        if summary is not None:
            line.update(summary.to_json())
        line["keys"] = list(keys.get(session_id, ()))
        parts.append(encode(line))
    for scope_id, value in sorted(stored.items()):
        parts.append(encode({"type": "state", "scope": scope_id, "value": value}))
    return b"".join(parts)


def _texts(fields: Fields, name: str) -> list[str]:
    values = fields.raw(name)
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        fields.fail(f"{name!r} must be a list of strings")
    return values


def parse_snapshot_line(
    data: JSONObject, *, path: Path, line: int
) -> SnapshotHeader | SessionEntry | SnapshotLease | SnapshotSession | SnapshotState:
    """Read one snapshot line: the header, an entry, a lease, a session's version or a scope."""
    fields = Fields(data, path, line)
    kind = fields.raw("type")
    if kind == "snapshot":
        version = fields.format(path)
        return SnapshotHeader(
            fields.integer("last_tx"),
            fields.integer("entries"),
            fields.integer("leases"),
            fields.integer("sessions"),
            version,
            fields.integer("states") if "states" in data else 0,
            fields.integer("index") if "index" in data else 0,
        )
    if kind == "entry":
        return fields.model(fields.mapping("entry"), SessionEntry)
    if kind == "lease":
        return SnapshotLease(fields.text("resource"), fields.text("holder"), fields.time("until"))
    if kind == "session":
        lines = fields.integer("lines") if "lines" in data else None
        summary = None
        if "record" in data:
            preview = data.get("preview")
            if preview is not None and not isinstance(preview, str):
                fields.fail("'preview' must be a string")
            summary = Summary(
                fields.model(fields.mapping("record"), SessionRecord),
                fields.integer("next_id"),
                preview,
                fields.integer("bytes"),
            )
        session_id = fields.session_id("id")
        if summary is not None and summary.record.id != session_id:
            fields.fail(f"the summary names session {summary.record.id!r}, not {session_id!r}")
        keys = tuple(_texts(fields, "keys")) if "keys" in data else None
        return SnapshotSession(session_id, fields.integer("version"), lines, summary, keys)
    if kind == "state":
        return SnapshotState(fields.text("scope"), fields.mapping("value"))
    return fields.fail(f"unknown snapshot line {kind!r}")


@attrs.frozen
class Snapshot:
    """``routing.jsonl`` as read: the state of the index up to ``last_tx``."""

    last_tx: int
    entries: list[SessionEntry]
    leases: dict[str, tuple[str, datetime]]
    versions: dict[str, int]
    lines: dict[str, int] = attrs.Factory(dict)
    """The line count of each session file at ``last_tx`` (none in a format 1 snapshot)."""
    scopes: dict[str, JSONObject] = attrs.Factory(dict)
    """Every state scope's value at ``last_tx``."""
    summaries: dict[str, Summary] = attrs.Factory(dict)
    """The summary of each session that has one (its file need not be read to open)."""
    keys: dict[str, tuple[str, ...]] = attrs.Factory(dict)
    """The keys each session line lists as pointing at it (none in an older snapshot)."""
    index: int = 0
    """The header's ``index``: whether the snapshot may be read lazily."""


EMPTY_SNAPSHOT: Final = Snapshot(0, [], {}, {})

Parsed: TypeAlias = SnapshotHeader | SessionEntry | SnapshotLease | SnapshotSession | SnapshotState

_UNSIGNED: Final = (
    "%s, in a file whose every line carries one: it was added or changed by another program"
)
"""What a directory that was never compacted starts from."""


def read_snapshot(path: Path) -> Snapshot | None:
    """Read a whole snapshot file (``None`` if there is none); refuse one that is incomplete.

    The file is read line by line, each line decoded and dropped at once: opening a large
    directory never holds the file's text and its objects at the same time.
    """
    try:
        file = path.open("rb")
    except FileNotFoundError:
        return None
    with file:
        header, parsed, torn = _read_lines(file, path)
    entries = [p for p in parsed if isinstance(p, SessionEntry)]
    leases = {p.resource: (p.holder, p.until) for p in parsed if isinstance(p, SnapshotLease)}
    sessions = [p for p in parsed if isinstance(p, SnapshotSession)]
    scopes = {p.scope: p.value for p in parsed if isinstance(p, SnapshotState)}
    if torn or (len(entries), len(leases), len(sessions), len(scopes)) != (
        header.entries,
        header.leases,
        header.sessions,
        header.states,
    ):
        raise CorruptRecordError("the snapshot is incomplete; run JSONLBackend.repair()", path=path)
    versions = {p.id: p.version for p in sessions}
    lines = {p.id: p.lines for p in sessions if p.lines is not None}
    summaries = {p.id: p.summary for p in sessions if p.summary is not None}
    keys = {p.id: p.keys for p in sessions if p.keys is not None}
    return Snapshot(
        header.last_tx, entries, leases, versions, lines, scopes, summaries, keys, header.index
    )


def _read_lines(file: BinaryIO, path: Path) -> tuple[SnapshotHeader, list[Parsed], bool]:
    """Every line of the snapshot decoded (checksums checked), and whether the last is torn."""
    header: SnapshotHeader | None = None
    parsed: list[Parsed] = []
    for number, raw in enumerate(file, start=1):
        if not raw.endswith(b"\n"):
            return _started(header, path), parsed, True
        body = raw[:-1]
        if not body.strip():
            if header is None or header.format >= CHECKSUMS_SINCE:
                raise CorruptRecordError(_UNSIGNED % "an empty line", path=path, line=number)
            continue
        data, checked = parse_line(body, path=path, number=number)
        item = parse_snapshot_line(data, path=path, line=number)
        if header is None:
            if not isinstance(item, SnapshotHeader):
                raise CorruptRecordError("the snapshot starts with its header", path=path, line=1)
            header = item
        if header.format >= CHECKSUMS_SINCE and not checked:
            raise CorruptRecordError(_UNSIGNED % "a line with no checksum", path=path, line=number)
        parsed.append(item)
    return _started(header, path), parsed, False


def _started(header: SnapshotHeader | None, path: Path) -> SnapshotHeader:
    if header is None:
        raise CorruptRecordError("the snapshot starts with its header", path=path, line=1)
    return header
