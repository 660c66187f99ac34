"""Hostile Hermes profiles: refused in one line or reported; nothing outside them is read."""

from __future__ import annotations

import json
import sqlite3

import pytest

from hermes_sessions import InvalidSourceError, SessionStore
from hermes_sessions.backends import InMemoryBackend
from hermes_sessions.cli import main
from hermes_sessions.interop import import_hermes
from hermes_sessions.memory import MemoryStore

ZONE = "Asia/Shanghai"


def _store():
    return SessionStore(InMemoryBackend())


def _database(home, script):
    """A state.db in ``home`` built from ``script``."""
    home.mkdir(exist_ok=True)
    connection = sqlite3.connect(home / "state.db")
    connection.executescript(script)
    connection.commit()
    connection.close()


def _cli_refuses(home, tmp_path, capsys, *words):
    """import-hermes on ``home`` exits 2 with one line on stderr holding every one of ``words``."""
    status = main(["--home", str(tmp_path / "target"), "import-hermes", str(home)])
    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1
    assert err.startswith("hermes-sessions import-hermes: ")
    for word in words:
        assert word in err
    return err


def test_messages_table_without_session_id_is_refused(tmp_path, capsys):
    """A messages table lacking session_id is refused in one line naming the missing column."""
    home = tmp_path / "h"
    _database(
        home,
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, started_at REAL);"
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, role TEXT, content TEXT, timestamp REAL);"
        "INSERT INTO sessions VALUES ('s1', 'cli', 1778548800);"
        "INSERT INTO messages VALUES (1, 'user', 'hi', 1778548801);",
    )
    with pytest.raises(InvalidSourceError, match="session_id"):
        import_hermes(home, _store(), timezone=ZONE)
    _cli_refuses(home, tmp_path, capsys, "state.db", "session_id")


def test_sessions_table_without_started_at_is_refused(tmp_path):
    """A sessions table lacking a column the importer needs is refused, naming the column."""
    home = tmp_path / "h"
    _database(
        home,
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT);"
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, "
        "content TEXT, timestamp REAL);",
    )
    with pytest.raises(InvalidSourceError, match="started_at"):
        import_hermes(home, _store(), timezone=ZONE)


def test_a_sessions_view_is_refused(tmp_path, capsys):
    """A ``sessions`` view in place of the table is refused: views are never read."""
    home = tmp_path / "h"
    _database(
        home,
        "CREATE TABLE real (id TEXT PRIMARY KEY, source TEXT, started_at REAL);"
        "INSERT INTO real VALUES ('s1', 'cli', 1778548800);"
        "CREATE VIEW sessions AS SELECT * FROM real;"
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, "
        "content TEXT, timestamp REAL);",
    )
    with pytest.raises(InvalidSourceError, match="view"):
        import_hermes(home, _store(), timezone=ZONE)
    _cli_refuses(home, tmp_path, capsys, "state.db", "sessions")


def test_a_view_recursing_without_end_is_refused_without_reading_it(tmp_path):
    """A ``sessions`` view whose recursive query never ends is refused before it is queried."""
    home = tmp_path / "h"
    _database(
        home,
        "CREATE VIEW sessions AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
        "SELECT 's' || i AS id, 'cli' AS source, 1778548800.0 + i AS started_at FROM n;"
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, "
        "content TEXT, timestamp REAL);",
    )
    with pytest.raises(InvalidSourceError, match="view"):
        import_hermes(home, _store(), timezone=ZONE)


def test_a_virtual_messages_table_is_refused(tmp_path):
    """A virtual table (whose module computes the rows) stands in for no Hermes table."""
    home = tmp_path / "h"
    _database(
        home,
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, started_at REAL);"
        "CREATE VIRTUAL TABLE messages USING fts5(id, session_id, role, content, timestamp);",
    )
    with pytest.raises(InvalidSourceError, match="virtual"):
        import_hermes(home, _store(), timezone=ZONE)


def test_a_generated_column_is_refused(tmp_path):
    """A column computed on every read (a generated column) is refused before any row is read."""
    home = tmp_path / "h"
    _database(
        home,
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, started_at REAL,"
        " title TEXT GENERATED ALWAYS AS (hex(zeroblob(100000000))) VIRTUAL);"
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, "
        "content TEXT, timestamp REAL);"
        "INSERT INTO sessions (id, source, started_at) VALUES ('s1', 'cli', 1778548800);",
    )
    with pytest.raises(InvalidSourceError, match="generated"):
        import_hermes(home, _store(), timezone=ZONE)


