"""The JSONL backend's session-file records, and the line encoding every file shares.

Every file the backend writes is JSON Lines: one JSON object per line, UTF-8, a newline after
every line, and (since format 2) a CRC32 as the last member of every line (``_lines.sign``).
Session files (``sessions/<id>.jsonl``) hold a :class:`Header` then
:data:`SessionLine` records; the journal and snapshot records live in ``_journal``.

Every record carries the transaction number (``tx``) of the write that made it, so the lines of
a session file can be matched with the journal record that announced them. Readers raise
:class:`~hermes_sessions.exceptions.CorruptRecordError` with the file and line for anything
malformed, and :class:`~hermes_sessions.exceptions.IncompatibleStoreError` for a format version
newer than :data:`FORMAT_VERSION`. ``docs/jsonl.md`` shows every record with an example.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, NoReturn, TypeAlias, TypeVar

import attrs

from hermes_sessions.backends.jsonl._lines import sign
from hermes_sessions.backends.rules import apply_update, check_update
from hermes_sessions.exceptions import CorruptRecordError, IncompatibleStoreError
from hermes_sessions.ids import validate_session_id
from hermes_sessions.models import JSONObject, Message, SessionRecord
from hermes_sessions.serde import dump_datetime, load_datetime, structure, unstructure

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

__all__ = [
    "CHECKSUMS_SINCE",
    "FORMAT_VERSION",
    "REVISING",
    "Active",
    "End",
    "Fields",
    "Header",
    "MessageLine",
    "Orphan",
    "Reopen",
    "Revise",
    "SessionLine",
    "Update",
    "encode",
    "message_json",
    "parse_session_line",
    "read_message",
    "record_json",
]

FORMAT_VERSION: Final = 2
"""The format this library writes (session headers, journal, snapshot): 2, checksummed lines.

Format 1 (the same records without checksums) is still read; opening a directory migrates it
(``_migrate``)."""

CHECKSUMS_SINCE: Final = 2
"""The first format whose every line carries a checksum."""

T = TypeVar("T")
_PAIR: Final = 2

# A record that validates every update line: values and increments are checked against it.
_PROBE: Final = SessionRecord(
    id="probe", source="probe", started_at=datetime(2000, 1, 1, tzinfo=UTC)
)


def encode(data: JSONObject) -> bytes:
    """One checksummed line of JSON (readable UTF-8, no spaces) ending in a newline.

    Text that cannot be UTF-8 (lone surrogates, which the models refuse) would be written with
    ASCII escapes instead, so every line stays valid UTF-8.
    """
    try:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return sign(text.encode())
    except UnicodeEncodeError:
        text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
        return sign(text.encode())


# -- reading fields strictly -----------------------------------------------------------------------


class Fields:
    """One decoded line, read field by field; every failure names the file and line."""

    __slots__ = ("data", "line", "path")

    def __init__(self, data: JSONObject, path: Path, line: int) -> None:
        self.data = data
        self.path = path
        self.line = line

    def fail(self, reason: str) -> NoReturn:
        raise CorruptRecordError(reason, path=self.path, line=self.line)

    def raw(self, name: str) -> Any:
        if name not in self.data:
            self.fail(f"missing field {name!r}")
        return self.data[name]

    def integer(self, name: str) -> int:
        value = self.raw(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            self.fail(f"{name!r} must be an integer >= 0, got {value!r}")
        return value

    def text(self, name: str) -> str:
        value = self.raw(name)
        if not isinstance(value, str):
            self.fail(f"{name!r} must be a string, got {value!r}")
        return value

    def session_id(self, name: str) -> str:
        return self.checked_id(self.text(name), name)

    def checked_id(self, value: object, name: str) -> str:
        try:
            return validate_session_id(value)
        except ValueError as error:
            self.fail(f"{name!r}: {error}")

    def session_ids(self, name: str) -> tuple[str, ...]:
        return tuple(self.checked_id(value, name) for value in self.array(name))

    def time(self, name: str) -> datetime:
        try:
            return load_datetime(self.raw(name))
        except (TypeError, ValueError) as error:
            self.fail(f"{name!r} must be an ISO 8601 time with an offset: {error}")

    def optional_time(self, name: str) -> datetime | None:
        return None if self.data.get(name) is None else self.time(name)

    def mapping(self, name: str) -> JSONObject:
        value = self.raw(name)
        if not isinstance(value, dict):
            self.fail(f"{name!r} must be a JSON object")
        return value

    def array(self, name: str) -> list[Any]:
        value = self.data.get(name, [])
        if not isinstance(value, list):
            self.fail(f"{name!r} must be a JSON array")
        return value

    def model(self, value: object, cls: type[T]) -> T:
        return structure(value, cls, path=self.path, line=self.line)

    def tx(self) -> int:
        return self.integer("tx")

    def format(self, where: Path) -> int:
        version = self.integer("format")
        if version > FORMAT_VERSION:
            raise IncompatibleStoreError(
                str(where), found_version=version, supported_version=FORMAT_VERSION
            )
        return version


def read_message(fields: Fields, data: object, session_id: str) -> Message:
    """A stored message (it must have its id); the session is the file it came from."""
    if isinstance(data, dict) and "session_id" not in data:
        data = {**data, "session_id": session_id}
    message = fields.model(data, Message)
    if message.id is None:
        fields.fail("a stored message needs its id")
    if message.session_id != session_id:
        fields.fail(f"the message names session {message.session_id!r}, not {session_id!r}")
    return message


def message_json(message: Message) -> JSONObject:
    """A message as stored: without its session id (the file or record names the session)."""
    data = unstructure(message)
    data.pop("session_id", None)
    return data


def record_json(record: SessionRecord) -> JSONObject:
    """A record as stored: its message counters are derived from the messages when read."""
    data = unstructure(record)
    data.pop("message_count", None)
    data.pop("tool_call_count", None)
    return data


# -- session files ---------------------------------------------------------------------------------


@attrs.frozen
class Header:
    """The first line of a session file: the record as of the file's (re)write."""

    tx: int
    record: SessionRecord
    next_id: int
    format: int = FORMAT_VERSION
    """The format of the file (format 1 files are read, then migrated)."""

    def to_json(self) -> JSONObject:
        return {
            "type": "session",
            "format": FORMAT_VERSION,
            "tx": self.tx,
            "next_id": self.next_id,
            "record": record_json(self.record),
        }


