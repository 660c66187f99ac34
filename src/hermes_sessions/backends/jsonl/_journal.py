"""The JSONL backend's journal and routing snapshot records.

``journal.jsonl`` starts with a :class:`JournalHeader` and holds one record per write, in order:
routing entry writes, activity, leases, and the announcement of every change to a session file
(written *before* the change, so a crash mid-change is always noticed by the next lock holder).
``routing.jsonl`` is the snapshot the journal is compacted into: a :class:`SnapshotHeader`, the
entries, the leases and the version (last transaction) of every session file.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Final, TypeAlias

import attrs

from hermes_sessions.backends.jsonl._lines import read_chunk
from hermes_sessions.backends.jsonl._session_records import (
    FORMAT_VERSION,
    End,
    Fields,
    Header,
    MessageLine,
    Orphan,
    Reopen,
    SessionLine,
    encode,
    message_json,
    read_message,
    record_json,
)
from hermes_sessions.exceptions import CorruptRecordError
from hermes_sessions.models import Message, SessionEntry, SessionRecord
from hermes_sessions.serde import dump_datetime, unstructure

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from hermes_sessions.backends.jsonl._lines import Line
    from hermes_sessions.models import JSONObject

__all__ = [
    "EMPTY_SNAPSHOT",
    "Commit",
    "Create",
    "Delete",
    "JournalHeader",
    "JournalRecord",
    "Lease",
    "NewSession",
    "Plan",
    "Put",
    "Release",
    "Remove",
    "Rewrite",
    "Snapshot",
    "SnapshotHeader",
    "Touch",
    "Void",
    "Write",
    "parse_journal",
    "parse_records",
    "parse_snapshot_line",
    "read_snapshot",
    "snapshot_lines",
]

_PAIR: Final = 2
_LEASE: Final = 3


# -- the journal -----------------------------------------------------------------------------------


@attrs.frozen
class JournalHeader:
    """The first line of the journal: the snapshot transaction it continues from."""

    base_tx: int

    def to_json(self) -> JSONObject:
        return {"op": "journal", "format": FORMAT_VERSION, "base_tx": self.base_tx}


@attrs.frozen
class NewSession:
    """A session file to create: its record, next message id and first messages."""

    record: SessionRecord
    next_id: int
    messages: tuple[Message, ...] = ()

    def to_json(self) -> JSONObject:
        return {
            "record": record_json(self.record),
            "next_id": self.next_id,
            "messages": [message_json(m) for m in self.messages],
        }

    def lines(self, tx: int) -> list[SessionLine]:
        """The file's lines: the header, then the messages."""
        return [Header(tx, self.record, self.next_id), *(MessageLine(tx, m) for m in self.messages)]

    @classmethod
    def read(cls, fields: Fields, data: JSONObject) -> NewSession:
        inner = Fields(data, fields.path, fields.line)
        record = inner.model(inner.mapping("record"), SessionRecord)
        messages = tuple(read_message(inner, m, record.id) for m in inner.array("messages"))
        return cls(record, inner.integer("next_id"), messages)


@attrs.frozen
class Put:
    """A routing entry stored (with its new revision)."""

    tx: int
    entry: SessionEntry

    def to_json(self) -> JSONObject:
        return {"op": "put", "tx": self.tx, "entry": unstructure(self.entry)}


@attrs.frozen
class Delete:
    """A routing entry removed."""

    tx: int
    key: str

    def to_json(self) -> JSONObject:
        return {"op": "delete", "tx": self.tx, "key": self.key}


@attrs.frozen
class Touch:
    """Activity on one key, or on every key pointing at a session."""

    tx: int
    at: datetime
    key: str | None = None
    session: str | None = None
    last_prompt_tokens: int | None = None

    def to_json(self) -> JSONObject:
        out: JSONObject = {"op": "touch", "tx": self.tx, "at": dump_datetime(self.at)}
        if self.key is not None:
            out["key"] = self.key
        if self.session is not None:
            out["session"] = self.session
        if self.last_prompt_tokens is not None:
            out["last_prompt_tokens"] = self.last_prompt_tokens
        return out