def test_deeply_nested_sessions_json_is_reported(profile, tmp_path, capsys):
    """A sessions.json nested past the depth limit is a problem in the report, not a traceback."""
    profile.session("s1")
    profile.close()
    depth = 100_000
    (profile.root / "sessions" / "sessions.json").write_text("[" * depth + "]" * depth)
    report = import_hermes(profile.root, _store(), timezone=ZONE)
    (problem,) = [p for p in report.problems if p.kind == "bad_line"]
    assert "sessions.json" in problem.where
    assert "nested" in problem.detail
    status = main(["--home", str(tmp_path / "t"), "import-hermes", str(profile.root)])
    assert status == 0
    assert "nested" in capsys.readouterr().out


def test_deeply_nested_json_columns_and_lines_are_kept_as_text_or_skipped(profile):
    """Deep JSON in a database column stays text; a deep JSONL line is skipped and reported."""
    deep = "[" * 50_000 + "]" * 50_000
    profile.session("s1")
    profile.message("s1", "assistant", "hi", tool_calls=deep)
    profile.jsonl("s2", [{"role": "user", "content": "a", "timestamp": "2026-05-12T09:00:00"}])
    with (profile.root / "sessions" / "s2.jsonl").open("a") as handle:
        handle.write('{"role": "user", "content": ' + deep + "}\n")
    profile.close()
    store = _store()
    report = import_hermes(profile.root, store, timezone=ZONE)
    (message,) = store.transcript("s1")
    assert message.tool_calls is None
    assert message.extra["tool_calls_raw"] == deep
    assert [m.content for m in store.transcript("s2")] == ["a"]
    (problem,) = [p for p in report.problems if p.kind == "bad_line"]
    assert problem.where.endswith("s2.jsonl:2")
    assert "nested" in problem.detail


def test_a_jsonl_transcript_linked_out_of_the_profile_is_not_read(profile, tmp_path):
    """A sessions/*.jsonl symlink to a file outside the profile is skipped and reported."""
    profile.close()
    outside = tmp_path / "other-app.log"
    outside.write_text(json.dumps({"role": "user", "content": "SECRET of another app"}) + "\n")
    (profile.root / "sessions" / "leak.jsonl").symlink_to(outside)
    store = _store()
    report = import_hermes(profile.root, store, timezone=ZONE)
    assert store.backend.get_session("leak") is None
    assert not store.search("SECRET", sources=None, exclude_sources=())
    (problem,) = [p for p in report.problems if p.kind == "outside_profile"]
    assert "leak.jsonl" in problem.where


def test_a_link_inside_the_profile_is_followed(profile):
    """A symlink that stays inside the profile is read like the file it points to."""
    profile.close()
    (profile.root / "archive").mkdir()
    real = profile.root / "archive" / "s9.jsonl"
    real.write_text(json.dumps({"role": "user", "content": "kept", "timestamp": "2026-05-12"}))
    (profile.root / "sessions" / "s9.jsonl").symlink_to(real)
    store = _store()
    import_hermes(profile.root, store, timezone=ZONE)
    assert [m.content for m in store.transcript("s9")] == ["kept"]


def test_a_state_db_linked_out_of_the_profile_is_refused(tmp_path, capsys):
    """state.db linked to another app's database is refused in one line; nothing is read."""
    other = tmp_path / "other.db"
    _database(
        tmp_path / "x",
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, started_at REAL);"
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, "
        "content TEXT, timestamp REAL);",
    )
    (tmp_path / "x" / "state.db").rename(other)
    home = tmp_path / "h"
    home.mkdir()
    (home / "state.db").symlink_to(other)
    with pytest.raises(InvalidSourceError, match="outside"):
        import_hermes(home, _store(), timezone=ZONE)
    _cli_refuses(home, tmp_path, capsys, "state.db", "outside")


