"""The record an encrypted store keeps of itself: its id, its state and one canary per key id.

The record is the state scope :data:`~hermes_sessions.cipher.STORE_SCOPE`, in the clear (it
holds no content), so a plain reader sees that the store is encrypted
(:func:`~hermes_sessions.cipher.require_plain_store`). Its values:

* ``store_id``: 22 random URL-safe characters drawn when the store is created; every envelope's
  associated data starts with it, so a ciphertext copied from another store does not open;
* ``state``: ``sealed``, or ``sealing`` while :func:`encrypt_store` converts a plain store;
* ``canary:<key id>``: a fixed text sealed under that key for this store. Opening the store
  opens the canary of every key id the provider holds: a wrong key under the right id fails
  here, at open, before anything is written under it. The current key's canary is added the
  first time a key id is used;
* ``token``: the keyed hash of the store id under the token key, which catches a wrong token
  key (it would silently break search and titles) the same way;
* ``user_keys``: ``true`` once the store was opened with per-user keys (``_userkeys``): it is
  refused without them from then on.

A store with no record is created encrypted only when it is empty (no entry, session or state).
One with data is a plain store and is refused, unless its session records carry the store id
(every sealed record does, in the clear): then the record was lost (a JSONL ``repair()`` after
losing the journal and snapshot loses state) and is written again, once the current key opens
such a record. Two processes creating the same store take a lease first, so exactly one store
id is drawn.
"""

from __future__ import annotations

import base64
import os
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

import attrs

from hermes_sessions.backends.encrypted._codec import STORE, Codec
from hermes_sessions.cipher import STORE_SCOPE
from hermes_sessions.exceptions import (
    DecryptionError,
    EncryptionKeyError,
    EncryptionMismatchError,
    LockTimeoutError,
)
from hermes_sessions.protocols import SupportsStateScopes
from hermes_sessions.queries import SessionQuery

if TYPE_CHECKING:
    from hermes_sessions.cipher import Cipher
    from hermes_sessions.protocols import Backend

__all__ = [
    "CANARY",
    "SEALED_STATE",
    "SEALING_STATE",
    "StoreMarker",
    "canary_context",
    "mark_sealed",
    "open_marker",
]

CANARY: Final = "hermes-sessions canary"
"""The text every canary holds."""
SEALED_STATE: Final = "sealed"
SEALING_STATE: Final = "sealing"
_CANARY_PREFIX: Final = "canary:"
_LEASE: Final = "hermes:encryption-marker"
_LEASE_TTL: Final = timedelta(seconds=30)
_WAIT: Final = 0.02
_WAIT_LIMIT: Final = 60.0


@attrs.frozen
class StoreMarker:
    """What :data:`STORE_SCOPE` holds."""

    store_id: str
    state: str
    canaries: dict[str, str]
    token: str
    user_keys: bool = False
    """Whether the store seals users' content under per-user keys (never turned off)."""

    @classmethod
    def read(cls, inner: Backend) -> StoreMarker | None:
        """The marker of ``inner``'s store, or ``None`` when it has none."""
        value = inner.get_state([STORE_SCOPE]).get(STORE_SCOPE)
        if not value:
            return None
        canaries = {
            name.removeprefix(_CANARY_PREFIX): envelope
            for name, envelope in value.items()
            if name.startswith(_CANARY_PREFIX)
        }
        return cls(
            store_id=str(value.get("store_id")),
            state=str(value.get("state")),
            canaries=canaries,
            token=str(value.get("token")),
            user_keys=value.get("user_keys") is True,
        )


def _where(inner: object) -> str:
    """The path or schema of a built-in backend (for messages), else ``""``."""
    describe = getattr(inner, "describe", None)
    if callable(describe):
        return str(describe())
    return str(getattr(inner, "path", None) or getattr(inner, "directory", None) or "")


def canary_context(store_id: str, key_id: str) -> str:
    """The associated data of a key's canary."""
    return f"{store_id}\x00canary\x00canary\x00{key_id}"


def _token(cipher: Cipher, store_id: str) -> str:
    return cipher.blind(store_id, "store-canary")


def _canary(cipher: Cipher, store_id: str) -> tuple[str, str]:
    """``(name, envelope)`` of the current key's canary."""
    key_id = cipher.current_key_id
    envelope = cipher.encrypt(CANARY, context=canary_context(store_id, key_id))
    return f"{_CANARY_PREFIX}{key_id}", envelope


def _is_empty(inner: Backend) -> bool:
    """Whether ``inner`` holds no entry, no session and no state."""
    if inner.entries() or inner.list_sessions(SessionQuery(limit=1)).items:
        return False
    if isinstance(inner, SupportsStateScopes):
        return not inner.state_scopes()
    return True