@attrs.frozen
class Write:
    """``lines`` lines are being appended to a session file (announced before they are written).

    With ``touch``, every key pointing at the session records activity at that time — but only
    if the lines all arrived (a write cut short by a crash is voided, touch included).
    """

    tx: int
    session: str
    lines: int
    touch: datetime | None = None

    def to_json(self) -> JSONObject:
        out: JSONObject = {"op": "write", "tx": self.tx, "session": self.session}
        out["lines"] = self.lines
        if self.touch is not None:
            out["touch"] = dump_datetime(self.touch)
        return out


@attrs.frozen
class Create:
    """A session file is being created (completed from this record after a crash)."""

    tx: int
    session: NewSession

    def to_json(self) -> JSONObject:
        return {"op": "create", "tx": self.tx, **self.session.to_json()}


@attrs.frozen
class Rewrite:
    """A session file is being replaced as a whole (temp file + rename)."""

    tx: int
    session: str

    def to_json(self) -> JSONObject:
        return {"op": "rewrite", "tx": self.tx, "session": self.session}


@attrs.frozen
class Remove:
    """A session is being deleted and its children orphaned (completed, then committed)."""

    tx: int
    session: str
    orphans: tuple[str, ...] = ()

    def to_json(self) -> JSONObject:
        return {
            "op": "remove",
            "tx": self.tx,
            "session": self.session,
            "orphans": list(self.orphans),
        }

    def groups(self) -> dict[str, list[SessionLine]]:
        """The lines each child file receives."""
        return {child: [Orphan(self.tx)] for child in self.orphans}


@attrs.frozen
class Plan:
    """A rotation, resolved: everything it writes, so it can be completed after a crash.

    Its entries become visible with the :class:`Commit` that follows it.
    """

    tx: int
    at: datetime
    create: NewSession | None = None
    append_to: str | None = None
    """The existing session that receives ``messages`` (``create`` named an existing id)."""
    messages: tuple[Message, ...] = ()
    reopen: tuple[str, ...] = ()
    end: tuple[tuple[str, str], ...] = ()
    entries: tuple[SessionEntry, ...] = ()

    def to_json(self) -> JSONObject:
        out: JSONObject = {"op": "plan", "tx": self.tx, "at": dump_datetime(self.at)}
        if self.create is not None:
            out["create"] = self.create.to_json()
        if self.append_to is not None:
            out["append"] = {
                "session": self.append_to,
                "messages": [message_json(m) for m in self.messages],
            }
        out["reopen"] = list(self.reopen)
        out["end"] = [list(pair) for pair in self.end]
        out["entries"] = [unstructure(e) for e in self.entries]
        return out

    def groups(self) -> dict[str, list[SessionLine]]:
        """The lines each existing session file receives, in the order they are written."""
        groups: dict[str, list[SessionLine]] = {}
        if self.append_to is not None:
            groups[self.append_to] = [MessageLine(self.tx, m) for m in self.messages]
        for session_id in self.reopen:
            groups.setdefault(session_id, []).append(Reopen(self.tx))
        for session_id, reason in self.end:
            groups.setdefault(session_id, []).append(End(self.tx, reason, self.at))
        return groups


@attrs.frozen
class Commit:
    """The plan or removal with this ``tx`` is complete."""

    tx: int

    def to_json(self) -> JSONObject:
        return {"op": "commit", "tx": self.tx}


@attrs.frozen
class Void:
    """The write with this ``tx`` was cut short and its partial lines removed."""

    tx: int

    def to_json(self) -> JSONObject:
        return {"op": "void", "tx": self.tx}


@attrs.frozen
class Lease:
    """A lease taken or renewed."""

    tx: int
    resource: str
    holder: str
    until: datetime

    def to_json(self) -> JSONObject:
        return {
            "op": "lease",
            "tx": self.tx,
            "resource": self.resource,
            "holder": self.holder,
            "until": dump_datetime(self.until),
        }


