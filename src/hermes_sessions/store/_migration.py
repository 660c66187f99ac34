"""Key migration: move routing entries and records to the keys a new :class:`KeyPolicy` builds.

:meth:`SessionStore.migrate_keys` ends here. Each routing entry's new key is built from its
``origin`` under the new policy (after the host's ``remap``). An origin builds the entry's key
under the old policy either in this library's form or in Hermes's thread form
(:func:`~hermes_sessions.legacy_keys.build_hermes_key`, ``<chat>:<thread>`` without the marker),
so old thread keys move to the marked form. An origin that is missing, or that
does not build the entry's key under the old policy (entries rebuilt from records, erased or
imported), is replaced by the key read back with
:func:`~hermes_sessions.legacy_keys.read_session_key`, and only when that reading is
unambiguous; otherwise the entry is reported and left alone. Records follow their lane: every
record created under a moved key gets the new key (records of a lane without an entry move when
their key reads back unambiguously, and are reported otherwise). Lane state follows too
(:mod:`hermes_sessions.store._lane_moves`, written around the plan).

Collisions (several keys onto one new key) are merged by default: the contender whose session
was active last becomes the new key's live session, every other contender's session becomes
ended history of the new key (end reason ``key_merged`` unless it ended before, or another key
still points at it). ``collisions="refuse"`` leaves every key of a colliding group where it is.

A pass is one :class:`~hermes_sessions.protocols.RotationPlan`, applied atomically by the
backend; a concurrent write makes it re-read and plan again. Running it again is a no-op: an
entry whose key is already what the new policy builds is left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

import attrs

from hermes_sessions.exceptions import ConflictError, InvalidArgumentError
from hermes_sessions.keys import KeyPolicy
from hermes_sessions.legacy_keys import build_hermes_key, read_session_key
from hermes_sessions.models import SessionEntry, SessionRecord, SessionSource
from hermes_sessions.protocols import Backend, EntryWrite, RotationPlan
from hermes_sessions.queries import SessionQuery
from hermes_sessions.store._lane_moves import LaneMoves, Rank, plan_lane_moves

if TYPE_CHECKING:
    from datetime import datetime

    from hermes_sessions.store._session_store import SessionStore

__all__ = [
    "KEY_MERGED",
    "Collisions",
    "KeyMerge",
    "KeyMigrationReport",
    "KeyMove",
    "KeySkip",
    "SkipReason",
    "migrate_keys",
]

KEY_MERGED: Final = "key_merged"
"""The end reason of a session that a key migration merged into another key's history.

.. versionadded:: 0.1.0
"""

Collisions: TypeAlias = Literal["merge", "refuse"]
"""What :meth:`SessionStore.migrate_keys` does when several keys map onto one new key.

.. versionadded:: 0.1.0
"""

SkipReason: TypeAlias = Literal["no_origin", "foreign", "collision", "unrouted", "incognito"]
"""Why a key was left where it is (see :class:`KeySkip`).

.. versionadded:: 0.1.0
"""

_ATTEMPTS: Final = 5


@attrs.frozen
class KeyMove:
    """One routing entry moved (or, in a dry run, to be moved) to its new key.

    .. versionadded:: 0.1.0
    """

    old_key: str
    new_key: str
    session_id: str
    via: Literal["origin", "key"]
    """Whether the new key was built from the entry's ``origin`` or from its key read back."""


@attrs.frozen
class KeyMerge:
    """Several keys mapped onto ``new_key``: ``session_id`` stays live, the others are history.

    .. versionadded:: 0.1.0
    """

    new_key: str
    session_id: str
    """The live session of ``new_key``: the contender active last."""
    merged: tuple[tuple[str, str], ...]
    """``(old_key, session_id)`` of every other contender; each session is now history."""


