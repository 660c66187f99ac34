"""The conformance suite on encrypted stores: each persistent built-in backend under a cipher."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from hermes_sessions.backends.encrypted import EncryptedBackend
from hermes_sessions.backends.jsonl import JSONLBackend
from hermes_sessions.backends.sqlite import SQLiteBackend
from hermes_sessions.cipher import Cipher, StaticKeys
from hermes_sessions.testing import BackendContract
from pg_support import open_pg, requires_pg

if TYPE_CHECKING:
    from pathlib import Path


def test_cipher() -> Cipher:
    """A cipher with fixed test keys (the same in every process, so reopening reads the data)."""
    data_key = hashlib.sha256(b"hermes-sessions test data key").digest()
    token_key = hashlib.sha256(b"hermes-sessions test token key").digest()
    return Cipher(StaticKeys({"test1": data_key}), token_key=token_key)


test_cipher.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


class TestEncryptedSQLiteBackend(BackendContract):
    """SQLite under the cipher."""

    def make_backend(self, directory: Path) -> EncryptedBackend:
        """An encrypted backend on ``<directory>/state.db``."""
        return EncryptedBackend(SQLiteBackend(directory / "state.db"), cipher=test_cipher())


class TestEncryptedJSONLBackend(BackendContract):
    """JSONL files under the cipher."""

    def make_backend(self, directory: Path) -> EncryptedBackend:
        """An encrypted backend on the JSONL directory ``directory``."""
        return EncryptedBackend(JSONLBackend(directory), cipher=test_cipher())


@requires_pg
class TestEncryptedPostgresBackend(BackendContract):
    """PostgreSQL under the cipher, in a schema of its own for each test directory."""

    def make_backend(self, directory: Path) -> EncryptedBackend:
        """An encrypted backend on the test server's schema for ``directory``."""
        return EncryptedBackend(open_pg(directory), cipher=test_cipher())