@attrs.frozen
class Release:
    """A lease released by its holder."""

    tx: int
    resource: str
    holder: str

    def to_json(self) -> JSONObject:
        return {"op": "release", "tx": self.tx, "resource": self.resource, "holder": self.holder}


JournalRecord: TypeAlias = (
    Put
    | Delete
    | Touch
    | Write
    | Create
    | Rewrite
    | Remove
    | Plan
    | Commit
    | Void
    | Lease
    | Release
)


def _plan(fields: Fields, tx: int) -> Plan:
    data = fields.data
    create = NewSession.read(fields, fields.mapping("create")) if "create" in data else None
    append_to = None
    messages: tuple[Message, ...] = ()
    if "append" in data:
        inner = Fields(fields.mapping("append"), fields.path, fields.line)
        append_to = inner.session_id("session")
        messages = tuple(read_message(inner, m, append_to) for m in inner.array("messages"))
    end = []
    for pair in fields.array("end"):
        if not (isinstance(pair, list) and len(pair) == _PAIR and isinstance(pair[1], str)):
            fields.fail("'end' must list [session_id, reason] pairs")
        end.append((fields.checked_id(pair[0], "end"), pair[1]))
    entries = tuple(fields.model(e, SessionEntry) for e in fields.array("entries"))
    return Plan(
        tx,
        fields.time("at"),
        create,
        append_to,
        messages,
        fields.session_ids("reopen"),
        tuple(end),
        entries,
    )


def _touch(fields: Fields, tx: int) -> Touch:
    data = fields.data
    key = data.get("key")
    session = data.get("session")
    if (key is None) == (session is None):
        fields.fail("a touch names either a key or a session")
    tokens = data.get("last_prompt_tokens")
    return Touch(
        tx,
        fields.time("at"),
        key=None if key is None else fields.text("key"),
        session=None if session is None else fields.session_id("session"),
        last_prompt_tokens=None if tokens is None else fields.integer("last_prompt_tokens"),
    )


_JOURNAL_RECORDS: Final[dict[str, Callable[[Fields, int], JournalRecord]]] = {
    "put": lambda f, tx: Put(tx, f.model(f.mapping("entry"), SessionEntry)),
    "delete": lambda f, tx: Delete(tx, f.text("key")),
    "touch": _touch,
    "write": lambda f, tx: Write(
        tx, f.session_id("session"), f.integer("lines"), f.optional_time("touch")
    ),
    "create": lambda f, tx: Create(tx, NewSession.read(f, f.data)),
    "rewrite": lambda f, tx: Rewrite(tx, f.session_id("session")),
    "remove": lambda f, tx: Remove(tx, f.session_id("session"), f.session_ids("orphans")),
    "plan": _plan,
    "commit": lambda _f, tx: Commit(tx),
    "void": lambda _f, tx: Void(tx),
    "lease": lambda f, tx: Lease(tx, f.text("resource"), f.text("holder"), f.time("until")),
    "release": lambda f, tx: Release(tx, f.text("resource"), f.text("holder")),
}


def parse_journal(data: JSONObject, *, path: Path, line: int) -> JournalHeader | JournalRecord:
    """Read one journal line; raise ``CorruptRecordError`` if it is malformed."""
    fields = Fields(data, path, line)
    op = fields.raw("op")
    if op == "journal":
        fields.format(path)
        return JournalHeader(fields.integer("base_tx"))
    reader = _JOURNAL_RECORDS.get(op) if isinstance(op, str) else None
    if reader is None:
        fields.fail(f"unknown journal record {op!r}")
    return reader(fields, fields.tx())


# -- the snapshot ----------------------------------------------------------------------------------


