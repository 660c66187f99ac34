"""Housekeeping: pruning old sessions, erasing a user, rebuilding lost routing entries.

These walk many sessions and are meant for maintenance jobs, not for the path of a turn.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol

import attrs

from hermes_sessions.clock import require_aware
from hermes_sessions.exceptions import ConflictError, InvalidArgumentError, LockTimeoutError
from hermes_sessions.keys import parse_session_key
from hermes_sessions.models import SessionEntry, SessionRecord, SessionSource
from hermes_sessions.protocols import SupportsScrub, SupportsUserKeys
from hermes_sessions.queries import SessionQuery
from hermes_sessions.state import DELETE, StateScope
from hermes_sessions.store._retention import RetentionPolicy, busy_keys, enforce, lifecycle_of

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from datetime import timedelta

    from hermes_sessions.protocols import Backend
    from hermes_sessions.store._session_store import SessionStore

__all__ = [
    "EraseReport",
    "ErasedMemory",
    "MemoryEraser",
    "PruneReport",
    "erase_memory",
    "erase_user",
    "erase_user_of",
    "prune",
    "rebuild_routing",
]


class ErasedMemory(Protocol):
    """What a memory erasure reports (``hermes_sessions.memory.MemoryEraseReport``)."""

    @property
    def entries(self) -> int:
        """Entries attributed to the user, removed."""

    @property
    def profiles(self) -> tuple[str, ...]:
        """Profiles removed."""

    @property
    def files(self) -> tuple[str, ...]:
        """Files changed or deleted."""


class MemoryEraser(Protocol):
    """Memory that erases a user (``hermes_sessions.memory.ScopedMemory``).

    .. versionadded:: 0.1.0
    """

    def erase_user(
        self,
        platform: str,
        *user_ids: str,
        lane_keys: Sequence[str] = (),
        dry_run: bool = False,
    ) -> ErasedMemory:
        """Remove the user's profiles, their entries, and the notes of ``lane_keys``."""


@attrs.frozen(kw_only=True)
class PruneReport:
    """What :meth:`SessionStore.prune` deleted, or would delete with ``dry_run``.

    .. versionadded:: 0.1.0
    """

    dry_run: bool
    session_ids: tuple[str, ...]
    messages: int
    bytes: int
    """Approximate size of the deleted data (its JSON encoding)."""


@attrs.frozen(kw_only=True)
class EraseReport:
    """What :meth:`SessionStore.erase_user` removed.

    .. versionadded:: 0.1.0
    """

    dry_run: bool
    """True when nothing was changed: the report says what would go."""
    platform: str
    user_ids: tuple[str, ...]
    """The ids asked for (canonical id and ``user_id_alt`` both)."""
    sessions: tuple[str, ...]
    """Sessions the user owned, deleted whole."""
    messages: int
    """Messages the user sent in sessions shared with others, deleted."""
    entries: tuple[str, ...]
    """Routing keys removed (with the sessions they pointed at)."""
    cleared: tuple[str, ...]
    """Sessions and keys that stay but had the user's id or names removed from them."""
    unmatched: tuple[str, ...]
    """Ids of ``user_ids`` that matched nothing (check the platform and the id form)."""
    state: tuple[str, ...] = ()
    """State scopes emptied: the user's (in the store's app) and those of the removed keys."""
    scrubbed: bool
    """Whether the files were scrubbed too (see ``scrub_hint`` when not)."""
    scrub_hint: str | None = None
    """What to do to finish when ``scrubbed`` is false."""
    keys_destroyed: int = 0
    """Per-user keys destroyed (an encrypted store with ``user_keys=``, ``docs/privacy.md``)."""
    memory_entries: int = 0
    """Memory entries attributed to the user, removed (``erase_user(..., memory=...)``)."""
    memory_profiles: tuple[str, ...] = ()
    """Memory profiles removed (``user:<platform>:<id>``)."""
    memory_files: tuple[str, ...] = ()
    """Memory files changed or deleted, backups included."""