@attrs.frozen
class KeySkip:
    """A key left where it is, and why.

    ``no_origin``: the entry has no usable origin and its key does not read back to one
    source. ``foreign``: the key belongs to another namespace than the old policy's.
    ``collision``: it collides with others and ``collisions="refuse"``. ``unrouted``: records
    of a lane with no entry whose key does not read back (``session_id`` is one of them).
    ``incognito``: the new key is an incognito lane's, which is never persisted.

    .. versionadded:: 0.1.0
    """

    key: str
    session_id: str | None
    reason: SkipReason
    detail: str


@attrs.frozen(kw_only=True)
class KeyMigrationReport:
    """What :meth:`SessionStore.migrate_keys` changed, or would change with ``dry_run``.

    .. versionadded:: 0.1.0
    """

    dry_run: bool
    moved: tuple[KeyMove, ...]
    """Entries moved, in old-key order."""
    merged: tuple[KeyMerge, ...]
    """Collisions merged, in new-key order."""
    rekeyed: tuple[tuple[str, str], ...]
    """``(session_id, new_key)`` of every record whose ``session_key`` was rewritten."""
    skipped: tuple[KeySkip, ...]
    """Keys left alone, with the reason."""
    unchanged: int
    """Entries whose key already is what the new policy builds."""
    states_moved: tuple[tuple[str, str], ...] = ()
    """``(old_key, new_key)`` of every lane whose lane state moves, in old-key order.

    .. versionadded:: 0.1.0
    """

    @property
    def changed(self) -> bool:
        """Whether the pass moves anything (``False`` on a re-run)."""
        return bool(self.moved or self.rekeyed or self.states_moved)

    def lines(self) -> list[str]:
        """One human-readable line per move, merge and skip (what the CLI prints)."""
        out = [f"move {m.old_key} -> {m.new_key} ({m.session_id}, via {m.via})" for m in self.moved]
        for merge in self.merged:
            others = ", ".join(f"{key} ({sid})" for key, sid in merge.merged)
            out.append(f"merge into {merge.new_key}: live {merge.session_id}; history {others}")
        out.extend(f"lane state {old} -> {new}" for old, new in self.states_moved)
        out.extend(f"skip {s.key} ({s.reason}): {s.detail}" for s in self.skipped)
        return out


@attrs.frozen
class _Target:
    """Where one entry goes."""

    entry: SessionEntry
    new_key: str
    via: Literal["origin", "key"]


