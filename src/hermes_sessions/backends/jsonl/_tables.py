"""The JSONL cache's entries and sessions: a lazily read snapshot plus what changed since.

:class:`RoutingTable` and :class:`SessionMap` serve the routing entries and the sessions of a
directory from a :class:`~._snapindex.SnapshotIndex` (lines decoded when first needed) and an
overlay of everything the journal changed after it. Without an index (a snapshot read whole, or
none) everything is in the overlay, as it always was. An entry or session is looked up by key
or id in O(log n) of the snapshot; a listing is a scan, decoding each line once and keeping
none of them.

A session decoded from the snapshot is kept while it is used; one that is *clean* (no transcript
loaded, and its file as the snapshot describes it) is dropped again once more than ``bound``
are held, so memory follows what the process uses, not the size of the directory.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

import attrs

from hermes_sessions.backends.jsonl._snapindex import SnapshotIndex
from hermes_sessions.backends.jsonl._snapshot import Summary
from hermes_sessions.backends.memtables import EntryTable, Transcript
from hermes_sessions.backends.rules import check_revision, touched_entry
from hermes_sessions.models import SessionEntry, SessionRecord

if TYPE_CHECKING:
    from datetime import datetime

__all__ = ["RoutingTable", "SessionFile", "SessionMap"]


@attrs.define(eq=False)
class SessionFile:
    """One session as cached: its summary, how far its file was read, and its version.

    ``loaded`` is the whole transcript while it is in the cache (read on demand, dropped when
    the cache is full); the summary — record, next message id, listing preview — is always
    here, so routing and listing never read the file. ``version`` is the transaction of the
    last journal record that changed the file; processes compare it with the snapshot's to
    find the files that changed while they were not looking.
    """

    summary_record: SessionRecord
    """The record while the transcript is not loaded (:attr:`record` is always current)."""
    summary_next_id: int
    summary_preview: str | None
    offset: int
    """Bytes read: the end of the last complete line."""
    lines: int
    """Lines read (the number of the last complete line)."""
    newest_tx: int = 0
    """The transaction of the last line read (opening checks it against the journal)."""
    checksums: bool = True
    """Whether every line carries a checksum (format 2; a format 1 file awaits migration)."""
    version: int = 0
    loaded: Transcript | None = None

    @classmethod
    def of(cls, transcript: Transcript, offset: int, lines: int, **kwargs: Any) -> SessionFile:
        """A cached file whose transcript is loaded."""
        return cls(
            transcript.record, transcript.next_id, None, offset, lines, loaded=transcript, **kwargs
        )

    @classmethod
    def summarised(cls, summary: Summary, lines: int, version: int) -> SessionFile:
        """A cached file known from its snapshot summary only (nothing read)."""
        return cls(
            summary.record, summary.next_id, summary.preview, summary.size, lines, version=version
        )

    @property
    def record(self) -> SessionRecord:
        """The session's record, exact as of the last catch-up."""
        return self.summary_record if self.loaded is None else self.loaded.record

    @property
    def next_id(self) -> int:
        """The next message id."""
        return self.summary_next_id if self.loaded is None else self.loaded.next_id

    @property
    def preview(self) -> str | None:
        """The listing preview (the first active user message, shortened)."""
        return self.summary_preview if self.loaded is None else self.loaded.preview()

    def summary(self) -> Summary:
        """What the snapshot keeps of the session."""
        return Summary(self.record, self.next_id, self.preview, self.offset)

    def unload(self) -> None:
        """Drop the transcript, keeping the summary."""
        if self.loaded is not None:
            self.summary_record = self.loaded.record
            self.summary_next_id = self.loaded.next_id
            self.summary_preview = self.loaded.preview()
            self.loaded = None