class _CreationLease:
    """The lease two processes creating one store take, so one store id is drawn."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.holder = base64.urlsafe_b64encode(os.urandom(12)).decode()

    def __enter__(self) -> None:
        deadline = time.monotonic() + _WAIT_LIMIT
        while not self.inner.acquire_lease(
            _LEASE, self.holder, ttl=_LEASE_TTL, now=datetime.now(UTC)
        ):
            if time.monotonic() > deadline:  # pragma: no cover - another opener hung
                raise LockTimeoutError(_LEASE, _WAIT_LIMIT)
            time.sleep(_WAIT)  # another process is creating the store: it takes milliseconds

    def __exit__(self, *exc: object) -> None:
        self.inner.release_lease(_LEASE, self.holder)


def open_marker(
    inner: Backend, cipher: Cipher, *, sealing: bool = False, user_keys: bool = False
) -> StoreMarker:
    """Check (or create) the marker of ``inner``'s store for ``cipher``; return it.

    With ``sealing`` (:func:`encrypt_store`), a store with plain data is accepted and marked
    ``sealing``, and a store already ``sealing`` is resumed. With ``user_keys`` the store is
    recorded as using per-user keys; a store so recorded is refused without them.

    Raises:
        EncryptionMismatchError: a plain store (unless ``sealing``), an unfinished conversion
            (unless ``sealing``), a key that does not open its canary, a wrong token key, a
            store with per-user keys opened without them.
    """
    marker = StoreMarker.read(inner)
    if marker is None:
        with _CreationLease(inner):
            marker = StoreMarker.read(inner)
            if marker is None:
                marker = _recover(inner, cipher) or _create(inner, cipher, sealing=sealing)
    where = _where(inner)
    if marker.state == SEALING_STATE and not sealing:
        raise EncryptionMismatchError("unfinished", where=where)
    if marker.token != _token(cipher, marker.store_id):
        raise EncryptionMismatchError("wrong-token-key", where=where)
    for key_id, envelope in marker.canaries.items():
        _check_canary(cipher, marker.store_id, key_id, envelope, where)
    if marker.user_keys and not user_keys:
        raise EncryptionMismatchError("no-user-keys", where=where)
    if user_keys and not marker.user_keys:
        inner.update_state({STORE_SCOPE: {"user_keys": True}})
        marker = attrs.evolve(marker, user_keys=True)
    current = cipher.current_key_id
    if current not in marker.canaries:
        name, envelope = _canary(cipher, marker.store_id)
        inner.update_state({STORE_SCOPE: {name: envelope}})
        marker = attrs.evolve(marker, canaries={**marker.canaries, current: envelope})
    return marker


def _recover(inner: Backend, cipher: Cipher) -> StoreMarker | None:
    """The marker again, from the store id sealed records carry; ``None`` if none does.

    The current key must open what the store holds (the first sealed record, message or
    entry found), else the key is wrong.
    """
    sessions = inner.list_sessions(SessionQuery(limit=None)).items
    found = {item.record.metadata.get(STORE) for item in sessions} - {None}
    if len(found) != 1:
        return None
    store_id = str(found.pop())
    codec = Codec(cipher, store_id)
    try:
        for item in sessions:
            codec.open_record(item.record)
            for message in inner.get_messages(item.record.id, limit=1, include_inactive=True):
                codec.open_message(message, item.record.id)
        for entry in inner.entries():
            codec.open_entry(entry)
    except DecryptionError:
        raise EncryptionMismatchError(
            "wrong-key", key_id=cipher.current_key_id, where=_where(inner)
        ) from None
    return _create(inner, cipher, sealing=False, store_id=store_id)


def _create(
    inner: Backend, cipher: Cipher, *, sealing: bool, store_id: str | None = None
) -> StoreMarker:
    if store_id is None:
        if not sealing and not _is_empty(inner):
            raise EncryptionMismatchError("plain-store", where=_where(inner))
        store_id = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
    name, envelope = _canary(cipher, store_id)
    state = SEALING_STATE if sealing else SEALED_STATE
    value: dict[str, Any] = {
        "store_id": store_id,
        "state": state,
        "token": _token(cipher, store_id),
        name: envelope,
    }
    inner.update_state({STORE_SCOPE: value})
    return StoreMarker(
        store_id=store_id,
        state=state,
        canaries={cipher.current_key_id: envelope},
        token=str(value["token"]),
    )


def _check_canary(cipher: Cipher, store_id: str, key_id: str, envelope: str, where: str) -> None:
    """Open one canary if the provider holds its key; a key that fails is a wrong key."""
    try:
        cipher.keys.key(key_id)
    except EncryptionKeyError:
        if key_id == cipher.current_key_id:
            raise
        return  # a retired key the provider no longer holds: what it sealed says so on read
    try:
        opened = cipher.decrypt(envelope, context=canary_context(store_id, key_id))
    except DecryptionError:
        raise EncryptionMismatchError("wrong-key", key_id=key_id, where=where) from None
    if opened != CANARY:  # pragma: no cover - only a forger with the key could get here
        raise EncryptionMismatchError("wrong-key", key_id=key_id, where=where)


def mark_sealed(inner: Backend) -> None:
    """Record that a conversion has finished: the store is encrypted throughout."""
    inner.update_state({STORE_SCOPE: {"state": SEALED_STATE}})
