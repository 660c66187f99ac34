"""Reading a bundle's lines into models, and checking a whole bundle before anything is written.

:func:`records` decodes, parses and builds each line, refusing damage with
:class:`~hermes_sessions.exceptions.InvalidSourceError` naming the file and line:
text that is not UTF-8, a line that is not a JSON object, JSON nested deeper than
:data:`~hermes_sessions.interop._text.MAX_JSON_DEPTH` levels, a record the models refuse, a routing
key no key form reads, a state scope that is not one. :func:`check_bundle` reads the whole bundle
that way and adds what only the whole shows: the end line's counts, lines after it, a missing
end, one session or key twice, a key pointing at a session in neither the bundle nor the target.
A record type this version does not know is not damage: a later version may add one.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import attrs

from hermes_sessions import serde
from hermes_sessions.exceptions import (
    CorruptRecordError,
    HermesSessionsError,
    IncompatibleStoreError,
    InvalidSourceError,
)
from hermes_sessions.interop._text import JSONTooDeepError, load_json
from hermes_sessions.legacy_keys import read_session_key
from hermes_sessions.models import Message, SessionEntry, SessionRecord, check_json
from hermes_sessions.state import MAX_STATE_BYTES, StateScope, state_size

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from hermes_sessions.protocols import Backend

__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_VERSION",
    "EndLine",
    "EntryLine",
    "MemoryLine",
    "SessionLine",
    "StateLine",
    "UnknownLine",
    "check_bundle",
    "held_lines",
    "records",
]

BUNDLE_FORMAT: Final = "hermes-sessions-bundle"
"""The ``format`` value of a bundle's header line.

.. versionadded:: 0.1.0
"""
BUNDLE_VERSION: Final = 1
"""The bundle version this library writes, and the newest it reads.

.. versionadded:: 0.1.0
"""

_MEMORY_TARGETS: Final = ("memory", "user")
_SCOPE_ESCAPE: Final = re.compile("%(25|7C)")


@attrs.frozen
class SessionLine:
    """A ``session`` line: the record and its whole transcript."""

    record: SessionRecord
    messages: list[Message]


@attrs.frozen
class EntryLine:
    """An ``entry`` line: one routing entry."""

    entry: SessionEntry


@attrs.frozen
class StateLine:
    """A ``state`` line: one scope's value."""

    scope: str
    value: dict[str, Any]


@attrs.frozen
class MemoryLine:
    """A ``memory`` line: the entries of one memory target."""

    target: str
    entries: list[str]


@attrs.frozen
class EndLine:
    """The ``end`` line: how many session and entry lines the bundle holds."""

    sessions: int
    entries: int


@attrs.frozen
class UnknownLine:
    """A line of a record type this version does not know (a later version's)."""

    kind: str


Line: TypeAlias = SessionLine | EntryLine | StateLine | MemoryLine | EndLine | UnknownLine


class _DamageError(Exception):
    """What is wrong with one line (raised inside, turned into ``InvalidSourceError``)."""


def _refuse(where: str, number: int, reason: str) -> InvalidSourceError:
    return InvalidSourceError(
        f"{where}:{number}: {reason}; nothing was imported (the bundle is damaged: export it "
        "again, or fix that line)",
        path=where,
        line=number,
    )


def _header(data: object, where: str) -> None:
    if not isinstance(data, dict) or data.get("format") != BUNDLE_FORMAT:
        raise InvalidSourceError(
            f"{where} is not a hermes-sessions bundle (its first line has no "
            f"'format': '{BUNDLE_FORMAT}'); make one with `hermes-sessions export`",
            path=where,
            line=1,
        )
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InvalidSourceError(
            f"{where} has an invalid bundle version {version!r}", path=where, line=1
        )
    if version > BUNDLE_VERSION:
        raise IncompatibleStoreError(
            f"bundle {where}", found_version=version, supported_version=BUNDLE_VERSION
        )