@attrs.define(eq=False)
class RoutingTable(EntryTable):
    """Key → entry over a snapshot index: the snapshot's entries plus the changes since.

    ``changed`` holds each key the journal changed after the snapshot (``None``: deleted);
    ``keys_by_session`` (inherited) holds the reverse map of those changed entries only, the
    snapshot's session lines hold the rest.
    """

    base: SnapshotIndex | None = None
    changed: dict[str, SessionEntry | None] = attrs.Factory(dict)
    _count: int = attrs.field(default=-1)

    def __attrs_post_init__(self) -> None:
        if self._count < 0:
            self._count = 0 if self.base is None else self.base.entry_count

    def __len__(self) -> int:
        return self._count

    def get(self, key: str) -> SessionEntry | None:
        """The entry of ``key``, or ``None``."""
        if key in self.changed:
            return self.changed[key]
        return None if self.base is None else self.base.entry(key)

    def keys_of(self, session_id: str) -> set[str]:
        """The keys pointing at ``session_id`` (a fresh set)."""
        keys = set(self.keys_by_session.get(session_id, ()))
        found = None if self.base is None else self.base.session(session_id)
        if found is not None and found.keys:
            keys.update(key for key in found.keys if key not in self.changed)
        return keys

    def check_revision(self, key: str, expected: int | None) -> None:
        """Raise ``ConflictError`` unless the key's current revision is ``expected``."""
        current = self.get(key)
        check_revision(key, expected, None if current is None else current.revision)

    def _set(self, key: str, entry: SessionEntry | None) -> None:
        previous = self.get(key)
        if previous is not None and key in self.changed:
            keys = self.keys_by_session[previous.session_id]
            keys.discard(key)
            if not keys:
                del self.keys_by_session[previous.session_id]
        self._count += (entry is not None) - (previous is not None)
        self.changed[key] = entry
        if entry is not None:
            self.keys_by_session.setdefault(entry.session_id, set()).add(key)

    def put(self, entry: SessionEntry) -> None:
        """Store ``entry`` as it is (revision included)."""
        self._set(entry.session_key, entry)

    def delete(self, key: str) -> None:
        """Remove the entry of ``key`` (it must exist)."""
        if self.get(key) is None:
            raise KeyError(key)
        self._set(key, None)

    def touch(
        self, key: str, at: datetime, last_prompt_tokens: int | None = None
    ) -> SessionEntry | None:
        """Record activity on ``key``; ``None`` if it has no entry."""
        entry = self.get(key)
        if entry is None:
            return None
        entry = touched_entry(entry, at, last_prompt_tokens)
        self._set(key, entry)
        return entry

    def listing(self, session_id: str | None = None) -> list[SessionEntry]:
        """All entries, or those pointing at ``session_id``, in key order."""
        if session_id is not None:
            found = (self.get(key) for key in sorted(self.keys_of(session_id)))
            return [entry for entry in found if entry is not None]
        base = self.base.entries() if self.base is not None else ()
        kept = [entry for entry in base if entry.session_key not in self.changed]
        kept.extend(entry for entry in self.changed.values() if entry is not None)
        kept.sort(key=lambda entry: entry.session_key)
        return kept