@attrs.frozen
class SnapshotHeader:
    """The first line of ``routing.jsonl``: what it covers and how many lines follow."""

    last_tx: int
    entries: int
    leases: int
    sessions: int

    def to_json(self) -> JSONObject:
        return {
            "type": "snapshot",
            "format": FORMAT_VERSION,
            "last_tx": self.last_tx,
            "entries": self.entries,
            "leases": self.leases,
            "sessions": self.sessions,
        }


def snapshot_lines(
    last_tx: int,
    entries: list[SessionEntry],
    leases: dict[str, tuple[str, datetime]],
    versions: dict[str, int],
) -> bytes:
    """The whole snapshot file."""
    header = SnapshotHeader(last_tx, len(entries), len(leases), len(versions))
    parts = [encode(header.to_json())]
    parts.extend(encode({"type": "entry", "entry": unstructure(e)}) for e in entries)
    for resource, (holder, until) in sorted(leases.items()):
        lease = {"resource": resource, "holder": holder, "until": dump_datetime(until)}
        parts.append(encode({"type": "lease", **lease}))
    for session_id, version in sorted(versions.items()):
        parts.append(encode({"type": "session", "id": session_id, "version": version}))
    return b"".join(parts)


def parse_snapshot_line(
    data: JSONObject, *, path: Path, line: int
) -> SnapshotHeader | SessionEntry | tuple[str, str, datetime] | tuple[str, int]:
    """Read one snapshot line: the header, an entry, a lease or a session version."""
    fields = Fields(data, path, line)
    kind = fields.raw("type")
    if kind == "snapshot":
        fields.format(path)
        return SnapshotHeader(
            fields.integer("last_tx"),
            fields.integer("entries"),
            fields.integer("leases"),
            fields.integer("sessions"),
        )
    if kind == "entry":
        return fields.model(fields.mapping("entry"), SessionEntry)
    if kind == "lease":
        return (fields.text("resource"), fields.text("holder"), fields.time("until"))
    if kind == "session":
        return (fields.session_id("id"), fields.integer("version"))
    return fields.fail(f"unknown snapshot line {kind!r}")


@attrs.frozen
class Snapshot:
    """``routing.jsonl`` as read: the state of the index up to ``last_tx``."""

    last_tx: int
    entries: list[SessionEntry]
    leases: dict[str, tuple[str, datetime]]
    versions: dict[str, int]


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
    entries = [p for p in parsed if isinstance(p, SessionEntry)]
    leases = {p[0]: (p[1], p[2]) for p in parsed if isinstance(p, tuple) and len(p) == _LEASE}
    versions = {p[0]: p[1] for p in parsed if isinstance(p, tuple) and len(p) == _PAIR}
    if chunk.torn or (len(entries), len(leases), len(versions)) != (
        header.entries,
        header.leases,
        header.sessions,
    ):
        raise CorruptRecordError("the snapshot is incomplete; run JSONLBackend.repair()", path=path)
    return Snapshot(header.last_tx, entries, leases, versions)


def parse_records(
    lines: Sequence[Line], path: Path, *, after: int, skip: bool
) -> list[JournalRecord]:
    """Parse journal lines that follow transaction ``after``, checking their order.

    The header (line 1) is passed over. With ``skip``, records up to ``after`` are dropped (a
    snapshot already covers them: a compaction was cut short); otherwise every record must come
    after it. A ``commit`` or ``void`` repeats the transaction it closes.
    """
    records: list[JournalRecord] = []
    last = after
    for line in lines:
        record = parse_journal(line.data, path=path, line=line.number)
        if isinstance(record, JournalHeader):
            if line.number == 1:
                continue
            raise CorruptRecordError("a second journal header", path=path, line=line.number)
        if skip and record.tx <= after:
            continue
        follows = record.tx == last if isinstance(record, Commit | Void) else record.tx > last
        if not follows:
            raise CorruptRecordError(
                f"transaction {record.tx} is out of order after {last}", path=path, line=line.number
            )
        last = record.tx
        records.append(record)
    return records