def _parse(raw: bytes | str, *, last: bool) -> object:
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as error:
        raise _DamageError(f"not UTF-8 text (byte {error.start + 1} of the line)") from None
    try:
        return load_json(text)
    except JSONTooDeepError as error:
        raise _DamageError(str(error)) from None
    except ValueError:
        if last and not text.endswith("\n"):
            raise _DamageError(
                "cut short (no newline at its end): the bundle is incomplete"
            ) from None
        raise _DamageError("not a JSON line") from None


def _scope(scope: object) -> str:
    if not isinstance(scope, str):
        raise _DamageError(f"a state line's scope must be a string, got {scope!r}")
    kind, _, rest = scope.partition("|")
    parts = [_SCOPE_ESCAPE.sub(lambda m: "%" if m[1] == "25" else "|", p) for p in rest.split("|")]
    built: StateScope | None = None
    try:
        match kind, parts:
            case "app", [app]:
                built = StateScope.app(app)
            case "user", [app, platform, user]:
                built = StateScope.user(app, platform, user)
            case "lane", [key]:
                _key(key)
                built = StateScope.lane(key)
            case "session", [session_id]:
                built = StateScope.session(session_id)
    except (HermesSessionsError, _DamageError):
        built = None
    if built is None or built.id != scope:
        raise _DamageError(
            f"state scope {scope!r} is not one: expected app|<app>, user|<app>|<platform>|<user>, "
            "lane|<session key> or session|<session id>"
        )
    return scope


def _key(key: str) -> None:
    read = read_session_key(key)
    if read.form == "unknown":
        raise _DamageError(f"routing key {key!r} is not a session key ({read.problem})")


def _session(data: dict[str, Any], place: str) -> Line:
    record = serde.structure(data.get("session"), SessionRecord, path=place)
    raw = data.get("messages", [])
    if not isinstance(raw, list):
        raise _DamageError("a session line's 'messages' must be a list")
    return SessionLine(record, [serde.structure(item, Message, path=place) for item in raw])


def _entry(data: dict[str, Any], place: str) -> Line:
    entry = serde.structure(data.get("entry"), SessionEntry, path=place)
    _key(entry.session_key)
    return EntryLine(entry)


def _state(data: dict[str, Any], _place: str) -> Line:
    value: object = data.get("value")
    if not isinstance(value, dict) or not value:
        raise _DamageError("a state line's 'value' must be a non-empty JSON object")
    scope = _scope(data.get("scope"))
    try:
        check_json(value, f"state[{scope!r}]")
    except ValueError as error:
        raise _DamageError(str(error)) from None
    if state_size(value) > MAX_STATE_BYTES:
        raise _DamageError(
            f"the state of {scope!r} is {state_size(value):,} bytes, over the "
            f"{MAX_STATE_BYTES:,} a scope may hold"
        )
    return StateLine(scope, value)


def _memory(data: dict[str, Any], _place: str) -> Line:
    target: object = data.get("target")
    items: object = data.get("entries")
    if target not in _MEMORY_TARGETS or not isinstance(items, list):
        raise _DamageError(
            f"a memory line needs 'target' (memory or user, not {target!r}) and 'entries'"
        )
    if not all(isinstance(item, str) for item in items):
        raise _DamageError("a memory line's entries must be strings")
    return MemoryLine(str(target), items)


def _end(data: dict[str, Any], _place: str) -> Line:
    sessions, entries = data.get("sessions"), data.get("entries")
    for count in (sessions, entries):
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise _DamageError("the end line's 'sessions' and 'entries' must be counts")
    return EndLine(sessions, entries)  # type: ignore[arg-type]  # both checked just above


_BUILDERS: Final = {
    "session": _session,
    "entry": _entry,
    "state": _state,
    "memory": _memory,
    "end": _end,
}


def _build(data: object, place: str) -> Line:
    kind: object = data.get("type") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(kind, str):
        raise _DamageError("not a bundle record (a JSON object with a string 'type')")
    builder = _BUILDERS.get(kind)
    return UnknownLine(kind) if builder is None else builder(data, place)