@attrs.define
class _Planner:
    """One pass's decisions: where each key goes, and what it reports."""

    old: KeyPolicy
    new: KeyPolicy
    remap: Callable[[SessionSource], SessionSource]
    collisions: Collisions
    incognito: Callable[[str], bool]
    skipped: list[KeySkip] = attrs.Factory(list)
    unchanged: int = 0

    def _built(self, source: SessionSource) -> str:
        return self.new.build(self.remap(source))

    def _from_key(self, key: str) -> tuple[SessionSource | None, str]:
        """The source ``key`` reads back to under the old policy, or why there is none."""
        read = read_session_key(key, self.old)
        if read.source is None:
            return None, read.problem or "the key does not read back to a source"
        platform = read.source.platform
        if self.old.canonicalizers.get(platform) != self.new.canonicalizers.get(platform):
            return None, f"the key holds {platform} ids canonicalised by the old policy"
        if read.form == "hermes-sessions" and self.old.build(read.source) != key:
            return None, "the key does not read back to a source that builds it"
        if read.form == "hermes" and build_hermes_key(read.source, self.old) != key:
            return None, "the key does not read back to a source that builds it"
        if _isolates(self.new, read.source) and not _isolates(self.old, read.source):
            return None, "the new policy isolates members, and the key names none"
        return read.source, ""

    def target(self, entry: SessionEntry) -> _Target | None:
        """Where ``entry`` goes; ``None`` if it stays (unchanged, or reported as skipped)."""
        target = self._target(entry)
        if target is not None and self.incognito(target.new_key):
            detail = f"{target.new_key} is an incognito lane (kept in memory only)"
            self.skipped.append(KeySkip(entry.session_key, entry.session_id, "incognito", detail))
            return None
        return target

    def _target(self, entry: SessionEntry) -> _Target | None:
        key = entry.session_key
        origin = entry.origin
        if origin is not None and self._built(origin) == key:
            self.unchanged += 1
            return None
        if origin is not None and key in (
            self.old.build(origin),
            build_hermes_key(origin, self.old),
        ):
            return _Target(entry, self._built(origin), "origin")
        source = self._read_source(key, entry.session_id, no_origin=origin is None)
        if source is None:
            return None
        new_key = self._built(source)
        if new_key == key:
            self.unchanged += 1
            return None
        return _Target(attrs.evolve(entry, origin=self._adopted(source, origin)), new_key, "key")

    def _read_source(self, key: str, session_id: str, *, no_origin: bool) -> SessionSource | None:
        """The source of an entry whose origin cannot say, read from its key (or reported)."""
        namespace = read_session_key(key, self.old).namespace
        if namespace is not None and namespace != self.old.namespace:
            detail = f"namespace {namespace!r}, not the old policy's {self.old.namespace!r}"
            self.skipped.append(KeySkip(key, session_id, "foreign", detail))
            return None
        source, problem = self._from_key(key)
        if source is None:
            lead = "no origin" if no_origin else "its origin does not build this key"
            self.skipped.append(KeySkip(key, session_id, "no_origin", f"{lead}; {problem}"))
        return source

    def _adopted(self, source: SessionSource, origin: SessionSource | None) -> SessionSource:
        """The origin a moved entry keeps: the key read back, plus a partial origin's sender.

        An entry rebuilt from records knows its sender; it is kept when the new key stays the same.
        """
        if origin is None or origin.user_id is None:
            return source
        enriched = attrs.evolve(source, user_id=origin.user_id, user_name=origin.user_name)
        return enriched if self._built(enriched) == self._built(source) else source

    def lane_target(self, key: str, record: SessionRecord) -> str | None:
        """The new key of a lane that has records but no entry (``None``: it stays)."""
        namespace = read_session_key(key, self.old).namespace
        if namespace is not None and namespace != self.old.namespace:
            return None  # another namespace's history (or a lane moved before): not this pass's
        source, problem = self._from_key(key)
        if source is None:
            self.skipped.append(KeySkip(key, record.id, "unrouted", problem))
            return None
        new_key = self._built(source)
        if self.incognito(new_key):
            detail = f"{new_key} is an incognito lane (kept in memory only)"
            self.skipped.append(KeySkip(key, record.id, "incognito", detail))
            return None
        return None if new_key == key else new_key


def _isolates(policy: KeyPolicy, source: SessionSource) -> bool:
    """Whether ``policy`` puts the sender into the key of a chat shaped like ``source``."""
    if source.chat_type == "dm":
        return False
    return policy.group_sessions_per_user and (
        source.thread_id is None or policy.thread_sessions_per_user
    )


def _live_first(
    by_id: dict[str, SessionRecord], entry: SessionEntry
) -> tuple[datetime, datetime, str]:
    """The collision rule's order: the session active last wins (then the entry, then the key)."""
    record = by_id.get(entry.session_id)
    last = record.last_active if record is not None else entry.updated_at
    return (last, entry.updated_at, entry.session_key)


def _groups(
    moving: dict[str, _Target], entries: dict[str, SessionEntry]
) -> dict[str, list[SessionEntry]]:
    """New key -> the entries that end up contending for it (a staying occupant included)."""
    groups: dict[str, list[SessionEntry]] = {}
    for target in moving.values():
        groups.setdefault(target.new_key, []).append(target.entry)
    for new_key, contenders in groups.items():
        occupant = entries.get(new_key)
        if occupant is not None and new_key not in moving:
            contenders.append(occupant)
    return groups


