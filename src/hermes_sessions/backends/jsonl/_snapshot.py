"""The JSONL backend's routing snapshot, ``routing.jsonl``, that the journal is compacted into.

A :class:`SnapshotHeader` (the last transaction it covers and how many lines follow, so a
half-written snapshot is detected), every routing entry in key order, every lease, every
session file's *version* (the transaction of its last write) and line count, and every state
scope's value. A reader compares
the line counts with the files, so a file that lost a line since the compaction is found.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Final

import attrs

from hermes_sessions.backends.jsonl._lines import read_chunk, require_checksums
from hermes_sessions.backends.jsonl._session_records import (
    CHECKSUMS_SINCE,
    FORMAT_VERSION,
    Fields,
    encode,
)
from hermes_sessions.exceptions import CorruptRecordError
from hermes_sessions.models import JSONObject, SessionEntry
from hermes_sessions.serde import dump_datetime, unstructure

if TYPE_CHECKING:
    from pathlib import Path


__all__ = [
    "EMPTY_SNAPSHOT",
    "Snapshot",
    "SnapshotHeader",
    "SnapshotLease",
    "SnapshotSession",
    "SnapshotState",
    "parse_snapshot_line",
    "read_snapshot",
    "snapshot_lines",
]


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
class SnapshotSession:
    """A session line: the file's version and line count (``None``: a format 1 snapshot)."""

    id: str
    version: int
    lines: int | None = None


def snapshot_lines(
    last_tx: int,
    entries: list[SessionEntry],
    leases: dict[str, tuple[str, datetime]],
    files: dict[str, tuple[int, int]],
    scopes: dict[str, JSONObject],
) -> bytes:
    """The whole snapshot file; ``files`` maps each session to its (version, line count)."""
    stored = {scope_id: value for scope_id, value in scopes.items() if value}
    header = SnapshotHeader(last_tx, len(entries), len(leases), len(files), states=len(stored))
    parts = [encode(header.to_json())]
    parts.extend(encode({"type": "entry", "entry": unstructure(e)}) for e in entries)
    for resource, (holder, until) in sorted(leases.items()):
        lease = {"resource": resource, "holder": holder, "until": dump_datetime(until)}
        parts.append(encode({"type": "lease", **lease}))
    for session_id, (version, lines) in sorted(files.items()):
        line = {"type": "session", "id": session_id, "version": version, "lines": lines}
        parts.append(encode(line))
    for scope_id, value in sorted(stored.items()):
        parts.append(encode({"type": "state", "scope": scope_id, "value": value}))
    return b"".join(parts)


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
        )
    if kind == "entry":
        return fields.model(fields.mapping("entry"), SessionEntry)
    if kind == "lease":
        return SnapshotLease(fields.text("resource"), fields.text("holder"), fields.time("until"))
    if kind == "session":
        lines = fields.integer("lines") if "lines" in data else None
        return SnapshotSession(fields.session_id("id"), fields.integer("version"), lines)
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


EMPTY_SNAPSHOT: Final = Snapshot(0, [], {}, {})
"""What a directory that was never compacted starts from."""


def read_snapshot(path: Path) -> Snapshot | None:
    """Read a whole snapshot file (``None`` if there is none); refuse one that is incomplete."""
    try:
        chunk = read_chunk(path, offset=0, first_line=1)
    except FileNotFoundError:
        return None
    parsed = [parse_snapshot_line(line.data, path=path, line=line.number) for line in chunk.lines]
    header = parsed[0] if parsed else None
    if not isinstance(header, SnapshotHeader):
        raise CorruptRecordError("the snapshot starts with its header", path=path, line=1)
    if header.format >= CHECKSUMS_SINCE:
        require_checksums(chunk, path)
    entries = [p for p in parsed if isinstance(p, SessionEntry)]
    leases = {p.resource: (p.holder, p.until) for p in parsed if isinstance(p, SnapshotLease)}
    sessions = [p for p in parsed if isinstance(p, SnapshotSession)]
    scopes = {p.scope: p.value for p in parsed if isinstance(p, SnapshotState)}
    if chunk.torn or (len(entries), len(leases), len(sessions), len(scopes)) != (
        header.entries,
        header.leases,
        header.sessions,
        header.states,
    ):
        raise CorruptRecordError("the snapshot is incomplete; run JSONLBackend.repair()", path=path)
    versions = {p.id: p.version for p in sessions}
    lines = {p.id: p.lines for p in sessions if p.lines is not None}
    return Snapshot(header.last_tx, entries, leases, versions, lines, scopes)