def records(lines: Iterable[bytes | str], where: str) -> Iterator[tuple[int, Line]]:
    """Each line after the header as ``(line number, record)``; blank lines are skipped.

    Raises:
        InvalidSourceError: the header is not a bundle's, or a line is damaged (``line`` set).
        IncompatibleStoreError: the bundle is of a newer version than this library reads.
    """
    iterator = iter(lines)
    number = 0
    try:
        for raw, following in _lookahead(iterator):
            number += 1
            if number == 1:
                try:
                    header = _parse(raw, last=False)
                except _DamageError:
                    header = None
                _header(header, where)
                continue
            if not raw.strip():
                continue
            place = f"{where}:{number}"
            data = _parse(raw, last=following is None)
            yield number, _build(data, place)
    except _DamageError as damage:
        raise _refuse(where, number, str(damage)) from None
    except CorruptRecordError as error:
        raise _refuse(where, number, error.reason) from None
    if number == 0:
        _header(None, where)


def held_lines(stream: Iterable[bytes | str], where: str) -> list[bytes | str]:
    """Every line of an open file, read into memory (a stream cannot be read twice).

    Raises:
        InvalidSourceError: a text stream's bytes are not UTF-8. Its decoder reads ahead, so
            ``line`` is the first line it could not give (the damage is there or before it).
    """
    held: list[bytes | str] = []
    try:
        held.extend(stream)
    except UnicodeDecodeError as error:
        raise InvalidSourceError(
            f"{where}: not UTF-8 text ({error.reason}) at or before line {len(held) + 1}; "
            "nothing was imported (pass the file's path or a binary stream to learn the line)",
            path=where,
            line=len(held) + 1,
        ) from None
    return held


def _lookahead(
    iterator: Iterator[bytes | str],
) -> Iterator[tuple[bytes | str, bytes | str | None]]:
    """Each item with the one after it (``None`` after the last)."""
    current = next(iterator, None)
    while current is not None:
        following = next(iterator, None)
        yield current, following
        current = following


@attrs.define
class _Tally:
    sessions: set[str] = attrs.Factory(set)
    keys: set[str] = attrs.Factory(set)
    scopes: set[str] = attrs.Factory(set)
    targets: dict[str, int] = attrs.Factory(dict)
    """Sessions routing entries point at → the line of the first such entry."""
    end: int | None = None


def check_bundle(lines: Iterable[bytes | str], where: str, backend: Backend) -> None:
    """Read the whole bundle and refuse it at its first damage; nothing is written.

    Raises:
        InvalidSourceError: the bundle is damaged (``line`` names the line).
        IncompatibleStoreError: the bundle is of a newer version than this library reads.
    """
    tally = _Tally()
    last = 1
    for number, line in records(lines, where):
        last = number
        if tally.end is not None:
            raise _refuse(where, number, f"a record after the end line (line {tally.end})")
        if isinstance(line, SessionLine):
            _once(tally.sessions, line.record.id, "session", where, number)
        elif isinstance(line, EntryLine):
            _once(tally.keys, line.entry.session_key, "routing key", where, number)
            tally.targets.setdefault(line.entry.session_id, number)
        elif isinstance(line, StateLine):
            _once(tally.scopes, line.scope, "state scope", where, number)
        elif isinstance(line, EndLine):
            tally.end = number
            _counts(line, tally, where, number)
    if tally.end is None:
        raise _refuse(where, last + 1, "no end line: the bundle is incomplete")
    for session_id, number in sorted(tally.targets.items(), key=lambda item: item[1]):
        if session_id not in tally.sessions and backend.get_session(session_id) is None:
            raise _refuse(
                where,
                number,
                f"the routing entry points at session {session_id}, which is neither in the "
                "bundle nor in the target",
            )


def _counts(line: EndLine, tally: _Tally, where: str, number: int) -> None:
    found = (len(tally.sessions), len(tally.keys))
    if (line.sessions, line.entries) != found:
        raise _refuse(
            where,
            number,
            f"the end line counts {line.sessions} session(s) and {line.entries} entr(ies), the "
            f"bundle holds {found[0]} session(s) and {found[1]} entr(ies): lines are missing or "
            "added",
        )


def _once(seen: set[str], name: str, what: str, where: str, number: int) -> None:
    if name in seen:
        raise _refuse(where, number, f"{what} {name!r} appears twice in the bundle")
    seen.add(name)
