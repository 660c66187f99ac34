"""The cipher the benchmarks encrypt with (fixed test keys: benchmarks only, never deployments)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from hermes_sessions.backends.encrypted import EncryptedBackend
from hermes_sessions.cipher import Cipher, StaticKeys

if TYPE_CHECKING:
    from hermes_sessions.protocols import SearchableBackend


def bench_cipher() -> Cipher:
    """AES-256-GCM under a fixed key, HMAC-SHA-256 token hashes under another."""
    return Cipher(
        StaticKeys({"bench": hashlib.sha256(b"benchmark data key").digest()}),
        token_key=hashlib.sha256(b"benchmark token key").digest(),
    )


def encrypted(backend: SearchableBackend) -> EncryptedBackend:
    """``backend`` under the benchmark cipher."""
    return EncryptedBackend(backend, cipher=bench_cipher())
