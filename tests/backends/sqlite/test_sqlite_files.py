"""The database file: created whole under a temporary name, and refused when it is not ours."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3

import pytest
from sqlite_helpers import raw

from hermes_sessions.backends import SQLiteBackend
from hermes_sessions.backends.sqlite import _files as files
from hermes_sessions.backends.sqlite import _schema as schema
from hermes_sessions.exceptions import CorruptRecordError
from hermes_sessions.testing._support import say, seed


def _die_during_creation(path):
    """Start creating ``path`` and die (os._exit) after the first migration statement."""
    real = schema.apply_migration

    def first_statement_then_die(connection, version, now):
        connection.execute(schema.MIGRATIONS[0][0])
        os._exit(3)

    schema.apply_migration = first_statement_then_die
    try:
        SQLiteBackend(path)
    finally:
        schema.apply_migration = real


def _open_and_write(path, worker):
    with SQLiteBackend(path) as backend:
        seed(backend, f"s{worker}", None, say(f"from {worker}"))


def test_a_process_killed_while_creating_leaves_no_database(db_path):
    """A creation killed before its schema commits leaves no state.db, and the next open works."""
    process = multiprocessing.get_context("fork").Process(
        target=_die_during_creation, args=(db_path,)
    )
    process.start()
    process.join()
    assert process.exitcode == 3
    assert not db_path.exists()
    with SQLiteBackend(db_path) as backend:
        seed(backend, "s1", None, say("after"))
        assert backend.integrity_check() == []
    leftovers = [p.name for p in db_path.parent.iterdir() if p.name != db_path.name]
    assert not [name for name in leftovers if ".creating-" in name]


def test_a_failed_creation_cleans_up_after_itself(db_path, monkeypatch):
    """A creation that raises removes its temporary files and creates no database."""

    def fail(connection, version, now):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(schema, "apply_migration", fail)
    with pytest.raises(Exception, match="disk I/O error"):
        SQLiteBackend(db_path)
    assert sorted(p.name for p in db_path.parent.iterdir()) == []


def test_a_new_database_has_its_whole_schema_when_it_appears(db_path):
    """The file that appears under the name is complete: every migration, no log beside it."""
    SQLiteBackend(db_path).close()
    connection = raw(db_path)
    assert schema.applied_version(connection) == schema.SCHEMA_VERSION
    connection.close()


def test_several_processes_creating_one_database_share_it(db_path):
    """Processes racing to create the same new database all end up using the one file."""
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_open_and_write, args=(db_path, n)) for n in range(4)]
    for process in workers:
        process.start()
    for process in workers:
        process.join()
    assert [process.exitcode for process in workers] == [0] * 4
    with SQLiteBackend(db_path) as backend:
        contents = sorted(str(backend.get_messages(f"s{n}")[0].content) for n in range(4))
        assert contents == [f"from {n}" for n in range(4)]


def test_a_zero_byte_state_db_is_refused(db_path):
    """An empty file is not opened as a new, empty store; it is left as it is."""
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"")
    with pytest.raises(CorruptRecordError, match="0 bytes") as info:
        SQLiteBackend(db_path)
    assert info.value.path == db_path
    assert db_path.read_bytes() == b""


@pytest.mark.parametrize(
    "content",
    [b"hello, this is a text file\n" * 10, b"\x89PNG\r\n\x1a\n" + bytes(4096)],
)
def test_a_file_that_is_not_sqlite_is_refused(db_path, content):
    """A foreign file under the database's name raises a clear error and is not touched."""
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(content)
    with pytest.raises(CorruptRecordError, match="not an SQLite database") as info:
        SQLiteBackend(db_path)
    assert info.value.path == db_path
    assert db_path.read_bytes() == content


def test_another_programs_database_is_refused(db_path):
    """A SQLite database with tables but no hermes-sessions schema is not migrated over."""
    db_path.parent.mkdir(parents=True)
    connection = raw(db_path)
    connection.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, title TEXT)")
    connection.execute("INSERT INTO sessions VALUES ('a', 'theirs')")
    connection.close()
    before = db_path.read_bytes()
    with pytest.raises(CorruptRecordError, match="another program") as info:
        SQLiteBackend(db_path)
    assert "sessions" in str(info.value)
    assert db_path.read_bytes() == before


def test_an_empty_sqlite_database_is_set_up_in_place(db_path):
    """A valid SQLite file without any table (nothing to lose) gets the schema."""
    db_path.parent.mkdir(parents=True)
    connection = raw(db_path)
    connection.execute("PRAGMA user_version = 0")
    connection.execute("VACUUM")
    connection.close()
    with SQLiteBackend(db_path) as backend:
        seed(backend, "s1", None, say("hi"))


def test_stale_temporary_files_of_dead_processes_are_removed(db_path):
    """Left-overs of a creation whose process is gone are cleaned up by the next creation."""
    db_path.parent.mkdir(parents=True)
    dead = files.temporary_name(db_path, pid=2**22 + 1, tag="deadbeef")
    dead.write_bytes(b"half a database")
    mine = files.temporary_name(db_path, pid=os.getpid(), tag="cafe0001")
    mine.write_bytes(b"a creation still running")
    SQLiteBackend(db_path).close()
    assert not dead.exists()
    assert mine.exists()


def _damage_schema_name(db_path):
    """Damage the schema: a table's name becomes bytes that are not UTF-8."""
    connection = raw(db_path)
    connection.execute("CREATE TABLE extra (x)")
    connection.execute("PRAGMA writable_schema = ON")
    connection.execute(
        "UPDATE sqlite_master SET name = CAST(x'65ff78' AS TEXT) WHERE name = 'extra'"
    )
    connection.commit()
    connection.close()


def test_a_schema_name_that_is_not_utf8_is_refused_naming_the_file(db_path):
    """Non-UTF-8 bytes in the schema give CorruptRecordError naming the file, not a decode error."""
    SQLiteBackend(db_path).close()
    _damage_schema_name(db_path)
    with pytest.raises(CorruptRecordError, match="UTF-8") as info:
        SQLiteBackend(db_path)
    assert info.value.path == db_path
    assert str(db_path) in str(info.value)


def test_the_cli_reports_a_schema_name_that_is_not_utf8(db_path, capsys):
    """``check`` on such a store reports the damage (exit 1); ``list`` says it in one line."""
    from hermes_sessions.cli import main  # noqa: PLC0415

    SQLiteBackend(db_path).close()
    _damage_schema_name(db_path)
    home = str(db_path.parent)
    assert main(["--home", home, "check"]) == 1
    assert "UTF-8" in capsys.readouterr().out
    assert main(["--home", home, "list"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "UTF-8" in err


def test_a_schema_damaged_while_open_is_refused_naming_the_file(db_path):
    """A backend already open meets the damaged schema name as CorruptRecordError too."""
    with SQLiteBackend(db_path) as backend:
        seed(backend, "s1", None, say("hi"))
        _damage_schema_name(db_path)
        with pytest.raises(CorruptRecordError, match="UTF-8") as info:
            backend.get_session("s1")
        assert info.value.path == db_path
