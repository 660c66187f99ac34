"""The routing snapshot read lazily: opening finds where each line starts and decodes nothing more.

A snapshot whose header says ``"index": 1`` keeps its entries sorted by key and its sessions
sorted by id (as every snapshot is written), gives every session line its summary and the keys
pointing at it. Opening such a snapshot reads the file once to find where each line starts (an
array of offsets, 8 bytes a line), decodes the header, the leases and the state scopes, and
nothing else: an entry or a session is found by binary search over its section (its key or id
taken from the start of the raw line) and decoded, checksum checked, when a call first needs it.
A small cache keeps the lines decoded last. The file is read with ``pread`` on a descriptor kept
open, so a compaction that replaces it (by rename) never changes what this process reads.
"""

from __future__ import annotations

import contextlib
import os
import re
from array import array
from collections import OrderedDict
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final

import attrs

from hermes_sessions.backends.jsonl._lines import parse_line
from hermes_sessions.backends.jsonl._snapshot import (
    INDEX_FORMAT,
    SnapshotHeader,
    SnapshotLease,
    SnapshotSession,
    SnapshotState,
    parse_snapshot_line,
    read_snapshot,
)
from hermes_sessions.exceptions import CorruptRecordError
from hermes_sessions.models import JSONObject, SessionEntry

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["INDEX_FORMAT", "SnapshotIndex", "open_index"]

_CHUNK: Final = 1 << 20
"""Bytes read at a time when scanning the file or a section of it."""

_CACHED: Final = 4096
"""Decoded lines of each section kept (entries, sessions)."""

_PROBED: Final = 8192
"""Keys of probed lines kept: the levels of the search every lookup passes through."""

_SESSION_ID: Final = re.compile(rb'^\{"type":"session","id":"([^"\\\n]*)"', re.MULTILINE)
"""A session line's id, when it holds no escape (ids are plain: ``validate_session_id``)."""

_ENTRY_PREFIX: Final = b'{"type":"entry","entry":{"session_key":"'
_SESSION_PREFIX: Final = b'{"type":"session","id":"'


def _quoted(raw: bytes, prefix: bytes) -> str | None:
    """The JSON string right after ``prefix`` if it holds no escape (else ``None``: decode)."""
    if not raw.startswith(prefix):
        return None
    end = raw.find(b'"', len(prefix))
    if end < 0:
        return None
    value = raw[len(prefix) : end]
    if b"\\" in value:
        return None
    try:
        return value.decode()
    except UnicodeDecodeError:
        return None


