"""Encryption at rest that still searches: :class:`EncryptedBackend` over any built-in backend.

::

    from hermes_sessions.backends.encrypted import EncryptedBackend
    from hermes_sessions.backends.sqlite import SQLiteBackend
    from hermes_sessions.cipher import Cipher, EnvKeys

    backend = EncryptedBackend(SQLiteBackend(path), cipher=Cipher(EnvKeys(), token_key=token_key))

The same codec (``_codec``) seals the models for SQLite, JSONL and PostgreSQL alike; search runs
on keyed hashes of the shared token stream (``_search``); :meth:`EncryptedBackend.rotate_key`
re-encrypts under a new data key and :func:`encrypt_store` encrypts a plain store in place
(``_rotate``); the store's record of itself (its id, canaries) is ``_marker``; per-user keys,
destroyed by ``erase_user``, are ``_userkeys``.
``docs/privacy.md`` has the threat model, what leaks and the measured cost. Needs the
``encryption`` extra (``cryptography``).
"""

from __future__ import annotations

from hermes_sessions.backends.encrypted._backend import EncryptedBackend
from hermes_sessions.backends.encrypted._rotate import (
    ChainedKeys,
    RotationProgress,
    encrypt_store,
    rotate_key,
)
from hermes_sessions.backends.encrypted._search import needs_scan
from hermes_sessions.backends.encrypted._userkeys import DirectoryUserKeys, UserKeys, UserKeyStore

__all__ = [
    "ChainedKeys",
    "DirectoryUserKeys",
    "EncryptedBackend",
    "RotationProgress",
    "UserKeyStore",
    "UserKeys",
    "encrypt_store",
    "needs_scan",
    "rotate_key",
]
