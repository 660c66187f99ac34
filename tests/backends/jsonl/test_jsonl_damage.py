"""JSONLBackend on damaged files: torn and corrupt lines are cut or reported with file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonl_helpers import KEY, as_written, edit_lines, json_lines, session_file, signed_bytes

from hermes_sessions.backends import JSONLBackend
from hermes_sessions.exceptions import (
    CorruptRecordError,
    IncompatibleStoreError,
    StorageError,
)
from hermes_sessions.testing._support import record, say, seed

# -- torn and corrupt lines ------------------------------------------------------------------------


def test_torn_last_line_is_ignored_and_cleaned_on_next_write(backend, directory):
    """Bytes without a final newline are invisible to readers and cut before the next append."""
    seed(backend, "s1", KEY, say("whole"))
    path = session_file(directory, "s1")
    with path.open("ab") as file:
        file.write(b'{"type":"message","tx":99,"mess')
    with JSONLBackend(directory) as again:
        assert [m.content for m in again.get_messages("s1")] == ["whole"]
        again.append_messages("s1", [say("next")])
        assert [m.content for m in again.get_messages("s1")] == ["whole", "next"]
    assert path.read_bytes().endswith(b"\n")
    assert [line["type"] for line in json_lines(path)] == ["session", "message", "message"]


def test_torn_journal_line_is_cut(backend, directory):
    """An announcement cut short (the write never started) is removed on the next open."""
    seed(backend, "s1", KEY)
    journal = directory / "journal.jsonl"
    whole = journal.read_bytes()
    with journal.open("ab") as file:
        file.write(b'{"op":"write","tx":7,"ses')
    with JSONLBackend(directory) as again:
        assert again.get_session("s1") is not None
    assert journal.read_bytes() == whole


def test_malformed_line_names_file_and_line(backend, directory):
    """A broken line in the middle of a session file raises CorruptRecordError(path, line)."""
    seed(backend, "s1", None, say("one"), say("two"), say("three"))
    path = session_file(directory, "s1")
    lines = path.read_bytes().split(b"\n")
    lines[2] = b'{"type":"message","tx":1,"message":{"role":'
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(CorruptRecordError) as info:
        JSONLBackend(directory)
    assert (info.value.path, info.value.line) == (path, 3)
    assert "repair" in str(info.value)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"[1, 2]", "JSON object"),
        (b'{"type":"message","tx":2,"message":{"role":"user"}}', "id"),
        (b'{"type":"message","tx":2,"message":{"role":"user","id":1}}', "does not follow"),
        (b'{"type":"message","tx":2,"message":{"role":"user","id":5,"session_id":"s2"}}', "names"),
        (b'{"type":"session","format":1,"tx":2,"next_id":1,"record":{}}', "SessionRecord"),
        (b'{"type":"update","tx":2,"values":{"message_count":3}}', "update_session"),
        (b'{"type":"active","tx":2,"ids":["x"],"active":false}', "integers"),
        (b'{"type":"active","tx":2,"ids":[1],"active":"no"}', "true or false"),
        (b'{"type":"end","tx":2,"reason":"idle","at":"yesterday"}', "ISO 8601"),
        (b'{"type":"teleport","tx":2}', "unknown record type"),
        (b'{"type":"reopen","tx":-1}', "integer"),
        (b'{"type":"reopen"}', "missing field"),
        (b'{"type":"end","tx":2,"reason":5,"at":"2026-05-01T09:00:00Z"}', "must be a string"),
        (b'{"type":"active","tx":2,"ids":5,"active":false}', "JSON array"),
        (b'{"type":"session","format":1,"tx":2,"next_id":1,"record":[]}', "JSON object"),
        (
            (
                b'{"type":"session","format":1,"tx":1,"next_id":1,"record":{"id":"s1",'
                b'"source":"x","started_at":"2026-05-01T09:00:00Z"}}'
            ),
            "in the middle",
        ),
        (b"\xff\xfe not utf-8", "not a JSON line"),
    ],
)
def test_every_malformed_session_line_is_reported(backend, directory, line, reason):
    """Each kind of damage in a session file is a CorruptRecordError naming the line."""
    seed(backend, "s1", None, say("one"))
    path = session_file(directory, "s1")
    with path.open("ab") as file:
        file.write(as_written(line))
    with pytest.raises(CorruptRecordError, match=reason) as info:
        JSONLBackend(directory)
    assert (info.value.path, info.value.line) == (path, 3)


def test_failed_open_leaves_no_open_file(backend, directory):
    """Opening a damaged directory again and again does not leak file descriptors."""
    seed(backend, "s1", None, say("one"))
    with session_file(directory, "s1").open("ab") as file:
        file.write(b"garbage\n")
    before = len(list(Path("/proc/self/fd").iterdir()))
    for _ in range(5):
        with pytest.raises(CorruptRecordError):
            JSONLBackend(directory)
    assert len(list(Path("/proc/self/fd").iterdir())) == before


@pytest.mark.parametrize(
    "line",
    [
        b'{"op":"put","tx":99,"entry":{"session_key":"k"}}',
        b'{"op":"touch","tx":99,"at":"2026-05-01T09:00:00Z"}',
        b'{"op":"plan","tx":99,"at":"2026-05-01T09:00:00Z","end":[["s1"]]}',
        b'{"op":"plan","tx":99,"at":"2026-05-01T09:00:00Z","end":[],"deletes":"k"}',
        b'{"op":"plan","tx":99,"at":"2026-05-01T09:00:00Z","end":[],"deletes":[7]}',
        b'{"op":"plan","tx":99,"at":"2026-05-01T09:00:00Z","end":[],"rekey":[["s1"]]}',
        b'{"op":"plan","tx":99,"at":"2026-05-01T09:00:00Z","end":[],"rekey":[["../x","k"]]}',
        b'{"op":"remove","tx":99,"session":"s1","orphans":["../x"]}',
        b'{"op":"journal","format":1,"base_tx":0}',
        b'{"op":"put","tx":1,"entry":{}}',
        b'{"op":"commit","tx":99}',
        b'{"op":"rename","tx":99}',
    ],
)
def test_every_malformed_journal_line_is_reported(backend, directory, line):
    """Each kind of damage in the journal is a CorruptRecordError naming the journal line."""
    seed(backend, "s1", KEY)
    journal = directory / "journal.jsonl"
    count = len(journal.read_bytes().splitlines())
    with journal.open("ab") as file:
        file.write(as_written(line))
    with pytest.raises(CorruptRecordError) as info:
        JSONLBackend(directory)
    assert (info.value.path, info.value.line) == (journal, count + 1)


def test_damage_seen_by_a_running_process_changes_nothing(backend, directory):
    """A process catching up with a damaged file raises and keeps serving nothing half-read."""
    seed(backend, "s1", KEY, say("one"))
    other = JSONLBackend(directory)
    try:
        backend.append_messages("s1", [say("two")])
        path = session_file(directory, "s1")
        path.write_bytes(path.read_bytes().replace(b'"two"', b'"two'))
        with pytest.raises(CorruptRecordError):
            other.get_messages("s1")
        with pytest.raises(CorruptRecordError):
            other.get_entry(KEY)
        assert [m.content for m in other._engine.state.sessions["s1"].loaded.messages.values()] == [
            "one"
        ]
    finally:
        other.close()


@pytest.mark.parametrize("where", ["session", "journal", "snapshot"])
def test_newer_format_is_refused(backend, directory, where):
    """A file written by a newer library version raises IncompatibleStoreError, untouched."""
    seed(backend, "s1", KEY, say("x"))
    backend.compact()
    path = {
        "session": session_file(directory, "s1"),
        "journal": directory / "journal.jsonl",
        "snapshot": directory / "routing.jsonl",
    }[where]
    edit_lines(path, b'"format":2', b'"format":99')
    changed = path.read_bytes()
    with pytest.raises(IncompatibleStoreError) as info, JSONLBackend(directory) as reopened:
        reopened.get_messages("s1")  # a session file is read when first needed, not on opening
    assert (info.value.found_version, info.value.supported_version) == (99, 2)
    assert str(path) in str(info.value)
    with pytest.raises(IncompatibleStoreError):
        JSONLBackend.repair(directory)
    assert path.read_bytes() == changed


def test_missing_session_file_is_reported(backend, directory):
    """A session file deleted by hand makes opening fail with the missing path."""
    seed(backend, "s1", KEY)
    session_file(directory, "s1").unlink()
    with pytest.raises(CorruptRecordError, match="missing") as info:
        JSONLBackend(directory)
    assert info.value.path == session_file(directory, "s1")


def test_missing_journal_is_reported(backend, directory):
    """A lost journal is never silently replaced by an empty index."""
    seed(backend, "s1", KEY)
    journal = directory / "journal.jsonl"
    saved = journal.read_bytes()
    journal.unlink()
    with pytest.raises(CorruptRecordError, match="session files exist"):
        JSONLBackend(directory)
    with pytest.raises(CorruptRecordError, match="disappeared"):
        backend.get_entry(KEY)
    journal.write_bytes(saved)
    backend.compact()
    journal.unlink()
    with pytest.raises(CorruptRecordError, match=r"routing\.jsonl exists"):
        JSONLBackend(directory)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda path: edit_lines(path, b'"entries":1', b'"entries":2'), "incomplete"),
        (
            lambda path: path.write_bytes(path.read_bytes().split(b"\n", 1)[1]),
            "starts with its header",
        ),
        (
            lambda path: path.write_bytes(path.read_bytes() + as_written(b'{"type":"comment"}')),
            "unknown snapshot line",
        ),
    ],
)
def test_damaged_snapshot_is_reported(backend, directory, change, message):
    """A snapshot missing lines or its header is refused."""
    seed(backend, "s1", KEY)
    backend.compact()
    change(directory / "routing.jsonl")
    with pytest.raises(CorruptRecordError, match=message):
        JSONLBackend(directory)


def test_journal_ahead_of_snapshot_is_reported(backend, directory):
    """A journal continuing from a later transaction than the snapshot means lost records."""
    seed(backend, "s1", KEY)
    backend.compact()
    (directory / "routing.jsonl").unlink()
    with pytest.raises(CorruptRecordError, match="continues from transaction"):
        JSONLBackend(directory)


def test_lines_written_by_another_program_are_refused(backend, directory):
    """An append finding complete lines the journal never announced refuses to write."""
    seed(backend, "s1", KEY, say("one"))
    path = session_file(directory, "s1")
    with path.open("ab") as file:
        file.write(as_written(b'{"type":"reopen","tx":1}'))
    with pytest.raises(CorruptRecordError, match="another program") as info:
        backend.append_messages("s1", [say("two")])
    assert info.value.path == path
    assert [m.content for m in backend.get_messages("s1")] == ["one"]


def test_stray_session_file_is_not_overwritten(backend, directory):
    """Creating a session whose file exists but is not in the index refuses to overwrite it."""
    stray = session_file(directory, "s9")
    stray.write_bytes(b"precious\n")
    with pytest.raises(StorageError, match="repair"):
        backend.create_session(record("s9"))
    with pytest.raises(StorageError, match="repair"):
        seed(backend, "s9", KEY)
    assert stray.read_bytes() == b"precious\n"
    assert backend.get_entry(KEY) is None


def test_a_stored_lone_surrogate_is_a_corrupt_record(backend, directory):
    """Text no model accepts any more (written escaped by earlier versions) names its line."""
    seed(backend, "s1", None, say("one"))
    path = session_file(directory, "s1")
    message = {"role": "user", "content": "broken \ud800 text", "id": 2}
    with path.open("ab") as file:
        file.write(
            signed_bytes(b'{"type":"message","tx":1,"message":%s}' % json.dumps(message).encode())
        )
    with pytest.raises(CorruptRecordError, match="surrogate") as info:
        JSONLBackend(directory)
    assert (info.value.path, info.value.line) == (path, 3)


def test_session_file_without_header_is_reported(backend, directory):
    """A listed session file whose first line is not a header is refused."""
    seed(backend, "s1", None, say("one"))
    path = session_file(directory, "s1")
    path.write_bytes(path.read_bytes().split(b"\n", 1)[1])
    with pytest.raises(CorruptRecordError, match="starts with its header") as info:
        JSONLBackend(directory)
    assert info.value.line == 1
    path.write_bytes(b"")
    with pytest.raises(CorruptRecordError, match="starts with its header"):
        JSONLBackend(directory)


def test_session_file_of_another_session_is_reported(backend, directory):
    """A file whose header names another session than its file name is refused."""
    seed(backend, "s1", None, say("one"))
    seed(backend, "s2", None, say("two"))
    session_file(directory, "s1").write_bytes(session_file(directory, "s2").read_bytes())
    with pytest.raises(CorruptRecordError, match="header names session 's2'"):
        JSONLBackend(directory)


def test_journal_without_header_is_reported(backend, directory):
    """A journal whose first line is not its header is refused."""
    seed(backend, "s1", KEY)
    journal = directory / "journal.jsonl"
    journal.write_bytes(journal.read_bytes().split(b"\n", 1)[1])
    with pytest.raises(CorruptRecordError, match="starts with its header"):
        JSONLBackend(directory)


def test_a_shrunken_session_file_is_refused(backend, directory):
    """An append finding its file shorter than the journal says refuses to write."""
    seed(backend, "s1", KEY, say("one"), say("two"))
    path = session_file(directory, "s1")
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(CorruptRecordError, match="accounts for"):
        backend.append_messages("s1", [say("three")])


# -- the journal cross-checked against the session files -------------------------------------------


def test_journal_cut_to_its_header_is_refused_not_started_over(backend, directory):
    """A journal that lost every record opens with an error pointing at repair(), not empty."""
    seed(backend, "s1", KEY, say("one"))
    seed(backend, "s2", "agent:main:telegram:dm:2", say("two"))
    backend.close()
    journal = directory / "journal.jsonl"
    journal.write_bytes(journal.read_bytes().split(b"\n", 1)[0] + b"\n")
    with pytest.raises(CorruptRecordError, match=r"not in the index.*repair\(\)") as info:
        JSONLBackend(directory)
    assert info.value.path == session_file(directory, "s1")
    report = JSONLBackend.repair(directory)
    assert report.adopted_sessions == ("s1", "s2")
    with JSONLBackend(directory) as repaired:
        assert repaired.get_entry(KEY).session_id == "s1"  # type: ignore[union-attr]
        assert [m.content for m in repaired.get_messages("s2")] == ["two"]


def test_journal_that_lost_its_last_records_is_refused(backend, directory):
    """Session-file lines from transactions the journal no longer has mean lost records."""
    seed(backend, "s1", KEY, say("one"))
    journal = directory / "journal.jsonl"
    kept = journal.read_bytes()
    backend.append_messages("s1", [say("two")])
    backend.close()
    journal.write_bytes(kept)
    with pytest.raises(CorruptRecordError, match=r"transaction 2.*journal ends at 1") as info:
        JSONLBackend(directory)
    assert (info.value.path, info.value.line) == (session_file(directory, "s1"), 3)
    JSONLBackend.repair(directory)
    with JSONLBackend(directory) as repaired:
        assert [m.content for m in repaired.get_messages("s1")] == ["one", "two"]
        repaired.append_messages("s1", [say("three")])
    with JSONLBackend(directory) as again:
        assert [m.content for m in again.get_messages("s1")] == ["one", "two", "three"]


def test_session_file_created_after_the_snapshot_needs_the_journal(backend, directory):
    """After a compaction, a session file neither the snapshot nor the journal lists is refused."""
    seed(backend, "s1", KEY)
    backend.compact()
    journal = directory / "journal.jsonl"
    kept = journal.read_bytes()
    seed(backend, "s2", None, say("late"))
    backend.close()
    journal.write_bytes(kept)
    with pytest.raises(CorruptRecordError, match="not in the index") as info:
        JSONLBackend(directory)
    assert info.value.path == session_file(directory, "s2")