def _refuse(
    planner: _Planner, moving: dict[str, _Target], entries: dict[str, SessionEntry]
) -> None:
    """Drop every colliding group from ``moving`` until none is left (``collisions="refuse"``).

    A refused entry stays, so it may become the occupant of another group: hence the loop.
    """
    while True:
        colliding = {k: g for k, g in _groups(moving, entries).items() if len(g) > 1}
        if not colliding:
            return
        for new_key, group in sorted(colliding.items()):
            keys = ", ".join(sorted(e.session_key for e in group))
            for entry in group:
                if entry.session_key in moving:
                    detail = f"{keys} all map onto {new_key}"
                    skip = KeySkip(entry.session_key, entry.session_id, "collision", detail)
                    planner.skipped.append(skip)
                    del moving[entry.session_key]


def _merge(
    groups: dict[str, list[SessionEntry]],
    entries: dict[str, SessionEntry],
    by_id: dict[str, SessionRecord],
) -> tuple[dict[str, EntryWrite], list[KeyMerge], dict[str, None]]:
    """The entry writes, merges and sessions to end that settle every group."""
    writes: dict[str, EntryWrite] = {}
    merges: list[KeyMerge] = []
    ends: dict[str, None] = {}
    for new_key, contenders in sorted(groups.items()):
        winner = max(contenders, key=lambda e: _live_first(by_id, e))
        if winner.session_key != new_key:
            current = entries.get(new_key)  # a losing occupant, or a key moving away
            revision = current.revision if current is not None else None
            moved = attrs.evolve(winner, session_key=new_key)
            writes[new_key] = EntryWrite(entry=moved, expected_revision=revision)
        losers = [e for e in contenders if e is not winner]
        ends.update((e.session_id, None) for e in losers if e.session_id != winner.session_id)
        if losers:
            merged = tuple(sorted((e.session_key, e.session_id) for e in losers))
            merges.append(KeyMerge(new_key, winner.session_id, merged))
    return writes, merges, ends


def _lanes(
    planner: _Planner,
    moving: dict[str, _Target],
    entries: dict[str, SessionEntry],
    records: list[SessionRecord],
    ends: dict[str, None],
) -> dict[str, str]:
    """Old key -> new key of every lane whose records move; ends open records merged away.

    An open record of a lane without an entry ends ``key_merged`` when its new key has an entry
    after the pass, or when another open record moving there was active later.
    """
    lanes = {key: target.new_key for key, target in moving.items()}
    routed = {t.new_key for t in moving.values()} | {k for k in entries if k not in moving}
    unrouted: dict[str, str | None] = {}
    arriving: dict[str, list[SessionRecord]] = {}
    for record in records:
        key = record.session_key
        if key is None or key in entries:  # a routed lane moves with its entry
            continue
        if key not in unrouted:  # each lane is read (and reported) once
            unrouted[key] = planner.lane_target(key, record)
        lane = unrouted[key]
        if lane is None:
            continue
        lanes[key] = lane
        if not record.is_ended:
            arriving.setdefault(lane, []).append(record)
    for lane, open_records in arriving.items():
        ordered = sorted(open_records, key=lambda r: (r.last_active, r.id))
        kept = [] if lane in routed else ordered[-1:]
        ends.update((r.id, None) for r in ordered if r not in kept)
    return lanes


def _ranks(
    lanes: dict[str, str],
    entries: dict[str, SessionEntry],
    by_id: dict[str, SessionRecord],
    records: list[SessionRecord],
) -> dict[str, Rank]:
    """The lane-state precedence of every contender: the collision rule's order.

    Routed lanes (an entry, moving or staying at a new key) rank by :func:`_live_first`, above
    every unrouted lane; unrouted lanes rank by their record active last.
    """
    ranks: dict[str, Rank] = {}
    for record in records:
        key = record.session_key
        if key in lanes and key not in entries:
            ranks[key] = max(ranks.get(key, ()), (0, record.last_active, record.id))
    for key in {*lanes, *lanes.values()}:
        if key in entries:
            ranks[key] = (1, *_live_first(by_id, entries[key]))
    return ranks


