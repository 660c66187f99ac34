"""Key rotation and encrypting a plain store: re-seal, value by value, what is not current.

Both walk the whole store by themselves: every routing entry, every state scope (the inner
backend lists them: :class:`~hermes_sessions.protocols.SupportsStateScopes`), every session
record and every message, active or not. A value already sealed under the current key is left
alone; one under another key (rotation), or in the clear (:func:`encrypt_store`), is opened and
sealed anew for its place. Every rewrite is one ordinary atomic write of the inner backend (an
entry compare-and-swap, a session update, a message replace, a state merge), so a run can be
interrupted at any point and simply run again. After the last session a verification pass
reads everything again: the run is ``finished`` only when it finds nothing left (a process that
still wrote under the old key meanwhile makes it report what remains; run it again). The token
key is not rotated: hashes in the index and titles stay valid.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import attrs

from hermes_sessions.backends.encrypted._codec import RESERVED_SCOPES, SEALED, STORE, TITLE
from hermes_sessions.backends.encrypted._ledger import open_row, seal_row
from hermes_sessions.backends.encrypted._marker import mark_sealed, open_marker
from hermes_sessions.backends.encrypted._userkeys import is_user_key
from hermes_sessions.cipher import STORE_SCOPE, envelope_key_id, is_envelope
from hermes_sessions.exceptions import ConflictError, EncryptionKeyError, InvalidArgumentError
from hermes_sessions.ledger import INBOUND, OUTBOUND
from hermes_sessions.protocols import SupportsLedger, SupportsScrub, SupportsStateScopes
from hermes_sessions.queries import SessionQuery
from hermes_sessions.state import DELETE
from hermes_sessions.titles import lineage_key

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from hermes_sessions.backends.encrypted._backend import EncryptedBackend as _Wrapper
    from hermes_sessions.backends.encrypted._userkeys import UserKeys
    from hermes_sessions.cipher import Cipher, KeyProvider
    from hermes_sessions.ledger import LedgerRow
    from hermes_sessions.models import Message, SessionEntry, SessionRecord
    from hermes_sessions.protocols import SearchableBackend

_RESEAL_PASSES = 3  # a writer racing an erasure can leave a value: go again, a few times
_HASHED = re.compile("[a-p]{16}")  # a title's lineage base as the codec stores it

__all__ = [
    "ChainedKeys",
    "RotationProgress",
    "clear_title",
    "encrypt_store",
    "reseal_away",
    "rotate_key",
    "scope_ids",
    "stale_values",
]


@attrs.frozen(kw_only=True)
class RotationProgress:
    """How far a :meth:`~EncryptedBackend.rotate_key` or :func:`encrypt_store` run is.

    Yielded after the entries and state scopes, after every session, and once more after the
    verification pass, whose ``remaining`` says how many values are still not sealed under the
    current key (``None`` before it).

    .. versionadded:: 0.1.0
    """

    sessions_done: int
    sessions_total: int
    entries_visited: int = 0
    scopes_visited: int = 0
    messages_visited: int = 0
    entries_rewritten: int
    records_rewritten: int
    messages_rewritten: int
    scopes_rewritten: int
    ledger_rewritten: int = 0
    """Turn-ledger rows sealed anew (``hermes_sessions.ledger``)."""
    remaining: int | None = None
    """Values the verification pass found still not under the current key (``None``: not yet)."""

    @property
    def finished(self) -> bool:
        """Whether the run has verified that nothing is left under another key (or in clear)."""
        return self.remaining == 0


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


class _Values:
    """Which stored values need sealing anew: under another key, or (converting) in the clear.

    With ``doomed`` (per-user keys about to be destroyed), exactly the values under those keys.
    A value under a per-user key is otherwise current: rotation re-wraps the user keys instead.
    """

    def __init__(self, current: str, *, plain: bool, doomed: frozenset[str] = frozenset()) -> None:
        self.current = current
        self.plain = plain
        self.doomed = doomed

    def stale(self, value: Any) -> bool:
        """Whether one stored field value needs sealing anew (``None`` never does)."""
        if value is None:
            return False
        if is_envelope(value):
            key_id = envelope_key_id(value)
            if self.doomed:
                return key_id in self.doomed
            return key_id != self.current and not is_user_key(key_id)
        return self.plain

    def any_stale(self, values: Iterable[Any]) -> bool:
        return any(self.stale(value) for value in values)

    def entry(self, entry: SessionEntry) -> bool:
        origin = entry.origin
        if origin is not None and origin.chat_id is None and self.plain:
            return origin != type(origin)(platform=origin.platform, chat_type=origin.chat_type)
        chat = None if origin is None else origin.chat_id
        return self.any_stale((chat, entry.display_name, entry.resume_reason))

    def record(self, record: SessionRecord) -> bool:
        sealed_keys = {SEALED, TITLE, STORE}
        if self.plain and (
            set(record.metadata) - sealed_keys
            or set(record.model_config) - {SEALED}
            or clear_title(record)
        ):
            return True
        return self.any_stale(
            (
                record.system_prompt,
                record.metadata.get(SEALED),
                record.metadata.get(TITLE),
                record.model_config.get(SEALED),
            )
        )

    def message(self, message: Message) -> bool:
        sealed = message.extra.get(SEALED)
        if not is_envelope(sealed):
            return self.plain and not self.doomed
        return self.stale(sealed)


def scope_ids(inner: SearchableBackend) -> list[str]:
    if not isinstance(inner, SupportsStateScopes):
        raise InvalidArgumentError(
            f"{inner!r} cannot list its state scopes (SupportsStateScopes), so a run could not "
            "find every value: give the backend a state_scopes() method"
        )
    return [scope for scope in inner.state_scopes() if not scope.startswith(RESERVED_SCOPES)]


class _Run:
    """One pass over the store, counting what it visits and rewrites."""

    def __init__(self, backend: _Wrapper, values: _Values) -> None:
        self.backend = backend
        self.values = values
        self.progress = RotationProgress(
            sessions_done=0,
            sessions_total=0,
            entries_rewritten=0,
            records_rewritten=0,
            messages_rewritten=0,
            scopes_rewritten=0,
        )

    def count(self, **more: int) -> None:
        changes = {name: getattr(self.progress, name) + n for name, n in more.items()}
        self.progress = attrs.evolve(self.progress, **changes)

    def entries(self) -> None:
        backend, rewritten = self.backend, 0
        stored_entries = backend.inner.entries()
        for stored in stored_entries:
            if not self.values.entry(stored):
                continue
            entry = stored if not self._sealed_entry(stored) else backend.codec.open_entry(stored)
            try:
                backend.inner.put_entry(
                    backend.codec.seal_entry(entry), expected_revision=stored.revision
                )
            except ConflictError:
                continue  # written meanwhile, under the current key; the verification checks
            rewritten += 1
        self.count(entries_visited=len(stored_entries), entries_rewritten=rewritten)

    @staticmethod
    def _sealed_entry(entry: SessionEntry) -> bool:
        origin = entry.origin
        chat = None if origin is None else origin.chat_id
        return any(is_envelope(v) for v in (chat, entry.display_name, entry.resume_reason))

    def scopes(self, scope_ids: list[str]) -> None:
        backend, rewritten = self.backend, 0
        for scope_id, stored in backend.inner.get_state(scope_ids).items():
            stale = {key: value for key, value in stored.items() if self.values.stale(value)}
            if not stale:
                continue
            sealed = {k: v for k, v in stale.items() if is_envelope(v)}
            opened = backend.codec.open_state({scope_id: sealed}).get(scope_id, {})
            plain = {k: v for k, v in stale.items() if not is_envelope(v)}
            backend.update_state({scope_id: {**plain, **opened}})
            rewritten += 1
        self.count(scopes_visited=len(scope_ids), scopes_rewritten=rewritten)

    def ledger(self) -> None:
        """Seal anew the turn ledger's rows sealed under another key (rotation only)."""
        backend, rewritten = self.backend, 0
        if self.values.doomed:  # erasure: the users' rows go with their sessions
            return
        for stored in _ledger_rows(backend):
            if not self.values.stale(stored.data.get(SEALED)):
                continue
            resealed = seal_row(backend, open_row(backend, stored))
            data = {**resealed.data, **{k: v for k, v in stored.data.items() if k != SEALED}}
            try:
                backend.inner.ledger_write(  # type: ignore[attr-defined]  # SupportsLedger
                    stored.session_id, [attrs.evolve(resealed, data=data, version=stored.version)]
                )
            except ConflictError:
                continue  # changed meanwhile, under the current key; the verification checks
            rewritten += 1
        self.count(ledger_rewritten=rewritten)

    def session(self, session_id: str) -> None:
        backend, codec = self.backend, self.backend.codec
        stored = backend.inner.get_session(session_id)
        if stored is None:
            return  # deleted meanwhile
        if self.values.record(stored):
            record = stored if not _sealed_record(stored) else codec.open_record(stored)
            if clear_title(stored):  # written in the clear after the envelope: the newer one
                record = attrs.evolve(record, title=stored.title)
            backend.update_session(
                session_id,
                values={
                    "title": record.title,
                    "metadata": record.metadata,
                    "system_prompt": record.system_prompt,
                    "model_config": record.model_config,
                },
            )
            self.count(records_rewritten=1)
        messages = backend.inner.get_messages(session_id, include_inactive=True)
        rewritten = 0
        for message in messages:
            message_id = message.id
            if message_id is None or not self.values.message(message):
                continue
            if is_envelope(message.extra.get(SEALED)):
                message = codec.open_message(message, session_id)  # noqa: PLW2901  # opened
            sealed = codec.seal_message(message, session_id, backend.session_owner(session_id))
            backend.inner.replace_message(session_id, message_id, sealed)
            rewritten += 1
        self.count(messages_visited=len(messages), messages_rewritten=rewritten)


