"""SQLiteBackend as users open it: paths, files, options, errors and closing."""

from __future__ import annotations

import sqlite3
import stat
from datetime import timedelta

import attrs
import pytest

from hermes_sessions.backends import SQLiteBackend
from hermes_sessions.backends.sqlite import _connections as connections
from hermes_sessions.backends.sqlite import _sessions as sessions
from hermes_sessions.exceptions import (
    BackendClosedError,
    StorageError,
)
from hermes_sessions.testing._support import T0, say, seed


def test_in_home_opens_state_db(tmp_path, monkeypatch):
    """in_home() opens <home>/state.db, under $HERMES_SESSIONS_HOME by default."""
    monkeypatch.setenv("HERMES_SESSIONS_HOME", str(tmp_path / "home"))
    with SQLiteBackend.in_home() as backend:
        assert backend.path == tmp_path / "home" / "state.db"
    with SQLiteBackend.in_home(tmp_path / "other", durability="normal") as backend:
        assert backend.path == tmp_path / "other" / "state.db"
        assert backend.durability == "normal"


def test_files_are_created_private(db_path):
    """The directory is created 0700 and the database, WAL and shared memory 0600."""
    with SQLiteBackend(db_path) as backend:
        seed(backend, "s1", None, say("hello"))
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in db_path.parent.iterdir()}
        assert stat.S_IMODE(db_path.parent.stat().st_mode) == 0o700
        assert modes == {"state.db": 0o600, "state.db-wal": 0o600, "state.db-shm": 0o600}


def test_repr_names_the_file(backend, db_path):
    """The repr shows the path and durability, and says when the backend is closed."""
    assert repr(backend) == f"<SQLiteBackend {str(db_path)!r} full>"
    backend.close()
    assert repr(backend) == f"<SQLiteBackend {str(db_path)!r} closed>"


@pytest.mark.parametrize(
    "options",
    [
        {"durability": "fast"},
        {"busy_timeout": 0},
        {"busy_timeout": True},
        {"retries": -1},
        {"wal_size_limit": 0},
        {"secure_delete": "yes"},
    ],
)
def test_bad_options_are_refused(db_path, options):
    """Unknown durability, non-positive timeouts and negative retries raise ValueError."""
    with pytest.raises((ValueError, TypeError)):
        SQLiteBackend(db_path, **options)


@pytest.mark.parametrize(("durability", "level"), [("full", 2), ("normal", 1)])
def test_durability_sets_synchronous(db_path, durability, level):
    """Full means PRAGMA synchronous=FULL (fsync per commit); normal means NORMAL."""
    with SQLiteBackend(db_path, durability=durability) as backend:
        connection = backend._connections.connection()
        assert connection.execute("PRAGMA synchronous").fetchone()[0] == level
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_unopenable_path_is_a_storage_error(tmp_path):
    """A path SQLite cannot open raises StorageError with the sqlite3 error as its cause."""
    (tmp_path / "state.db").mkdir()
    with pytest.raises(StorageError) as info:
        SQLiteBackend(tmp_path / "state.db")
    assert isinstance(info.value.__cause__, sqlite3.Error)


def test_failures_during_calls_are_storage_errors(backend):
    """A sqlite3 error inside a call reaches the caller as StorageError."""
    backend._connections.connection().execute("DROP TABLE leases")
    with pytest.raises(StorageError) as info:
        backend.acquire_lease("r", "a", ttl=timedelta(minutes=1), now=T0)
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)


def test_closed_backend_refuses_maintenance(backend):
    """Maintenance methods also raise BackendClosedError after close."""
    backend.close()
    for call in (backend.optimize, backend.checkpoint, backend.integrity_check):
        with pytest.raises(BackendClosedError):
            call()


def test_a_database_that_cannot_use_wal_is_refused(db_path, monkeypatch):
    """If SQLite will not switch to WAL mode, opening fails and the connection is closed."""

    class NoWal(connections._Connection):
        def execute(self, sql, *args):
            if sql.startswith("PRAGMA journal_mode"):
                return super().execute("SELECT 'delete'")
            return super().execute(sql, *args)

    monkeypatch.setattr(connections, "_Connection", NoWal)
    with pytest.raises(StorageError, match="cannot use WAL"):
        SQLiteBackend(db_path)


def test_a_file_that_cannot_be_created_is_a_storage_error(tmp_path):
    """Creating the database under a plain file raises StorageError."""
    (tmp_path / "plain").write_text("not a directory")
    for path in (tmp_path / "plain" / "state.db", tmp_path / "plain" / "deeper" / "state.db"):
        with pytest.raises(StorageError, match="cannot create"):
            SQLiteBackend(path)


def test_closing_during_a_call_raises_backend_closed(backend, monkeypatch):
    """A call whose backend is closed under it raises BackendClosedError, not a sqlite3 error."""

    def close_first(connection, session_id):
        backend.close()
        return connection.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,))

    monkeypatch.setattr(sessions, "record", close_first)
    with pytest.raises(BackendClosedError):
        backend.get_session("s1")
    with pytest.raises(BackendClosedError):
        backend._connections.connection()


def test_options_cannot_be_reassigned_once_open(backend):
    """The options are read-only: the connections already use them, so a change is refused."""
    with pytest.raises(attrs.exceptions.FrozenAttributeError):
        backend.busy_timeout = 1.0
    assert backend.busy_timeout == 5.0