@attrs.frozen
class MessageLine:
    """One message (with its id; the session is the file)."""

    tx: int
    message: Message

    def to_json(self) -> JSONObject:
        return {"type": "message", "tx": self.tx, "message": message_json(self.message)}


@attrs.frozen
class Update:
    """``update_session``: fields set and counters added."""

    tx: int
    values: JSONObject
    increments: dict[str, int | float]

    def to_json(self) -> JSONObject:
        out: JSONObject = {"type": "update", "tx": self.tx}
        if self.values:
            out["values"] = self.values
        if self.increments:
            out["increments"] = self.increments
        return out


@attrs.frozen
class End:
    """The session ended (first reason wins)."""

    tx: int
    reason: str
    at: datetime

    def to_json(self) -> JSONObject:
        return {"type": "end", "tx": self.tx, "reason": self.reason, "at": dump_datetime(self.at)}


@attrs.frozen
class Reopen:
    """The session's end was cleared."""

    tx: int

    def to_json(self) -> JSONObject:
        return {"type": "reopen", "tx": self.tx}


@attrs.frozen
class Active:
    """Messages soft-deleted (``active=False``) or restored."""

    tx: int
    ids: tuple[int, ...]
    active: bool

    def to_json(self) -> JSONObject:
        return {"type": "active", "tx": self.tx, "ids": list(self.ids), "active": self.active}


@attrs.frozen
class Orphan:
    """The parent session was deleted: ``parent_session_id`` becomes ``None``."""

    tx: int

    def to_json(self) -> JSONObject:
        return {"type": "orphan", "tx": self.tx}


@attrs.frozen
class Revise:
    """The session's state changed without a change of its transcript: its revision moves on.

    The state values themselves are in the journal's ``write`` record of the same transaction.
    """

    tx: int

    def to_json(self) -> JSONObject:
        return {"type": "revise", "tx": self.tx}


SessionLine: TypeAlias = Header | MessageLine | Update | End | Reopen | Active | Orphan | Revise

REVISING: Final = (MessageLine, Active, Revise)
"""The lines that move a session's revision (once per transaction, outside the header's group)."""


def _header(fields: Fields, tx: int, session_id: str) -> Header:
    version = fields.format(fields.path)
    record = fields.model(fields.mapping("record"), SessionRecord)
    if record.id != session_id:
        fields.fail(f"the header names session {record.id!r}, but the file is {session_id!r}")
    return Header(tx, record, fields.integer("next_id"), version)


def _update(fields: Fields, tx: int, _session_id: str) -> Update:
    values = dict(fields.data.get("values") or {})
    increments = fields.data.get("increments") or {}
    rekeyed = {"session_key": values.pop("session_key")} if "session_key" in values else {}
    try:
        checked_values, checked_increments = check_update(values, increments)
        checked_values.update(rekeyed)  # a key migration's rewrite (RotationPlan.rekey)
        apply_update(_PROBE, checked_values, checked_increments)
    except (TypeError, ValueError, AttributeError) as error:
        fields.fail(f"invalid update: {error}")
    return Update(tx, checked_values, checked_increments)


def _active(fields: Fields, tx: int, _session_id: str) -> Active:
    ids = fields.array("ids")
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        fields.fail("'ids' must be a list of integers")
    active = fields.raw("active")
    if not isinstance(active, bool):
        fields.fail("'active' must be true or false")
    return Active(tx, tuple(ids), active)


_SESSION_LINES: Final[dict[str, Callable[[Fields, int, str], SessionLine]]] = {
    "session": _header,
    "message": lambda f, tx, sid: MessageLine(tx, read_message(f, f.raw("message"), sid)),
    "update": _update,
    "end": lambda f, tx, _: End(tx, f.text("reason"), f.time("at")),
    "reopen": lambda _f, tx, _: Reopen(tx),
    "active": _active,
    "orphan": lambda _f, tx, _: Orphan(tx),
    "revise": lambda _f, tx, _: Revise(tx),
}


def parse_session_line(data: JSONObject, *, path: Path, line: int, session_id: str) -> SessionLine:
    """Read one line of a session file; raise ``CorruptRecordError`` if it is malformed."""
    fields = Fields(data, path, line)
    kind = fields.raw("type")
    reader = _SESSION_LINES.get(kind) if isinstance(kind, str) else None
    if reader is None:
        fields.fail(f"unknown record type {kind!r}")
    return reader(fields, fields.tx(), session_id)