def test_a_wal_linked_out_of_the_profile_is_refused(profile, tmp_path):
    """A state.db-wal symlink out of the profile is refused like state.db itself."""
    profile.session("s1")
    profile.close()
    outside = tmp_path / "elsewhere-wal"
    outside.write_bytes(b"")
    wal = profile.root / "state.db-wal"
    wal.unlink(missing_ok=True)
    wal.symlink_to(outside)
    with pytest.raises(InvalidSourceError, match="outside"):
        import_hermes(profile.root, _store(), timezone=ZONE)


def test_memory_files_linked_out_of_the_profile_are_not_read(profile, tmp_path):
    """memories/*.md linked outside the profile are skipped and reported, not imported."""
    profile.session("s1")
    profile.close()
    outside = tmp_path / "notes.md"
    outside.write_text("private note of another app")
    (profile.root / "memories" / "MEMORY.md").symlink_to(outside)
    memory = MemoryStore(tmp_path / "target-memories")
    report = import_hermes(profile.root, _store(), timezone=ZONE, memory=memory)
    assert report.memory_entries == 0
    assert memory.entries("memory") == ()
    (problem,) = [p for p in report.problems if p.kind == "outside_profile"]
    assert "MEMORY.md" in problem.where


def test_a_sessions_json_linked_out_of_the_profile_is_not_read(profile, tmp_path):
    """sessions/sessions.json linked outside the profile is skipped and reported."""
    profile.session("s1")
    profile.close()
    outside = tmp_path / "routing.json"
    outside.write_text(json.dumps({"agent:main:cli:dm:x": {"session_id": "s1"}}))
    (profile.root / "sessions" / "sessions.json").symlink_to(outside)
    report = import_hermes(profile.root, _store(), timezone=ZONE)
    assert report.entries == ()
    assert [p.kind for p in report.problems] == ["outside_profile"]


def test_a_sessions_directory_linked_out_of_the_profile_is_not_read(profile, tmp_path):
    """A ``sessions`` directory that is a link out of the profile is not read at all."""
    profile.session("s1")
    profile.close()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "leak.jsonl").write_text(json.dumps({"role": "user", "content": "x"}) + "\n")
    (profile.root / "sessions").rmdir()
    (profile.root / "sessions").symlink_to(outside)
    store = _store()
    report = import_hermes(profile.root, store, timezone=ZONE)
    assert store.backend.get_session("leak") is None
    assert {p.kind for p in report.problems} == {"outside_profile"}


def test_a_fifo_named_like_a_transcript_is_skipped(profile):
    """A FIFO among the transcripts is skipped and reported; reading it would block forever."""
    profile.session("s1")
    profile.close()
    (profile.root / "sessions" / "pipe.jsonl").unlink(missing_ok=True)
    import os  # noqa: PLC0415  # only here

    os.mkfifo(profile.root / "sessions" / "pipe.jsonl")
    report = import_hermes(profile.root, _store(), timezone=ZONE)
    (problem,) = [p for p in report.problems if p.kind == "not_a_file"]
    assert "pipe.jsonl" in problem.where


def test_a_long_lineage_listed_children_first_is_ordered_in_linear_passes(profile):
    """Sessions whose parents start later are still written parents first."""
    count = 300
    for n in range(count):
        parent = f"s{n + 1}" if n + 1 < count else None
        profile.session(f"s{n}", started=1_778_548_800.0 + n, parent_session_id=parent)
    profile.close()
    report = import_hermes(profile.root, _store(), timezone=ZONE)
    assert list(report.sessions) == [f"s{n}" for n in reversed(range(count))]


def test_a_symlink_loop_is_reported_not_followed(profile):
    """A transcript that is a link to itself is skipped and reported as unresolvable."""
    profile.session("s1")
    profile.close()
    loop = profile.root / "sessions" / "loop.jsonl"
    loop.symlink_to(loop)
    report = import_hermes(profile.root, _store(), timezone=ZONE)
    (problem,) = [p for p in report.problems if p.where.endswith("loop.jsonl")]
    assert problem.kind == "outside_profile"
    assert "cannot be resolved" in problem.detail


def test_a_database_without_either_table_is_refused(tmp_path):
    """A SQLite state.db holding neither Hermes table is refused, naming both."""
    home = tmp_path / "h"
    _database(home, "CREATE TABLE notes (x TEXT);")
    with pytest.raises(InvalidSourceError, match="no sessions and no messages table"):
        import_hermes(home, _store(), timezone=ZONE)
