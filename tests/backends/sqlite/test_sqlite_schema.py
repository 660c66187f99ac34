"""The SQLite schema: numbered migrations, refusal of newer files, and the FTS5 probe."""

from __future__ import annotations

import sqlite3

import pytest
from sqlite_helpers import raw

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


def test_migration_4_adds_state_and_revisions_to_existing_sessions(db_path):
    """A version-3 database gains the state table and revision 0 on every session."""
    with SQLiteBackend(db_path) as backend:
        seed(backend, "s1", None, say("kept"))
    connection = raw(db_path)
    connection.execute("DROP TABLE state")
    connection.execute("ALTER TABLE sessions DROP COLUMN revision")
    connection.execute("DELETE FROM schema_migrations WHERE version >= 4")
    connection.close()
    with SQLiteBackend(db_path) as backend:
        stored = backend.get_session("s1")
        assert stored is not None
        assert (stored.revision, stored.message_count) == (0, 1)
        backend.append_messages("s1", [say("more")], state={"lane|k": {"a": 1}}, if_revision=0)
        assert backend.get_state(["lane|k"]) == {"lane|k": {"a": 1}}


def test_migrating_an_older_database_keeps_its_data(db_path):
    """A database at version 1 is migrated on open; its messages stay searchable by time.

    Its search index predates the recorded token version, so it asks for a re-index, and
    searches by time work before and after it (the scan, then FTS5 with the time blocks).
    """
    with SQLiteBackend(db_path) as backend:
        seed(backend, "s1", None, *(say(f"fig {n}", timestamp=minutes(n)) for n in range(3)))
    connection = raw(db_path)
    connection.execute("DROP TABLE message_blocks")
    connection.execute("DROP TABLE meta")
    connection.execute("DROP TABLE state")
    connection.execute("ALTER TABLE sessions DROP COLUMN revision")
    connection.execute("DELETE FROM schema_migrations WHERE version >= 2")
    connection.close()
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
