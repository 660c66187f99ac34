"""Housekeeping: pruning old sessions, erasing a user, rebuilding lost routing entries.

These walk many sessions and are meant for maintenance jobs, not for the path of a turn.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import attrs

from hermes_sessions import serde
from hermes_sessions.exceptions import ConflictError
from hermes_sessions.keys import parse_session_key
from hermes_sessions.models import SessionEntry, SessionRecord, SessionSource
from hermes_sessions.protocols import SupportsScrub
from hermes_sessions.queries import SessionQuery

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from hermes_sessions.models import Message
    from hermes_sessions.protocols import Backend

__all__ = ["EraseReport", "PruneReport", "erase_user", "prune", "rebuild_routing"]


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

    user_id: str
    sessions: tuple[str, ...]
    """Sessions the user owned, deleted whole."""
    messages: int
    """Messages the user sent in other people's (shared) sessions, deleted."""
    entries: tuple[str, ...]
    """Routing keys removed."""


def _size(value: Message | SessionRecord) -> int:
    return len(json.dumps(serde.unstructure(value), ensure_ascii=False).encode())


def prune(
    backend: Backend, cutoff: datetime, *, dry_run: bool, sources: Sequence[str] | None
) -> PruneReport:
    """Delete ended sessions last active before ``cutoff`` that no key points to."""
    page = backend.list_sessions(
        SessionQuery(
            ended=True,
            active_before=cutoff,
            sources=tuple(sources) if sources is not None else None,
            limit=None,
        )
    )
    doomed: list[str] = []
    messages = 0
    size = 0
    for item in page.items:
        if backend.entries(session_id=item.record.id):
            continue
        transcript = backend.get_messages(item.record.id, include_inactive=True)
        doomed.append(item.record.id)
        messages += len(transcript)
        size += sum(_size(m) for m in transcript) + _size(item.record)
    if not dry_run:
        for session_id in doomed:
            backend.delete_session(session_id)
    return PruneReport(dry_run=dry_run, session_ids=tuple(doomed), messages=messages, bytes=size)


def erase_user(backend: Backend, user_id: str) -> EraseReport:
    """Delete the user's own sessions and their messages elsewhere; scrub the files if it can."""
    deleted_sessions: list[str] = []
    removed_keys: list[str] = []
    deleted_messages = 0
    for item in backend.list_sessions(SessionQuery(limit=None)).items:
        record = item.record
        transcript = backend.get_messages(record.id, include_inactive=True)
        senders = {m.sender_id for m in transcript} - {None, user_id}
        if record.user_id == user_id and not senders:
            for entry in backend.entries(session_id=record.id):
                _drop_entry(backend, entry)
                removed_keys.append(entry.session_key)
            backend.delete_session(record.id)
            deleted_sessions.append(record.id)
            continue
        sent = [m.id or 0 for m in transcript if m.sender_id == user_id]
        if sent:
            deleted_messages += backend.delete_messages(record.id, sent)
        if record.user_id == user_id:
            backend.update_session(record.id, values={"user_id": None})
    if isinstance(backend, SupportsScrub):
        backend.scrub()
    return EraseReport(
        user_id=user_id,
        sessions=tuple(sorted(deleted_sessions)),
        messages=deleted_messages,
        entries=tuple(sorted(removed_keys)),
    )


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