def erase_user_of(
    store: SessionStore,
    platform: str,
    *user_ids: str,
    dry_run: bool = False,
    memory: MemoryEraser | None = None,
) -> EraseReport:
    """Erase one user of one platform (right to erasure): pass all their ids there.

    Their sessions, keys, messages, ids, names and user state go; then the files are scrubbed.
    With ``memory`` (a ``ScopedMemory``), their memory profiles, the entries they wrote in every
    scope and the notes of the keys removed go too (``memory_*`` in the report).
    """
    report = erase_user(
        store.backend, platform, user_ids, dry_run=dry_run, app_id=store.keys.namespace
    )
    return erase_memory(report, memory, dry_run=dry_run)


def erase_memory(report: EraseReport, memory: MemoryEraser | None, *, dry_run: bool) -> EraseReport:
    """Erase the user from ``memory`` too: their profiles, entries, and the erased keys' notes."""
    if memory is None:
        return report
    erased = memory.erase_user(
        report.platform, *report.user_ids, lane_keys=report.entries, dry_run=dry_run
    )
    return attrs.evolve(
        report,
        memory_entries=erased.entries,
        memory_profiles=erased.profiles,
        memory_files=erased.files,
    )


def prune(
    store: SessionStore,
    older_than: timedelta | datetime,
    *,
    dry_run: bool,
    sources: Sequence[str] | None,
    busy: Callable[[str], bool] | None = None,
) -> PruneReport:
    """Delete ended sessions last active before the cutoff: the retention engine's age rule."""
    now = store.clock.now()
    if isinstance(older_than, datetime):
        cutoff = require_aware(older_than, "prune(older_than)")
    else:
        cutoff = now - older_than
    report = enforce(
        store.backend,
        RetentionPolicy(sources=sources),
        now=now,
        dry_run=dry_run,
        busy=busy_keys(store, busy),
        cutoff=cutoff,
        lease_ttl=store.lease_ttl,
        lifecycle=lifecycle_of(store),
    )
    return PruneReport(
        dry_run=dry_run,
        session_ids=report.session_ids,
        messages=report.messages,
        bytes=report.bytes,
    )


def erase_user(  # noqa: C901, PLR0912  # one walk decides and (unless dry_run) erases
    backend: Backend,
    platform: str,
    user_ids: Sequence[str],
    *,
    dry_run: bool = False,
    app_id: str = "main",
) -> EraseReport:
    """Erase one user of one platform: owned sessions, sent messages, ids and names; scrub."""
    if not user_ids:
        raise InvalidArgumentError("erase_user needs at least one user id after the platform")
    ids = frozenset(user_ids)
    matched: set[str] = set()
    deleted: list[str] = []
    removed_keys: list[str] = []
    cleared: list[str] = []
    messages = 0
    for item in backend.list_sessions(SessionQuery(sources=(platform,), limit=None)).items:
        record = item.record
        transcript = backend.get_messages(record.id, include_inactive=True)
        mine = [m.id or 0 for m in transcript if m.sender_id in ids]
        matched.update(m.sender_id for m in transcript if m.sender_id in ids)
        others = {m.sender_id for m in transcript} - {None} - ids
        if record.user_id in ids:
            matched.add(record.user_id)
            if not others:
                for entry in backend.entries(session_id=record.id):
                    matched.update(_ids_of(entry.origin) & ids)
                    if not dry_run:
                        _drop_entry(backend, entry)
                    removed_keys.append(entry.session_key)
                if not dry_run:
                    backend.delete_session(record.id)
                deleted.append(record.id)
                continue
            if not dry_run:
                backend.update_session(record.id, values={"user_id": None})
            cleared.append(record.id)
        if mine:
            messages += len(mine) if dry_run else backend.delete_messages(record.id, mine)
    for entry in backend.entries():
        if entry.platform == platform and _names_user(entry.origin, ids):
            matched.update(_ids_of(entry.origin) & ids)
            if entry.session_key in removed_keys:
                continue
            if not dry_run:
                _forget_origin(backend, entry, ids)
            cleared.append(entry.session_key)
    scopes = [StateScope.user(app_id, platform, i).id for i in user_ids]
    state = _empty_scopes(backend, scopes + [StateScope.lane(k).id for k in removed_keys], dry_run)
    matched.update(i for i, scope in zip(user_ids, scopes, strict=True) if scope in state)
    destroyed = 0
    if not dry_run and isinstance(backend, SupportsUserKeys):
        destroyed = backend.destroy_user_keys(platform, user_ids)  # what they sealed is gone
    scrubbed, hint = (False, "a dry run changes nothing") if dry_run else _scrub(backend)
    return EraseReport(
        dry_run=dry_run,
        platform=platform,
        user_ids=tuple(user_ids),
        sessions=tuple(sorted(deleted)),
        messages=messages,
        entries=tuple(sorted(removed_keys)),
        cleared=tuple(sorted(set(cleared))),
        unmatched=tuple(i for i in user_ids if i not in matched),
        state=state,
        scrubbed=scrubbed,
        scrub_hint=hint,
        keys_destroyed=destroyed,
    )