def clear_title(record: SessionRecord) -> bool:
    """Whether a stored title is not the keyed hash of a sealed one (written in the clear)."""
    title = record.title
    return title is not None and _HASHED.fullmatch(lineage_key(title)) is None


def _sealed_record(record: SessionRecord) -> bool:
    values = (record.system_prompt, record.metadata.get(SEALED), record.model_config.get(SEALED))
    return any(is_envelope(v) for v in values) or bool({TITLE, STORE} & set(record.metadata))


def stale_values(
    backend: _Wrapper, *, plain: bool = True, doomed: frozenset[str] = frozenset()
) -> list[str]:
    """Where a value is not sealed under the current key (or, with ``plain``, is in the clear).

    Reads the whole store; each item names the place (``entry <key>``, ``session <id>``,
    ``message <session>/<id>``, ``state <scope>``, ``user key <id>``).
    """
    values = _Values(backend.cipher.current_key_id, plain=plain, doomed=doomed)
    inner = backend.inner
    found = [f"entry {e.session_key}" for e in inner.entries() if values.entry(e)]
    for scope_id, stored in inner.get_state(scope_ids(inner)).items():
        found.extend(f"state {scope_id} {k}" for k, v in stored.items() if values.stale(v))
    for item in inner.list_sessions(SessionQuery(limit=None)).items:
        session_id = item.record.id
        if values.record(item.record):
            found.append(f"session {session_id}")
        found.extend(
            f"message {session_id}/{m.id}"
            for m in inner.get_messages(session_id, include_inactive=True)
            if values.message(m)
        )
    if not doomed:
        found.extend(
            f"ledger {row.kind} {row.id}"
            for row in _ledger_rows(backend)
            if values.stale(row.data.get(SEALED))
        )
    if backend.user_keys is not None and not doomed:
        found.extend(f"user key {key_id}" for key_id in backend.user_keys.stale())
    return found