def plan_pass(
    backend: Backend,
    planner: _Planner,
    *,
    dry_run: bool,
    now: datetime,
) -> tuple[KeyMigrationReport, RotationPlan | None, LaneMoves]:
    """Read the store and work out the report and the plans of one pass (nothing is written)."""
    entries = {entry.session_key: entry for entry in backend.entries()}
    records = sorted(
        (item.record for item in backend.list_sessions(SessionQuery(limit=None)).items),
        key=lambda r: r.id,
    )
    by_id = {record.id: record for record in records}
    moving = {k: t for k, t in ((k, planner.target(e)) for k, e in entries.items()) if t}
    if planner.collisions == "refuse":
        _refuse(planner, moving, entries)
    writes, merges, ends = _merge(_groups(moving, entries), entries, by_id)
    deletes = [(key, entries[key].revision) for key in sorted(moving) if key not in writes]
    lanes = _lanes(planner, moving, entries, records, ends)
    rekeyed = [(r.id, lanes[r.session_key]) for r in records if r.session_key in lanes]
    live = {*entries, *(r.session_key for r in records if r.session_key is not None)}
    states = plan_lane_moves(backend, lanes, _ranks(lanes, entries, by_id, records), live)
    report = KeyMigrationReport(
        dry_run=dry_run,
        moved=tuple(
            KeyMove(key, target.new_key, target.entry.session_id, target.via)
            for key, target in sorted(moving.items())
        ),
        merged=tuple(merges),
        rekeyed=tuple(rekeyed),
        skipped=tuple(sorted(planner.skipped, key=lambda s: (s.key, s.reason))),
        unchanged=planner.unchanged,
        states_moved=states.moved,
    )
    if not (writes or deletes or rekeyed):
        return report, None, states
    plan = RotationPlan(
        at=now,
        delete=deletes,
        entries=list(writes.values()),
        rekey=rekeyed,
        end=[(session_id, KEY_MERGED) for session_id in ends],
    )
    return report, plan, states


def migrate_keys(
    store: SessionStore,
    old_policy: KeyPolicy,
    new_policy: KeyPolicy,
    *,
    dry_run: bool = True,
    remap: Callable[[SessionSource], SessionSource] | None = None,
    collisions: Collisions = "merge",
) -> KeyMigrationReport:
    """Move every key ``old_policy`` built to the key ``new_policy`` builds (a dry run by default).

    Entries move by their ``origin`` (or their key read back, when that is unambiguous), the
    records of each moved lane get the new ``session_key``, and keys that collide are merged
    (the session active last stays live, the others become ended history of the new key) or,
    with ``collisions="refuse"``, left alone. What cannot be worked out is reported in
    ``skipped``, never guessed. ``remap`` rewrites a source before the new key is built (a
    host's own chat-type vocabulary). Each moved lane's lane state moves to its new key (merged,
    the live session's values first, on a collision). The pass is one atomic plan, with the
    lane state written before and cleared after it; running it again is a no-op (or finishes
    a clear a crash interrupted). See ``docs/key-migration.md``.

    .. versionadded:: 0.1.0
    """
    if collisions not in ("merge", "refuse"):
        raise InvalidArgumentError(f"collisions must be 'merge' or 'refuse', got {collisions!r}")
    attempt = 1
    while True:
        planner = _Planner(
            old_policy, new_policy, remap or _same, collisions, incognito=store.is_incognito
        )
        backend = store.backend
        report, plan, states = plan_pass(backend, planner, dry_run=dry_run, now=store.clock.now())
        if dry_run:
            return report
        states.write_before(backend)
        try:
            if plan is not None:
                backend.apply(plan)
        except ConflictError:
            if attempt == _ATTEMPTS:
                raise
            attempt += 1
            continue
        states.write_after(backend)
        return report


def _same(source: SessionSource) -> SessionSource:
    return source