def _empty_scopes(backend: Backend, scope_ids: Sequence[str], dry_run: bool) -> tuple[str, ...]:  # noqa: FBT001
    """Remove every key of the scopes that hold state; return which ones did."""
    found = backend.get_state(scope_ids)
    if found and not dry_run:
        backend.update_state(
            {scope: dict.fromkeys(value, DELETE) for scope, value in found.items()}
        )
    return tuple(sorted(found))


def _ids_of(origin: SessionSource | None) -> set[str]:
    if origin is None:
        return set()
    return {i for i in (origin.user_id, origin.user_id_alt) if i is not None}


def _names_user(origin: SessionSource | None, ids: frozenset[str]) -> bool:
    return bool(_ids_of(origin) & ids)


def _forget_origin(backend: Backend, entry: SessionEntry, ids: frozenset[str]) -> None:
    """Remove the user's ids and names from an entry that stays (a shared thread they began)."""
    current: SessionEntry | None = entry
    while current is not None and _names_user(current.origin, ids):
        assert current.origin is not None  # noqa: S101  # _names_user checked it
        origin = attrs.evolve(current.origin, user_id=None, user_id_alt=None, user_name=None)
        changed = attrs.evolve(current, origin=origin, display_name=origin.chat_name)
        try:
            backend.put_entry(changed, expected_revision=current.revision)
        except ConflictError:
            current = backend.get_entry(current.session_key)
        else:
            return


def _scrub(backend: Backend) -> tuple[bool, str | None]:
    """Scrub the backend's files if it can; ``(done, what to do if not)``."""
    if not isinstance(backend, SupportsScrub):
        return False, (
            f"{type(backend).__name__} cannot scrub its storage: deleted rows may survive until "
            "its own maintenance (for PostgreSQL, VACUUM the hermes-sessions tables)"
        )
    try:
        backend.scrub()
    except LockTimeoutError as error:
        return False, (
            f"the files could not be scrubbed yet ({error}); a reader still holds old pages: "
            "run `hermes-sessions optimize --scrub` (or the backend's scrub()) when it is idle"
        )
    return True, None


def _drop_entry(backend: Backend, entry: SessionEntry) -> None:
    current: SessionEntry | None = entry
    while current is not None:
        try:
            backend.delete_entry(current.session_key, expected_revision=current.revision)
        except ConflictError:
            current = backend.get_entry(current.session_key)
        else:
            return


def rebuild_routing(backend: Backend) -> int:
    """Give every key without an entry its most recently active open session again."""
    best: dict[str, SessionRecord] = {}
    for item in backend.list_sessions(SessionQuery(ended=False, limit=None)).items:
        record = item.record
        if record.session_key is None:
            continue
        current = best.get(record.session_key)
        if current is None or record.last_active > current.last_active:
            best[record.session_key] = record
    created = 0
    for key, record in sorted(best.items()):
        if backend.get_entry(key) is not None:
            continue
        try:
            backend.put_entry(_rebuilt_entry(key, record), expected_revision=None)
        except ConflictError:
            continue
        created += 1
    return created


def _rebuilt_entry(key: str, record: SessionRecord) -> SessionEntry:
    parsed = parse_session_key(key)
    source = SessionSource(
        platform=parsed.platform, chat_type=parsed.chat_type, user_id=record.user_id
    )
    return SessionEntry(
        session_key=key,
        session_id=record.id,
        created_at=record.started_at,
        updated_at=record.last_active,
        origin=source,
        platform=source.platform,
        chat_type=source.chat_type,
    )
