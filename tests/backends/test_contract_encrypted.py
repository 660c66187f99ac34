"""The conformance suite on encrypted stores: each persistent built-in backend under a cipher.

The many-process and many-thread races (``test_processes_*``, ``test_threads_*``) exercise the
inner backend's concurrency, which the plain classes of ``test_contract.py`` cover; on encrypted
stores they run with ``--stress`` (they are most of the cost: about 100 s of the 150 s an
encrypted SQLite run takes on CI's machine).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import pytest

from hermes_sessions.backends.encrypted import DirectoryUserKeys, EncryptedBackend, UserKeys
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


class _EncryptedContract(BackendContract):
    """The suite, with the concurrency races behind ``--stress``."""

    @pytest.fixture(autouse=True)
    def _races_with_stress(self, request: pytest.FixtureRequest) -> None:
        """Skip the races unless ``--stress`` (the plain classes run them every time)."""
        racing = request.node.name.startswith(("test_processes_", "test_threads_"))
        if racing and not request.config.getoption("--stress"):
            pytest.skip("races of the inner backend: covered plain; run encrypted with --stress")


class TestEncryptedSQLiteBackend(_EncryptedContract):
    """SQLite under the cipher."""

    def make_backend(self, directory: Path) -> EncryptedBackend:
        """An encrypted backend on ``<directory>/state.db``."""
        return EncryptedBackend(SQLiteBackend(directory / "state.db"), cipher=test_cipher())


class TestEncryptedSQLiteUserKeysBackend(_EncryptedContract):
    """SQLite under the cipher with per-user keys (a user's content under their own key)."""

    def make_backend(self, directory: Path) -> EncryptedBackend:
        """An encrypted backend on ``<directory>/state.db``, user keys in ``<directory>/keys``."""
        keys = UserKeys(DirectoryUserKeys(directory / "keys"))
        inner = SQLiteBackend(directory / "state.db")
        return EncryptedBackend(inner, cipher=test_cipher(), user_keys=keys)


class TestEncryptedJSONLBackend(_EncryptedContract):
    """JSONL files under the cipher."""

    def make_backend(self, directory: Path) -> EncryptedBackend:
        """An encrypted backend on the JSONL directory ``directory``."""
        return EncryptedBackend(JSONLBackend(directory), cipher=test_cipher())


@requires_pg
class TestEncryptedPostgresBackend(_EncryptedContract):
    """PostgreSQL under the cipher, in a schema of its own for each test directory."""

    def make_backend(self, directory: Path) -> EncryptedBackend:
        """An encrypted backend on the test server's schema for ``directory``."""
        return EncryptedBackend(open_pg(directory), cipher=test_cipher())