def _ledger_rows(backend: _Wrapper) -> list[LedgerRow]:
    """The inner backend's turn-ledger rows as stored (none without ``SupportsLedger``)."""
    inner = backend.inner
    if not isinstance(inner, SupportsLedger):
        return []
    return [row for kind in (INBOUND, OUTBOUND) for row in inner.ledger_rows(kind)]


def _walk(
    backend: _Wrapper, *, plain: bool, doomed: frozenset[str] = frozenset()
) -> Iterator[RotationProgress]:
    run = _Run(backend, _Values(backend.cipher.current_key_id, plain=plain, doomed=doomed))
    scopes = scope_ids(backend.inner)
    if backend.user_keys is not None and not doomed:
        backend.user_keys.rewrap()  # each user key, wrapped under the current data key
    sessions = [i.record.id for i in backend.inner.list_sessions(SessionQuery(limit=None)).items]
    run.count(sessions_total=len(sessions))
    run.entries()
    run.scopes(scopes)
    run.ledger()
    yield run.progress
    for session_id in sessions:
        run.session(session_id)
        run.count(sessions_done=1)
        yield run.progress
    remaining = len(stale_values(backend, plain=plain, doomed=doomed))
    if remaining == 0 and not doomed:
        _drop_old_canaries(backend)
    yield attrs.evolve(run.progress, remaining=remaining)


