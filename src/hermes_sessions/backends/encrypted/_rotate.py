"""Key rotation: re-encrypt, value by value, what is not under the current data key.

Every rewrite is one ordinary atomic write of the inner backend (an entry compare-and-swap, a
session update, a message replace, a state merge), and a value already under the current key is
left alone, so rotation can be interrupted at any point and simply run again. The token key is
not rotated: hashes in the index and titles stay valid.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from hermes_sessions.backends.encrypted._codec import SEALED, TITLE
from hermes_sessions.cipher import envelope_key_id, is_envelope
from hermes_sessions.exceptions import ConflictError, EncryptionKeyError
from hermes_sessions.queries import SessionQuery
from hermes_sessions.state import StateScope

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

    from hermes_sessions.backends.encrypted._backend import EncryptedBackend
    from hermes_sessions.cipher import KeyProvider
    from hermes_sessions.models import Message, SessionEntry, SessionRecord

__all__ = ["ChainedKeys", "RotationProgress", "rotate_key"]


@attrs.frozen(kw_only=True)
class RotationProgress:
    """How far a :meth:`~EncryptedBackend.rotate_key` run is (yielded after every session).

    .. versionadded:: 0.1.0
    """

    sessions_done: int
    sessions_total: int
    entries_rewritten: int
    records_rewritten: int
    messages_rewritten: int
    scopes_rewritten: int

    @property
    def finished(self) -> bool:
        """Whether every session has been visited."""
        return self.sessions_done == self.sessions_total


class ChainedKeys:
    """The new provider's keys first (its current key is current), then the old ones.

    .. versionadded:: 0.1.0
    """

    def __init__(self, new: KeyProvider, old: KeyProvider) -> None:
        self.new = new
        self.old = old

    def current(self) -> tuple[str, bytes]:
        """The new provider's current key."""
        return self.new.current()

    def key(self, key_id: str) -> bytes:
        """The key of ``key_id`` from the new provider, else the old one."""
        try:
            return self.new.key(key_id)
        except EncryptionKeyError:
            return self.old.key(key_id)


def _stale(values: Iterable[Any], current: str) -> bool:
    return any(is_envelope(value) and envelope_key_id(value) != current for value in values)


def _entry_stale(entry: SessionEntry, current: str) -> bool:
    origin = None if entry.origin is None else entry.origin.chat_id
    return _stale((origin, entry.display_name, entry.resume_reason), current)


def _record_stale(record: SessionRecord, current: str) -> bool:
    return _stale(
        (
            record.system_prompt,
            record.metadata.get(SEALED),
            record.metadata.get(TITLE),
            record.model_config.get(SEALED),
        ),
        current,
    )


def _message_stale(message: Message, current: str) -> bool:
    return _stale((message.extra.get(SEALED),), current)


def _rotate_entries(backend: EncryptedBackend, current: str) -> int:
    rewritten = 0
    for stored in backend.inner.entries():
        if not _entry_stale(stored, current):
            continue
        entry = backend.codec.open_entry(stored)
        try:
            backend.inner.put_entry(
                backend.codec.seal_entry(entry), expected_revision=stored.revision
            )
        except ConflictError:
            continue  # written meanwhile, under the current key; a rerun checks again
        rewritten += 1
    return rewritten


def _rotate_scopes(backend: EncryptedBackend, scope_ids: Sequence[str], current: str) -> int:
    rewritten = 0
    for scope_id, values in backend.inner.get_state(scope_ids).items():
        stale = [key for key, value in values.items() if _stale((value,), current)]
        if stale:
            opened = backend.codec.open_state({scope_id: {key: values[key] for key in stale}})
            backend.update_state(opened)
            rewritten += 1
    return rewritten


def rotate_key(
    backend: EncryptedBackend, new: KeyProvider | None = None, *, scopes: Sequence[str] = ()
) -> Iterator[RotationProgress]:
    """Re-encrypt every value not under the current key; yield progress after each session.

    With ``new``, the cipher's provider becomes ``ChainedKeys(new, old)``: ``new``'s current
    key writes, and old keys still read until the run has finished. Session scopes and the lane
    scopes of every key are visited; pass other scope ids (``StateScope.app(...).id``, user
    scopes) in ``scopes``. Safe to interrupt and run again.

    .. versionadded:: 0.1.0
    """
    if new is not None:
        backend.cipher.use_keys(ChainedKeys(new, backend.cipher.keys))
    return _run(backend, scopes)


def _run(backend: EncryptedBackend, scopes: Sequence[str]) -> Iterator[RotationProgress]:
    current = backend.cipher.current_key_id
    codec = backend.codec
    entries = _rotate_entries(backend, current)
    lanes = [StateScope.lane(entry.session_key).id for entry in backend.inner.entries()]
    scopes_rewritten = _rotate_scopes(backend, [*lanes, *scopes], current)
    sessions = backend.inner.list_sessions(SessionQuery(limit=None)).items
    records = messages = 0
    if not sessions:
        yield RotationProgress(
            sessions_done=0,
            sessions_total=0,
            entries_rewritten=entries,
            records_rewritten=0,
            messages_rewritten=0,
            scopes_rewritten=scopes_rewritten,
        )
    for done, item in enumerate(sessions, start=1):
        session_id = item.record.id
        stored = backend.inner.get_session(session_id)
        if stored is not None and _record_stale(stored, current):
            record = codec.open_record(stored)
            backend.update_session(
                session_id,
                values={
                    "title": record.title,
                    "metadata": record.metadata,
                    "system_prompt": record.system_prompt,
                    "model_config": record.model_config,
                },
            )
            records += 1
        for message in backend.inner.get_messages(session_id, include_inactive=True):
            if message.id is not None and _message_stale(message, current):
                opened = codec.open_message(message)
                backend.inner.replace_message(session_id, message.id, codec.seal_message(opened))
                messages += 1
        scopes_rewritten += _rotate_scopes(backend, [StateScope.session(session_id).id], current)
        yield RotationProgress(
            sessions_done=done,
            sessions_total=len(sessions),
            entries_rewritten=entries,
            records_rewritten=records,
            messages_rewritten=messages,
            scopes_rewritten=scopes_rewritten,
        )
