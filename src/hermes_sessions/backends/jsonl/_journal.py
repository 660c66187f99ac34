"""The JSONL backend's journal records.

``journal.jsonl`` starts with a :class:`JournalHeader` and holds one record per write, in order:
routing entry writes, activity, leases, and the announcement of every change to a session file
(written *before* the change, so a crash mid-change is always noticed by the next lock holder).
Transactions follow each other without a gap (a ``commit`` or ``void`` repeats the one it
closes), so in a checksummed journal a lost line in the middle is found too. The snapshot the
journal is compacted into is in ``_snapshot``.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Final, TypeAlias

import attrs

from hermes_sessions.backends.jsonl._session_records import (
    FORMAT_VERSION,
    End,
    Fields,
    Header,
    MessageLine,
    Orphan,
    Reopen,
    SessionLine,
    Update,
    message_json,
    read_message,
    record_json,
)
from hermes_sessions.exceptions import CorruptRecordError
from hermes_sessions.models import JSONObject, Message, SessionEntry, SessionRecord
from hermes_sessions.serde import dump_datetime, unstructure

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from hermes_sessions.backends.jsonl._lines import Line

__all__ = [
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
    "StateChange",
    "Touch",
    "Void",
    "Write",
    "line_effects",
    "parse_journal",
    "parse_records",
    "scopes",
]

_PAIR: Final = 2


# -- the journal -----------------------------------------------------------------------------------


@attrs.frozen
class JournalHeader:
    """The first line of the journal: the snapshot transaction it continues from."""

    base_tx: int
    format: int = FORMAT_VERSION
    """The journal's format (1: lines without checksums, read until migrated)."""

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

    With ``touch``, every key pointing at the session records activity at that time, and
    ``state`` holds the new value of every state scope the write changed (``{}``: emptied) —
    both only if the lines all arrived (a write cut short by a crash is voided with them).
    """

    tx: int
    session: str
    lines: int
    touch: datetime | None = None
    state: dict[str, JSONObject] = attrs.field(factory=dict)

    def to_json(self) -> JSONObject:
        out: JSONObject = {"op": "write", "tx": self.tx, "session": self.session}
        out["lines"] = self.lines
        if self.touch is not None:
            out["touch"] = dump_datetime(self.touch)
        if self.state:
            out["state"] = self.state
        return out


@attrs.frozen
class StateChange:
    """State scopes changed alone (not through a session): each scope's new value."""

    tx: int
    scopes: dict[str, JSONObject]

    def to_json(self) -> JSONObject:
        return {"op": "state", "tx": self.tx, "scopes": self.scopes}


@attrs.frozen
class Create:
    """A session file is being created (completed from this record after a crash)."""

    tx: int
    session: NewSession

    def to_json(self) -> JSONObject:
        return {"op": "create", "tx": self.tx, **self.session.to_json()}


@attrs.frozen
class Rewrite:
    """A session file is being replaced as a whole (temp file + rename) by ``lines`` lines."""

    tx: int
    session: str
    lines: int | None = None
    """How many lines the new file has (``None`` in format 1 records)."""

    def to_json(self) -> JSONObject:
        out: JSONObject = {"op": "rewrite", "tx": self.tx, "session": self.session}
        if self.lines is not None:
            out["lines"] = self.lines
        return out


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
    state: dict[str, JSONObject] = attrs.field(factory=dict)
    """State scopes set with the commit (the created session's copy of another's)."""
    deletes: tuple[str, ...] = ()
    """Keys whose entries go with the commit (before ``entries`` are stored)."""
    rekey: tuple[tuple[str, str], ...] = ()
    """``(session_id, session_key)``: an ``update`` line setting the record's key."""

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
        if self.state:
            out["state"] = self.state
        if self.deletes:
            out["deletes"] = list(self.deletes)
        if self.rekey:
            out["rekey"] = [list(pair) for pair in self.rekey]
        return out

    def groups(self) -> dict[str, list[SessionLine]]:
        """The lines each existing session file receives, in the order they are written."""
        groups: dict[str, list[SessionLine]] = {}
        if self.append_to is not None:
            groups[self.append_to] = [MessageLine(self.tx, m) for m in self.messages]
        for session_id in self.reopen:
            groups.setdefault(session_id, []).append(Reopen(self.tx))
        for session_id, key in self.rekey:
            groups.setdefault(session_id, []).append(Update(self.tx, {"session_key": key}, {}))
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
    | StateChange
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
    deletes = tuple(fields.array("deletes")) if "deletes" in data else ()
    if not all(isinstance(key, str) and key for key in deletes):
        fields.fail("'deletes' must list session keys")
    rekey = []
    for pair in fields.array("rekey") if "rekey" in data else []:
        if not (isinstance(pair, list) and len(pair) == _PAIR and isinstance(pair[1], str)):
            fields.fail("'rekey' must list [session_id, session_key] pairs")
        rekey.append((fields.checked_id(pair[0], "rekey"), pair[1]))
    return Plan(
        tx,
        fields.time("at"),
        create,
        append_to,
        messages,
        fields.session_ids("reopen"),
        tuple(end),
        entries,
        scopes(fields, "state"),
        deletes,
        tuple(rekey),
    )