@attrs.define(eq=False)
class SnapshotIndex:
    """One snapshot file, open, with the offset of each line; lines are decoded on demand."""

    path: Path
    header: SnapshotHeader
    leases: dict[str, tuple[str, datetime]]
    scopes: dict[str, JSONObject]
    _fd: int
    _starts: array[int]
    """Where each line starts; one more item: where the last line ends."""
    _entries: OrderedDict[str, SessionEntry | None] = attrs.Factory(OrderedDict)
    _sessions: OrderedDict[str, SnapshotSession | None] = attrs.Factory(OrderedDict)
    _probed: dict[int, str] = attrs.Factory(dict)
    """The key or id of lines binary searches passed through (at most ``_PROBED``)."""

    @property
    def last_tx(self) -> int:
        """The last transaction the snapshot covers."""
        return self.header.last_tx

    @property
    def entry_count(self) -> int:
        """How many routing entries the snapshot holds."""
        return self.header.entries

    @property
    def session_count(self) -> int:
        """How many sessions the snapshot holds."""
        return self.header.sessions

    def close(self) -> None:
        """Close the file (a closed index is never read again)."""
        with contextlib.suppress(OSError):
            os.close(self._fd)

    # -- sections ----------------------------------------------------------------------------------

    def _entry_lines(self) -> range:
        return range(1, 1 + self.header.entries)

    def _session_lines(self) -> range:
        first = 1 + self.header.entries + self.header.leases
        return range(first, first + self.header.sessions)

    def _raw(self, index: int) -> bytes:
        start, end = self._starts[index], self._starts[index + 1]
        data = os.pread(self._fd, end - start, start)
        if len(data) != end - start or not data.endswith(b"\n"):
            raise CorruptRecordError(
                "the snapshot changed while it was open; run JSONLBackend.repair()",
                path=self.path,
                line=index + 1,
            )
        return data[:-1]

    def _chunks(self, lines: range) -> Iterator[tuple[int, int, bytes]]:
        """The bytes of a section's lines, a chunk of whole lines at a time: (first, stop, data)."""
        index = lines.start
        while index < lines.stop:
            stop = index + 1
            while stop < lines.stop and self._starts[stop + 1] - self._starts[index] <= _CHUNK:
                stop += 1
            start = self._starts[index]
            data = os.pread(self._fd, self._starts[stop] - start, start)
            if len(data) != self._starts[stop] - start:
                raise CorruptRecordError("the snapshot changed while it was open", path=self.path)
            yield index, stop, data
            index = stop

    def _lines(self, lines: range) -> Iterator[tuple[int, bytes]]:
        """The raw lines of a section, in order (without their newlines)."""
        for index, stop, data in self._chunks(lines):
            parts = data.split(b"\n")
            for offset, raw in enumerate(parts[: stop - index]):
                yield index + offset, raw

    def _decode(self, index: int, raw: bytes) -> object:
        data, checked = parse_line(raw, path=self.path, number=index + 1)
        if not checked:
            raise CorruptRecordError(
                "a line with no checksum, in a file whose every line carries one: it was added or "
                "changed by another program",
                path=self.path,
                line=index + 1,
            )
        return parse_snapshot_line(data, path=self.path, line=index + 1)

    def _entry(self, index: int, raw: bytes) -> SessionEntry:
        item = self._decode(index, raw)
        if not isinstance(item, SessionEntry):
            raise CorruptRecordError("an entry line expected", path=self.path, line=index + 1)
        return item

    def _session(self, index: int, raw: bytes) -> SnapshotSession:
        item = self._decode(index, raw)
        if not isinstance(item, SnapshotSession) or item.summary is None or item.keys is None:
            raise CorruptRecordError(
                "a session line with its summary and keys expected", path=self.path, line=index + 1
            )
        return item

    def _key(self, index: int, raw: bytes) -> str:
        return _quoted(raw, _ENTRY_PREFIX) or self._entry(index, raw).session_key

    def _id(self, index: int, raw: bytes) -> str:
        return _quoted(raw, _SESSION_PREFIX) or self._session(index, raw).id

    def _find(self, lines: range, wanted: str, key: Callable[[int, bytes], str]) -> int | None:
        """Binary search of a sorted section; the line holding ``wanted`` (or ``None``)."""
        low, high = lines.start, lines.stop
        probed = self._probed
        while low < high:
            middle = (low + high) // 2
            found = probed.get(middle)
            if found is None:
                found = key(middle, self._raw(middle))
                if len(probed) < _PROBED:  # the first come first: the top of the search tree
                    probed[middle] = found
            if found == wanted:
                return middle
            if found < wanted:
                low = middle + 1
            else:
                high = middle
        return None

    # -- lookups -----------------------------------------------------------------------------------

    def entry(self, key: str) -> SessionEntry | None:
        """The snapshot's entry of ``key`` (``None``: it has none)."""
        cache = self._entries
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
        index = self._find(self._entry_lines(), key, self._key)
        entry = None if index is None else self._entry(index, self._raw(index))
        if entry is not None and entry.session_key != key:
            raise CorruptRecordError("the entry names another key", path=self.path, line=index)
        cache[key] = entry
        if len(cache) > _CACHED:
            cache.popitem(last=False)
        return entry

    def session(self, session_id: str) -> SnapshotSession | None:
        """The snapshot's line of session ``session_id`` (``None``: it has none)."""
        cache = self._sessions
        if session_id in cache:
            cache.move_to_end(session_id)
            return cache[session_id]
        index = self._find(self._session_lines(), session_id, self._id)
        found = None if index is None else self._session(index, self._raw(index))
        cache[session_id] = found
        if len(cache) > _CACHED:
            cache.popitem(last=False)
        return found

    def entries(self) -> Iterator[SessionEntry]:
        """Every entry, in key order (decoded one by one, not kept)."""
        for index, raw in self._lines(self._entry_lines()):
            yield self._entry(index, raw)

    def sessions(self, containing: bytes | None = None) -> Iterator[SnapshotSession]:
        """Every session line in id order (only those whose raw line holds ``containing``)."""
        for index, raw in self._lines(self._session_lines()):
            if containing is None or containing in raw:
                yield self._session(index, raw)

    def load_small(self, lines: range) -> None:
        """Decode the lease or state lines ``lines`` (few: kept decoded)."""
        for number, raw in self._lines(lines):
            item = self._decode(number, raw)
            if isinstance(item, SnapshotLease):
                self.leases[item.resource] = (item.holder, item.until)
            elif isinstance(item, SnapshotState):
                self.scopes[item.scope] = item.value
            else:
                raise CorruptRecordError(
                    "a lease or state line expected", path=self.path, line=number + 1
                )

    def discard_ids(self, ids: set[bytes]) -> None:
        """Take every session id of the snapshot out of ``ids`` (raw ids, in bulk).

        Opening checks the session files against the ids this way, never holding them all.
        """
        count = 0
        for _, _, data in self._chunks(self._session_lines()):
            found = _SESSION_ID.findall(data)
            count += len(found)
            ids.difference_update(found)
        if count != self.header.sessions:  # an id written escaped: take them one by one
            ids.difference_update(session_id.encode() for session_id in self.session_ids())

    def session_ids(self) -> Iterator[str]:
        """Every session id, in order (taken from the raw lines)."""
        for index, raw in self._lines(self._session_lines()):
            yield self._id(index, raw)