@attrs.define(eq=False)
class SessionMap(MutableMapping[str, SessionFile]):
    """Session id → :class:`~._cache.SessionFile` over a snapshot index, plus the changes since.

    ``held`` holds every session decoded or changed since the snapshot; ``removed`` the
    snapshot's sessions deleted since. Sessions read from the snapshot and still clean are
    dropped from ``held`` beyond ``bound`` (:meth:`trim`).
    """

    base: SnapshotIndex | None = None
    held: dict[str, SessionFile] = attrs.Factory(dict)
    removed: set[str] = attrs.Factory(set)
    bound: int = 4096
    _clean: OrderedDict[str, tuple[int, int, int]] = attrs.Factory(OrderedDict)
    """Sessions decoded from the snapshot, oldest first, with (version, offset, lines) then."""
    _added: int = 0
    """Sessions held that the snapshot does not list."""

    def _from_base(self, session_id: str) -> SessionFile | None:
        if self.base is None or session_id in self.removed:
            return None
        found = self.base.session(session_id)
        if found is None or found.summary is None:
            return None
        cached = SessionFile.summarised(found.summary, found.lines or 0, found.version)
        self.held[session_id] = cached
        self._clean[session_id] = (cached.version, cached.offset, cached.lines)
        if len(self._clean) > 2 * self.bound:  # amortised: a scan of many reads stays bounded
            self.trim()
        return cached

    def keep(self, session_id: str, cached: SessionFile) -> None:
        """Hold a session carried over from the snapshot before (its file unchanged since)."""
        self.held[session_id] = cached
        self._clean[session_id] = (cached.version, cached.offset, cached.lines)

    def __getitem__(self, session_id: str) -> SessionFile:
        cached = self.held.get(session_id)
        if cached is None:
            cached = self._from_base(session_id)
        if cached is None:
            raise KeyError(session_id)
        return cached

    def __contains__(self, session_id: object) -> bool:
        if not isinstance(session_id, str):
            return False
        return session_id in self.held or self._in_base(session_id)

    def _in_base(self, session_id: str) -> bool:
        if self.base is None or session_id in self.removed:
            return False
        return self.base.session(session_id) is not None

    def __setitem__(self, session_id: str, cached: SessionFile) -> None:
        if session_id not in self.held and not self._in_base(session_id):
            self._added += 1
        self.held[session_id] = cached
        self._clean.pop(session_id, None)

    def __delitem__(self, session_id: str) -> None:
        in_base = self._in_base(session_id)
        if session_id not in self.held and not in_base:
            raise KeyError(session_id)
        if in_base:
            self.removed.add(session_id)
        elif session_id in self.held:
            self._added -= 1
        self.held.pop(session_id, None)
        self._clean.pop(session_id, None)

    def __len__(self) -> int:
        base = 0 if self.base is None else self.base.session_count - len(self.removed)
        return base + self._added

    def __iter__(self) -> Iterator[str]:
        """Every id in order (the snapshot's from the raw lines: nothing is decoded)."""
        return self.sorted_ids()

    def sorted_ids(self) -> Iterator[str]:
        """Every session id, sorted, streamed (the snapshot's ids are never all in memory)."""
        base = () if self.base is None else self.base.session_ids()
        listed = (i for i in base if i not in self.removed)
        previous = None
        for session_id in heapq.merge(listed, sorted(self.held)):
            if session_id != previous:
                yield session_id
            previous = session_id

    def unlisted(self, names: set[bytes]) -> set[str]:
        """Of the raw session ids ``names``, those this map does not hold (``names`` is used up)."""
        gone = {r for r in self.removed if r.encode() in names}  # deleted since: listed no more
        if self.base is not None:
            self.base.discard_ids(names)
        unknown = {name.decode(errors="replace") for name in names} | gone
        return unknown - self.held.keys()

    def files(self, containing: bytes | None = None) -> Iterator[SessionFile]:
        """Every session, held or decoded for the scan only (not kept); see ``containing``.

        With ``containing``, only sessions whose snapshot line holds those bytes are decoded
        from the snapshot (a held session is always yielded): a cheap first filter.
        """
        yield from list(self.held.values())
        if self.base is None:
            return
        for found in self.base.sessions(containing):
            if found.id in self.held or found.id in self.removed or found.summary is None:
                continue
            yield SessionFile.summarised(found.summary, found.lines or 0, found.version)

    def values(self) -> Iterator[SessionFile]:  # type: ignore[override]  # a scan, not a view
        """Every session (see :meth:`files`)."""
        return self.files()

    def items(self) -> Iterator[tuple[str, SessionFile]]:  # type: ignore[override]
        """Every (id, session) (see :meth:`files`)."""
        return ((cached.record.id, cached) for cached in self.files())

    def trim(self) -> None:
        """Drop sessions decoded from the snapshot and clean again, beyond ``bound``."""
        clean = self._clean
        checked = 0
        while len(clean) > self.bound and checked < len(clean):
            session_id, then = clean.popitem(last=False)
            cached = self.held.get(session_id)
            if cached is None:
                continue
            if cached.loaded is None and (cached.version, cached.offset, cached.lines) == then:
                del self.held[session_id]
            elif cached.version == then[0] and cached.offset == then[1]:
                clean[session_id] = then  # a loaded transcript: clean again once unloaded
                checked += 1