def scopes(fields: Fields, name: str) -> dict[str, JSONObject]:
    """State scope values (scope id -> JSON object) of a record; absent means none."""
    if name not in fields.data:
        return {}
    values = fields.mapping(name)
    if not all(isinstance(value, dict) for value in values.values()):
        fields.fail(f"{name!r} must map each scope to a JSON object")
    return values


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
        tx,
        f.session_id("session"),
        f.integer("lines"),
        f.optional_time("touch"),
        scopes(f, "state"),
    ),
    "state": lambda f, tx: StateChange(tx, scopes(f, "scopes")),
    "create": lambda f, tx: Create(tx, NewSession.read(f, f.data)),
    "rewrite": lambda f, tx: Rewrite(
        tx, f.session_id("session"), f.integer("lines") if "lines" in f.data else None
    ),
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
        version = fields.format(path)
        return JournalHeader(fields.integer("base_tx"), version)
    reader = _JOURNAL_RECORDS.get(op) if isinstance(op, str) else None
    if reader is None:
        fields.fail(f"unknown journal record {op!r}")
    return reader(fields, fields.tx())


def parse_records(
    lines: Sequence[Line], path: Path, *, after: int, skip: bool, checksums: bool
) -> list[JournalRecord]:
    """Parse journal lines that follow transaction ``after``, checking their order.

    The header (line 1) is passed over. With ``skip``, records up to ``after`` are dropped (a
    snapshot already covers them: a compaction was cut short); otherwise every record must come
    after it. A ``commit`` or ``void`` repeats the transaction it closes. With ``checksums``
    (a format 2 journal, whose lines cannot be lost unnoticed in between) every transaction
    must follow the one before without a gap, and a ``plan`` or ``remove`` followed by anything
    must be followed by its ``commit``.
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
        closes = isinstance(record, Commit | Void)
        follows = record.tx == last if closes else record.tx > last
        if not follows:
            raise CorruptRecordError(
                f"transaction {record.tx} is out of order after {last}", path=path, line=line.number
            )
        if checksums:
            _check_sequence(records, record, last, path, line.number)
        last = record.tx
        records.append(record)
    return records


def _check_sequence(
    records: list[JournalRecord], record: JournalRecord, last: int, path: Path, number: int
) -> None:
    """In a checksummed journal: no transaction missing, no plan or removal without commit."""
    previous = records[-1] if records else None
    if isinstance(previous, Plan | Remove) and not isinstance(record, Commit):
        raise CorruptRecordError(
            f"the commit of transaction {previous.tx} is missing before this line: it was lost",
            path=path,
            line=number,
        )
    if not isinstance(record, Commit | Void) and record.tx != last + 1:
        raise CorruptRecordError(
            f"transactions {last + 1} to {record.tx - 1} are missing before this line: journal "
            "lines were lost",
            path=path,
            line=number,
        )


def line_effects(record: JournalRecord) -> list[tuple[str, int | None, int]]:
    """How a record changes the line count of each session file it names.

    Each item is ``(session_id, lines, added)``: ``lines`` is the count of a file the record
    (re)creates (``-1``: not known, a format 1 rewrite), ``None`` if it only appends ``added``.
    """
    if isinstance(record, Write):
        return [(record.session, None, record.lines)]
    if isinstance(record, Create):
        return [(record.session.record.id, 1 + len(record.session.messages), 0)]
    if isinstance(record, Rewrite):
        return [(record.session, -1 if record.lines is None else record.lines, 0)]
    effects: list[tuple[str, int | None, int]] = []
    if isinstance(record, Plan):
        if record.create is not None:
            effects.append((record.create.record.id, 1 + len(record.create.messages), 0))
        effects.extend((sid, None, len(lines)) for sid, lines in record.groups().items())
    elif isinstance(record, Remove):
        effects.extend((sid, None, len(lines)) for sid, lines in record.groups().items())
    return effects