def _scan(fd: int) -> tuple[array[int], bool]:
    """Where every line of the file starts (and where the last ends); whether it ends torn."""
    starts = array("q", [0])
    offset = 0
    tail = b""
    while True:
        chunk = os.pread(fd, _CHUNK, offset)
        if not chunk:
            break
        offset += len(chunk)
        data = tail + chunk
        parts = data.split(b"\n")
        tail = parts.pop()
        base = starts[-1]
        position = base
        for part in parts:
            position += len(part) + 1
            starts.append(position)
    return starts, bool(tail)


def open_index(path: Path) -> SnapshotIndex | SnapshotHeader | None:
    """Open ``path`` lazily if its header allows it; else its header (read it whole), or ``None``.

    Raises ``CorruptRecordError`` if the file is torn or its sections do not add up to what
    the header counts (the eager reader then names the exact problem).
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        found = _opened(fd, path)
    except BaseException:
        os.close(fd)
        raise
    if not isinstance(found, SnapshotIndex):
        os.close(fd)
    return found


def _opened(fd: int, path: Path) -> SnapshotIndex | SnapshotHeader:
    first = os.pread(fd, _CHUNK, 0).split(b"\n", 1)[0]
    data, checked = parse_line(first, path=path, number=1)
    header = parse_snapshot_line(data, path=path, line=1)
    if not isinstance(header, SnapshotHeader):
        raise CorruptRecordError("the snapshot starts with its header", path=path, line=1)
    if header.index != INDEX_FORMAT or not checked:
        return header
    starts, torn = _scan(fd)
    total = 1 + header.entries + header.leases + header.sessions + header.states
    if torn or len(starts) != total + 1:
        read_snapshot(path)  # the whole reader names what is wrong
        raise CorruptRecordError("the snapshot is incomplete; run JSONLBackend.repair()", path=path)
    index = SnapshotIndex(path, header, {}, {}, fd, starts)
    index.load_small(range(1 + header.entries, 1 + header.entries + header.leases))
    index.load_small(range(total - header.states, total))
    return index
