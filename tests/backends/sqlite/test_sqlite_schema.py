"""The SQLite schema: numbered migrations, refusal of newer files, and the FTS5 probe."""

from __future__ import annotations

import sqlite3

import pytest
from sqlite_helpers import make_tokens_version_one, raw

from hermes_sessions.backends import SQLiteBackend
from hermes_sessions.backends.sqlite import _schema as schema
from hermes_sessions.exceptions import (
    IncompatibleStoreError,
    StorageError,
)
from hermes_sessions.queries import SearchQuery
from hermes_sessions.testing._support import minutes, say, seed


def test_migrations_are_recorded_once(db_path):
    """Every migration is recorded with its time; reopening applies nothing again."""
    SQLiteBackend(db_path).close()
    SQLiteBackend(db_path).close()
    connection = raw(db_path)
    rows = connection.execute("SELECT version, applied_at FROM schema_migrations").fetchall()
    connection.close()
    assert [version for version, _ in rows] == list(range(1, schema.SCHEMA_VERSION + 1))
    assert all(applied.endswith("Z") for _, applied in rows)


def test_newer_schema_is_refused(db_path):
    """A database with a migration this library does not know raises IncompatibleStoreError."""
    SQLiteBackend(db_path).close()
    connection = raw(db_path)
    connection.execute("INSERT INTO schema_migrations VALUES (99, '2030-01-01T00:00:00Z')")
    connection.close()
    with pytest.raises(IncompatibleStoreError) as info:
        SQLiteBackend(db_path)
    assert (info.value.found_version, info.value.supported_version) == (99, schema.SCHEMA_VERSION)


def test_a_later_migration_is_applied_on_open_keeping_the_data(db_path, monkeypatch):
    """A migration appended after the initial schema runs once on open; the data stays."""
    with SQLiteBackend(db_path) as backend:
        seed(backend, "s1", None, say("kept"))
    later = (*schema.MIGRATIONS, ("CREATE TABLE later (x)",))
    monkeypatch.setattr(schema, "MIGRATIONS", later)
    monkeypatch.setattr(schema, "SCHEMA_VERSION", len(later))
    with SQLiteBackend(db_path) as backend:
        assert [m.content for m in backend.get_messages("s1")] == ["kept"]
    connection = raw(db_path)
    assert schema.applied_version(connection) == len(later)
    assert connection.execute("SELECT name FROM sqlite_master WHERE name = 'later'").fetchall()
    connection.close()


def test_an_index_of_an_older_token_stream_keeps_time_searches(db_path):
    """A database whose index holds an older token stream still finds messages by time.

    Its search index predates the recorded token version, so it asks for a re-index, and
    searches by time work before and after it (the scan, then FTS5 with the time blocks).
    """
    with SQLiteBackend(db_path) as backend:
        seed(backend, "s1", None, *(say(f"fig {n}", timestamp=minutes(n)) for n in range(3)))
    make_tokens_version_one(db_path)
    with pytest.warns(RuntimeWarning, match="reindex"):
        backend = SQLiteBackend(db_path)
    with backend:
        for _ in range(2):
            newest = backend.search(SearchQuery(text="fig", order="newest", limit=1))
            assert [hit.message.content for hit in newest] == ["fig 2"]
            backend.reindex()
        assert backend.integrity_check() == []


def test_a_failing_migration_changes_nothing(db_path, monkeypatch):
    """A migration that fails part-way is rolled back whole and the version stays."""
    SQLiteBackend(db_path).close()
    broken = (*schema.MIGRATIONS, ("CREATE TABLE half (x)", "CREATE TABLE oops ("))
    monkeypatch.setattr(schema, "MIGRATIONS", broken)
    monkeypatch.setattr(schema, "SCHEMA_VERSION", len(broken))
    with pytest.raises(StorageError):
        SQLiteBackend(db_path)
    connection = raw(db_path)
    assert schema.applied_version(connection) == len(broken) - 1
    assert connection.execute("SELECT name FROM sqlite_master WHERE name = 'half'").fetchall() == []
    connection.close()


def test_fts5_probe_reports_a_missing_module():
    """The probe answers False when SQLite cannot create an FTS5 table."""

    class NoFts5:
        def execute(self, _sql):
            raise sqlite3.OperationalError("no such module: fts5")

    assert schema.fts5_available(NoFts5()) is False


def test_migrations_and_index_builds_done_by_another_process_are_skipped(backend):
    """Re-running an applied migration or building a ready index changes nothing."""
    connection = backend._connections.connection()
    schema.migrate(connection, version=1)
    assert schema.build_index(connection) == 0
    assert schema.applied_version(connection) == schema.SCHEMA_VERSION