def _drop_old_canaries(backend: _Wrapper) -> None:
    """Once nothing is sealed under another key, its canary goes too."""
    current = backend.cipher.current_key_id
    stored = backend.inner.get_state([STORE_SCOPE]).get(STORE_SCOPE, {})
    old = [name for name in stored if name.startswith("canary:") and name != f"canary:{current}"]
    if old:
        backend.inner.update_state({STORE_SCOPE: dict.fromkeys(old, DELETE)})


def reseal_away(backend: _Wrapper, doomed: set[str]) -> None:
    """Seal anew, under the data key, every value still under the per-user keys ``doomed``."""
    keys = backend.user_keys
    assert keys is not None  # noqa: S101  # called with per-user keys only
    keys.retiring.update(doomed)
    try:
        for _ in range(_RESEAL_PASSES):
            *_, last = _walk(backend, plain=False, doomed=frozenset(doomed))
            if last.finished:
                return
    finally:
        keys.retiring.difference_update(doomed)


def rotate_key(backend: _Wrapper, new: KeyProvider | None = None) -> Iterator[RotationProgress]:
    """Re-seal every value not under the current key; yield progress as it goes.

    With ``new``, the cipher's provider becomes ``ChainedKeys(new, old)``: ``new``'s current
    key writes, and old keys still read until the run has finished. Every entry, state scope,
    record and message is found and visited; the last progress (``finished`` when the
    verification found nothing left) says how many values remain. Safe to interrupt and run
    again.

    .. versionadded:: 0.1.0
    """
    if new is not None:
        backend.cipher.use_keys(ChainedKeys(new, backend.cipher.keys))
        user_keys = backend.user_keys is not None
        open_marker(backend.inner, backend.cipher, user_keys=user_keys)  # the new key's canary
    return _walk(backend, plain=False)


def encrypt_store(
    inner: SearchableBackend, cipher: Cipher, *, user_keys: UserKeys | None = None
) -> Iterator[RotationProgress]:
    """Encrypt a plain store in place; yield progress; safe to interrupt and run again.

    The store is first marked as being encrypted (from then on, opening it plain or encrypted
    is refused with ``EncryptionMismatchError(reason="unfinished")``), then every value is
    sealed for its place, as :func:`rotate_key` does; when the verification pass finds nothing
    left in the clear, the inner backend's ``scrub()`` (SQLite, JSONL) removes the old clear
    text from its files, the store is marked encrypted and the last progress is ``finished``.
    PostgreSQL keeps old row versions until ``VACUUM``: run ``VACUUM FULL`` on its tables
    after. Stop every process that writes to the store first. ``inner`` stays open. With
    ``user_keys``, users' content is sealed under their own keys as it is converted.

    .. versionadded:: 0.1.0
    """
    from hermes_sessions.backends.encrypted._backend import (  # noqa: PLC0415  # it imports us
        EncryptedBackend as Wrapper,
    )

    marker = open_marker(inner, cipher, sealing=True, user_keys=user_keys is not None)
    backend = Wrapper._over_marker(inner, cipher, marker, user_keys)  # noqa: SLF001  # its own
    for progress in _walk(backend, plain=True):
        if progress.finished:
            if isinstance(inner, SupportsScrub):
                inner.scrub()  # the clear text of the rewritten values leaves the files too
            mark_sealed(inner)
        yield progress
