"""JSONLBackend beyond the conformance suite: files, torn and corrupt lines, recovery, processes."""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import filelock
import pytest

import hermes_sessions
from hermes_sessions.backends import JSONLBackend
from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.backends.jsonl import _engine as _jsonl_store
from hermes_sessions.backends.jsonl import _state as _jsonl_state
from hermes_sessions.exceptions import (
    BackendClosedError,
    CorruptRecordError,
    IncompatibleStoreError,
    InvalidIdError,
    LockTimeoutError,
    SessionNotFoundError,
    StorageError,
)
from hermes_sessions.protocols import EntryWrite, RotationPlan
from hermes_sessions.queries import SearchQuery, SessionQuery
from hermes_sessions.testing._support import T0, entry_for, minutes, record, say, seed

KEY = "agent:main:telegram:dm:1"
SHARED_KEY = "agent:main:cli:group:shared"
START = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.fixture
def directory(tmp_path):
    """The data directory of one test (not created yet)."""
    return tmp_path / "data"


@pytest.fixture
def backend(directory):
    """A JSONL backend on ``directory``, closed afterwards."""
    with JSONLBackend(directory) as opened:
        yield opened


def json_lines(path):
    """Every line of ``path`` decoded as plain JSON (no library code involved)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def session_file(directory, session_id):
    """Where a session's file lives."""
    return directory / "sessions" / f"{session_id}.jsonl"


def rotation(key, old, new, revision):
    """The plan of an idle reset of ``key`` from ``old`` to a new session ``new``."""
    at = minutes(60)
    return RotationPlan(
        at=at,
        create=record(new, started_at=at),
        entries=[EntryWrite(entry=entry_for(key, new, at=at), expected_revision=revision)],
        end=[(old, "idle")],
    )


# -- the files -------------------------------------------------------------------------------------


def test_files_are_plain_json_lines(backend, directory):
    """Session files, journal and snapshot are JSON lines a person (or grep) can read."""
    seed(backend, "s1", KEY, say("你好 docker", platform_message_id="m1"), title="标题")
    backend.append_messages("s1", [say("second", role="assistant")], touch_at=minutes(1))
    backend.end_session("s1", "idle", at=minutes(2))
    backend.compact()
    header, first, second, end = json_lines(session_file(directory, "s1"))
    assert header["type"] == "session"
    assert header["format"] == 1
    assert header["record"]["id"] == "s1"
    assert header["record"]["session_key"] == KEY
    assert header["record"]["title"] == "标题"
    assert (first["type"], first["message"]["content"], first["message"]["id"]) == (
        "message",
        "你好 docker",
        1,
    )
    assert second["message"]["role"] == "assistant"
    assert (end["type"], end["reason"]) == ("end", "idle")
    assert "你好 docker" in session_file(directory, "s1").read_text(encoding="utf-8")
    snapshot = json_lines(directory / "routing.jsonl")
    assert snapshot[0]["type"] == "snapshot"
    entries = [line["entry"] for line in snapshot if line["type"] == "entry"]
    assert [(e["session_key"], e["session_id"]) for e in entries] == [(KEY, "s1")]
    assert entries[0]["updated_at"] == "2026-05-01T09:01:00Z"
    assert json_lines(directory / "journal.jsonl") == [
        {"op": "journal", "format": 1, "base_tx": snapshot[0]["last_tx"]}
    ]


def test_every_write_is_announced_in_the_journal(backend, directory):
    """An append is one journal line naming the session; activity is one line, no rewrite."""
    seed(backend, "s1", KEY)
    snapshot_before = (directory / "routing.jsonl").exists()
    before = json_lines(directory / "journal.jsonl")
    backend.append_messages("s1", [say("q"), say("a", role="assistant")], touch_at=minutes(1))
    backend.record_activity(KEY, minutes(2), last_prompt_tokens=10)
    added = json_lines(directory / "journal.jsonl")[len(before) :]
    assert [(line["op"], line.get("session"), line.get("lines")) for line in added] == [
        ("write", "s1", 2),
        ("touch", None, None),
    ]
    assert added[1]["key"] == KEY
    assert (directory / "routing.jsonl").exists() == snapshot_before


def test_no_op_writes_write_nothing(backend, directory):
    """Writes that change nothing (old activity, ending an ended session, ...) add no line."""
    seed(backend, "s1", KEY, say("hi", platform_message_id="p"))
    backend.end_session("s1", "idle", at=minutes(1))
    size = (directory / "journal.jsonl").stat().st_size
    backend.record_activity(KEY, T0 - timedelta(minutes=5))
    backend.end_session("s1", "daily", at=minutes(2))
    backend.update_session("s1")
    assert backend.set_active("s1", [99], active=False) == 0
    assert backend.delete_messages("s1", [99]) == 0
    backend.append_messages("s1", [say("hi again", platform_message_id="p")])
    backend.append_messages("s1", [say("hi again", platform_message_id="p")], touch_at=T0)
    backend.release_lease("nothing", "nobody")
    assert (directory / "journal.jsonl").stat().st_size == size


def test_non_numeric_increments_write_nothing(backend, directory):
    """An increment that is not a number (a bool included) is refused before any write."""
    seed(backend, "s1", KEY)
    size = (directory / "journal.jsonl").stat().st_size
    with pytest.raises(TypeError, match="must be a number"):
        backend.update_session("s1", increments={"input_tokens": True})
    assert (directory / "journal.jsonl").stat().st_size == size


def test_values_that_are_not_json_write_nothing(backend, directory):
    """A message, record or plan holding a non-JSON value raises TypeError before any write."""
    seed(backend, "s1", KEY)
    size = (directory / "journal.jsonl").stat().st_size
    with pytest.raises(TypeError):
        backend.append_messages("s1", [say("x", extra={"when": object()})])
    with pytest.raises(TypeError):
        backend.update_session("s1", values={"metadata": {"tags": {"a", "b"}}})
    with pytest.raises(TypeError):
        backend.create_session(record("s2", model_config={"f": object()}))
    with pytest.raises(TypeError):
        backend.replace_messages("s1", [say("x", extra={"when": object()})])
    with pytest.raises(TypeError):
        backend.apply(RotationPlan(at=T0, create=record("s3", metadata={"x": object()})))
    assert (directory / "journal.jsonl").stat().st_size == size
    assert backend.get_session("s2") is None
    assert backend.get_session("s3") is None
    assert sorted(p.name for p in (directory / "sessions").iterdir()) == ["s1.jsonl"]


def test_duplicate_append_still_records_activity(backend):
    """A redelivered message is not stored again but still counts as activity on the key."""
    seed(backend, "s1", KEY, say("hi", platform_message_id="p"))
    backend.append_messages("s1", [say("hi", platform_message_id="p")], touch_at=minutes(9))
    entry = backend.get_entry(KEY)
    assert entry is not None
    assert entry.updated_at == minutes(9)
    assert len(backend.get_messages("s1")) == 1


def test_edits_rewrite_the_file_without_the_old_text(backend, directory):
    """replace_message, replace_messages and delete_messages leave no trace of the old text."""
    seed(backend, "s1", None, say("secret one"), say("secret two"), say("keep"))
    first, second, _ = backend.get_messages("s1")
    backend.replace_message("s1", first.id or 0, say("redacted"))
    backend.delete_messages("s1", [second.id or 0])
    text = session_file(directory, "s1").read_text(encoding="utf-8")
    assert "secret" not in text
    assert [m.content for m in JSONLBackend(directory).get_messages("s1")] == ["redacted", "keep"]
    backend.replace_messages("s1", [say("fresh")])
    assert "keep" not in session_file(directory, "s1").read_text(encoding="utf-8")
    assert not list((directory / "sessions").glob(".*"))


def test_message_ids_are_never_reused_after_a_rewrite(backend, directory):
    """The next message id survives deleting the newest messages and reopening."""
    seed(backend, "s1", None, say("a"), say("b"), say("c"))
    newest = backend.get_messages("s1")[-1]
    backend.delete_messages("s1", [newest.id or 0])
    with JSONLBackend(directory) as again:
        (added,) = again.append_messages("s1", [say("d")])
    assert (added.id or 0) > (newest.id or 0)


def test_record_round_trip_keeps_last_activity_through_rewrites(backend, directory):
    """Counters and last activity read back from a rewritten file equal the cached ones."""
    seed(backend, "s1", None, say("a", timestamp=minutes(5)), say("b", timestamp=minutes(1)))
    backend.update_session("s1", increments={"input_tokens": 3, "estimated_cost_usd": 0.25})
    (old, _) = backend.get_messages("s1")
    backend.replace_message("s1", old.id or 0, say("a2", timestamp=minutes(30)))
    backend.set_active("s1", [old.id or 0], active=False)
    expected = backend.get_session("s1")
    with JSONLBackend(directory) as again:
        assert again.get_session("s1") == expected
    assert expected is not None
    assert (expected.last_active_at, expected.message_count) == (minutes(5), 1)


def test_session_ids_never_name_a_path_outside(backend, directory):
    """Ids like ``../x`` are refused before any path is built from them."""
    for call in (
        lambda: backend.get_session("../outside"),
        lambda: backend.append_messages("../../etc/passwd", [say("x")]),
        lambda: backend.get_messages(".hidden"),
        lambda: backend.delete_session("a/b"),
    ):
        with pytest.raises(InvalidIdError):
            call()
    assert sorted(p.name for p in directory.parent.iterdir()) == ["data"]


def test_files_and_directories_are_private(backend, directory):
    """Every directory is 0700 and every file 0600, lock, snapshot and backups included."""
    seed(backend, "s1", KEY, say("x"))
    backend.compact()
    session_file(directory, "s1").write_bytes(b"garbage\n")
    JSONLBackend.repair(directory)
    paths = [directory, *directory.rglob("*")]
    assert any(p.name == "routing.jsonl" for p in paths)
    assert any("backups" in p.parts for p in paths)
    for path in paths:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), path


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
        file.write(line + b"\n")
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
        file.write(line + b"\n")
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
        assert [
            m.content for m in other._store.state.sessions["s1"].transcript.messages.values()
        ] == ["one"]
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
    original = path.read_bytes()
    changed = original.replace(b'"format":1', b'"format":99', 1)
    path.write_bytes(changed)
    with pytest.raises(IncompatibleStoreError) as info:
        JSONLBackend(directory)
    assert (info.value.found_version, info.value.supported_version) == (99, 1)
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
        (lambda text: text.replace('"entries":1', '"entries":2'), "incomplete"),
        (lambda text: text.split("\n", 1)[1], "starts with its header"),
        (lambda text: text + '{"type":"comment"}\n', "unknown snapshot line"),
    ],
)
def test_damaged_snapshot_is_reported(backend, directory, change, message):
    """A snapshot missing lines or its header is refused."""
    seed(backend, "s1", KEY)
    backend.compact()
    snapshot = directory / "routing.jsonl"
    snapshot.write_text(change(snapshot.read_text(encoding="utf-8")), encoding="utf-8")
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
        file.write(b'{"type":"reopen","tx":1}\n')
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


# -- recovery at fixed crash points ----------------------------------------------------------------


def test_rotation_cut_short_is_completed_by_the_next_process(backend, directory, monkeypatch):
    """A crash after a rotation was announced is rolled forward: no half rotation is seen."""
    seed(backend, "old", KEY, say("before"))

    def crash(*_args, **_kwargs):
        raise OSError("simulated crash after the announcement")

    with monkeypatch.context() as patch:
        patch.setattr(_jsonl_store.Store, "_complete_plan", crash)
        with pytest.raises(StorageError, match="simulated crash"):
            backend.apply(rotation(KEY, "old", "new", 1))
    with JSONLBackend(directory) as after:
        entry = after.get_entry(KEY)
        assert entry is not None
        assert (entry.session_id, entry.revision) == ("new", 2)
        old = after.get_session("old")
        assert old is not None
        assert old.end_reason == "idle"
        assert after.get_session("new") is not None
    commits = [line for line in json_lines(directory / "journal.jsonl") if line["op"] == "commit"]
    assert len(commits) == 2
    assert backend.get_entry(KEY) == entry


def test_rotation_cut_between_files_is_completed(backend, directory, monkeypatch):
    """New file written, old session not yet ended, no commit: the next process finishes it."""
    seed(backend, "old", KEY)
    real = _jsonl_store.Store._ensure_group

    def crash_in_group(self, session_id, tx, lines, records):
        real(self, session_id, tx, lines, records)
        path = self.session_path(session_id)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) - 7])  # the end line torn in half
        raise OSError("killed mid-write")

    monkeypatch.setattr(_jsonl_store.Store, "_ensure_group", crash_in_group)
    with pytest.raises(StorageError):
        backend.apply(rotation(KEY, "old", "new", 1))
    monkeypatch.undo()
    with JSONLBackend(directory) as after:
        old = after.get_session("old")
        assert old is not None
        assert old.end_reason == "idle"
        assert after.get_entry(KEY).session_id == "new"  # type: ignore[union-attr]
    assert [line["type"] for line in json_lines(session_file(directory, "old"))] == [
        "session",
        "end",
    ]


def test_create_cut_short_is_completed(backend, monkeypatch):
    """A session file half written when the process died is rewritten from the journal."""
    real = _jsonl_store.create_file

    def torn_create(path, data, *, sync):
        real(path, data[: len(data) // 2], sync=sync)
        raise OSError("killed")

    monkeypatch.setattr(_jsonl_store, "create_file", torn_create)
    with pytest.raises(StorageError):
        backend.create_session(record("s1", title="complete me"))
    monkeypatch.undo()
    stored = backend.get_session("s1")
    assert stored is not None
    assert stored.title == "complete me"


def test_removal_cut_short_is_completed(backend, directory, monkeypatch):
    """A deletion that died before orphaning the children is finished by the next process."""
    backend.create_session(record("parent"))
    backend.create_session(record("child", parent_session_id="parent"))

    def crash(*_args, **_kwargs):
        raise OSError("killed before the children were orphaned")

    monkeypatch.setattr(_jsonl_store.Store, "_ensure_group", crash)
    with pytest.raises(StorageError):
        backend.delete_session("parent")
    monkeypatch.undo()
    with JSONLBackend(directory) as after:
        assert after.get_session("parent") is None
        child = after.get_session("child")
        assert child is not None
        assert child.parent_session_id is None


def test_append_cut_short_is_voided_with_its_activity(backend, directory, monkeypatch):
    """Half a batch on disk after a crash: the batch, and the activity it carried, never happen."""
    seed(backend, "s1", KEY, say("before"))
    real = _jsonl_store.append_lines

    def half(path, data, *, expected_size, sync):
        first = data[: data.index(b"\n") + 1]
        real(path, first, expected_size=expected_size, sync=sync)
        raise OSError("killed between two lines")

    monkeypatch.setattr(_jsonl_store, "append_lines", half)
    with pytest.raises(StorageError):
        backend.append_messages("s1", [say("q"), say("a", role="assistant")], touch_at=minutes(5))
    monkeypatch.undo()
    with JSONLBackend(directory) as after:
        assert [m.content for m in after.get_messages("s1")] == ["before"]
        assert after.get_entry(KEY).updated_at == T0  # type: ignore[union-attr]
        (next_one,) = after.append_messages("s1", [say("again")])
    assert [m.content for m in backend.get_messages("s1")] == ["before", "again"]
    assert next_one.id == 2
    ops = [line["op"] for line in json_lines(directory / "journal.jsonl")]
    assert ops[-3:] == ["write", "void", "write"]


def test_failed_rewrite_keeps_the_old_file(backend, directory, monkeypatch):
    """A rewrite that dies before its rename leaves the old transcript and no temp file."""
    seed(backend, "s1", None, say("keep me"))

    def crash(path, data, *, sync):
        del sync
        _jsonl_store.temp_path(path).write_bytes(data[:10])
        raise OSError("killed before rename")

    monkeypatch.setattr(_jsonl_store, "replace_file", crash)
    with pytest.raises(StorageError):
        backend.replace_messages("s1", [say("new")])
    monkeypatch.undo()
    assert [m.content for m in backend.get_messages("s1")] == ["keep me"]
    assert not list((directory / "sessions").glob(".*"))


# -- catching up and compaction --------------------------------------------------------------------


def test_catch_up_reads_only_what_changed(backend, directory, monkeypatch):
    """Another process's append costs a reader one tail read of one file, nothing else."""
    for n in range(20):
        seed(backend, f"s{n}", f"agent:main:x:dm:{n}", say(f"m{n}"))
    reader = JSONLBackend(directory)
    try:
        before = reader._store.state.sessions["s3"]
        backend.append_messages("s7", [say("new")], touch_at=minutes(1))
        tails, loads = [], []
        monkeypatch.setattr(
            _jsonl_store, "read_tail", lambda *a: tails.append(a[2]) or _jsonl_state.read_tail(*a)
        )
        monkeypatch.setattr(
            _jsonl_store,
            "load_session",
            lambda *a: loads.append(a[1]) or _jsonl_state.load_session(*a),
        )
        assert reader.get_entry("agent:main:x:dm:7").updated_at == minutes(1)  # type: ignore[union-attr]
        assert [m.content for m in reader.get_messages("s7")] == ["m7", "new"]
        reader.get_messages("s3")
        assert (tails, loads) == (["s7"], [])
        assert reader._store.state.sessions["s3"] is before
    finally:
        reader.close()


def test_compaction_keeps_everything(directory):
    """After automatic compactions, a fresh open sees exactly what the writer saw."""
    with JSONLBackend(directory, compact_threshold=5) as backend:
        for n in range(6):
            seed(backend, f"s{n}", f"agent:main:x:dm:{n}", say(f"m{n}"))
            backend.record_activity(f"agent:main:x:dm:{n}", minutes(n + 1), last_prompt_tokens=n)
        backend.apply(rotation("agent:main:x:dm:0", "s0", "s0b", 1))
        backend.delete_entry("agent:main:x:dm:5", expected_revision=1)
        backend.delete_session("s5")
        assert backend.acquire_lease("compress:s1", "h1", ttl=timedelta(hours=1), now=T0)
        backend.compact()
        lines = json_lines(directory / "journal.jsonl")
        assert len(lines) == 1
        expected = (
            backend.entries(),
            [backend.get_session(f"s{n}") for n in range(6)],
            backend.get_messages("s0"),
        )
    with JSONLBackend(directory) as again:
        assert (
            again.entries(),
            [again.get_session(f"s{n}") for n in range(6)],
            again.get_messages("s0"),
        ) == expected
        assert not again.acquire_lease("compress:s1", "h2", ttl=timedelta(hours=1), now=T0)
        assert again.get_session("s0b") is not None


def test_lagging_process_follows_a_compaction(backend, directory):
    """A process that missed compacted journal records re-reads only the files that changed."""
    for n in range(5):
        seed(backend, f"s{n}", f"agent:main:x:dm:{n}", say(f"m{n}"))
    lagging = JSONLBackend(directory)
    try:
        untouched = lagging._store.state.sessions["s1"]
        backend.append_messages("s2", [say("late")], touch_at=minutes(3))
        backend.delete_session("s4")
        seed(backend, "s5", "agent:main:x:dm:5")
        backend.compact()
        assert [m.content for m in lagging.get_messages("s2")] == ["m2", "late"]
        assert lagging.get_session("s4") is None
        assert lagging.get_session("s5") is not None
        assert lagging.get_entry("agent:main:x:dm:2").updated_at == minutes(3)  # type: ignore[union-attr]
        assert lagging._store.state.sessions["s1"] is untouched
        assert lagging.entries() == backend.entries()
    finally:
        lagging.close()


def test_compaction_cut_short_keeps_the_journal(backend, directory, monkeypatch):
    """A crash between writing the snapshot and the new journal loses nothing."""
    seed(backend, "s1", KEY, say("x"))
    real = _jsonl_store.replace_file

    def snapshot_only(path, data, *, sync):
        if path.name == "journal.jsonl":
            raise OSError("killed between the two renames")
        real(path, data, sync=sync)

    monkeypatch.setattr(_jsonl_store, "replace_file", snapshot_only)
    with pytest.raises(StorageError):
        backend.compact()
    monkeypatch.undo()
    backend.append_messages("s1", [say("y")], touch_at=minutes(2))
    with JSONLBackend(directory) as again:
        assert [m.content for m in again.get_messages("s1")] == ["x", "y"]
        assert again.get_entry(KEY).updated_at == minutes(2)  # type: ignore[union-attr]


# -- search ----------------------------------------------------------------------------------------


QUERIES = ["docker", "机器", "deploy OR 部署", '"docker compose"', "net*", "-x docker", "🚀"]


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("order", ["rank", "newest", "oldest"])
def test_search_matches_the_reference_backend(directory, query, order):
    """The same data gives the same hits, scores and snippets as InMemoryBackend (reopened)."""
    texts = [
        "docker-compose up fails",
        "use docker compose v2",
        "docker部署redis",
        "机器学习",
        "飞书机器人 deploy 🚀",
        "the network is down",
        "x docker",
    ]
    reference = InMemoryBackend()
    with JSONLBackend(directory) as jsonl:
        for backend in (reference, jsonl):
            for s in range(3):
                seed(
                    backend,
                    f"s{s}",
                    None,
                    *(say(t, timestamp=minutes(i + s)) for i, t in enumerate(texts[s::2])),
                    source="tool" if s == 2 else "telegram",
                )
            backend.set_active("s0", [1], active=False)
    search = SearchQuery(text=query, order=order, limit=None, exclude_sources=())
    with JSONLBackend(directory) as reopened:
        got = reopened.search(search)
    want = reference.search(search)
    assert [(h.message, h.session, h.score, h.snippet, h.spans) for h in got] == [
        (h.message, h.session, h.score, h.snippet, h.spans) for h in want
    ]


# -- the object itself -----------------------------------------------------------------------------


def test_constructor_checks_its_arguments(directory):
    """Bad options fail at construction, before anything is created."""
    with pytest.raises(ValueError, match="durability"):
        JSONLBackend(directory, durability="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="compact_threshold"):
        JSONLBackend(directory, compact_threshold=0)
    with pytest.raises(ValueError, match="lock_timeout"):
        JSONLBackend(directory, lock_timeout=-1)
    assert not directory.exists()


def test_normal_durability_reads_back(directory):
    """durability='normal' (no fsync) stores the same data."""
    with JSONLBackend(directory, durability="normal") as backend:
        seed(backend, "s1", KEY, say("x"))
        backend.append_messages("s1", [say("w")])
        backend.replace_messages("s1", [say("y")])
        backend.create_session(record("gone"))
        backend.delete_session("gone")
        backend.compact()
        assert repr(backend) == f"<JSONLBackend {str(directory)!r} normal>"
    with JSONLBackend(directory) as again:
        assert [m.content for m in again.get_messages("s1")] == ["y"]
        assert again.directory == directory
    assert repr(again).endswith("closed>")


def test_closed_backend_refuses_compaction(backend):
    """compact() after close raises BackendClosedError."""
    backend.close()
    with pytest.raises(BackendClosedError):
        backend.compact()


def test_lock_timeout_is_reported(backend, directory):
    """A directory lock held elsewhere for too long gives LockTimeoutError, not a hang."""
    seed(backend, "s1", KEY)
    holder = filelock.FileLock(directory / ".lock")
    ready, done = threading.Event(), threading.Event()

    def hold():
        with holder:
            ready.set()
            done.wait()

    thread = threading.Thread(target=hold)
    thread.start()
    ready.wait()
    try:
        with pytest.raises(LockTimeoutError) as info:
            JSONLBackend(directory, lock_timeout=0.01)
        assert info.value.resource.endswith(".lock")
        assert backend.get_entry(KEY) is not None  # a read with nothing new needs no lock
    finally:
        done.set()
        thread.join()


def test_session_listing_reflects_other_processes(backend, directory):
    """A listing in one process shows sessions another one just created."""
    with JSONLBackend(directory) as other:
        seed(other, "s1", KEY, say("hello there"))
        page = backend.list_sessions(SessionQuery())
    assert [(item.record.id, item.preview) for item in page.items] == [("s1", "hello there")]


def test_os_errors_become_storage_errors(backend, directory, monkeypatch):
    """A file-system failure reaches the caller as StorageError with the cause chained."""
    seed(backend, "s1", KEY)

    def broken(*_args, **_kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(_jsonl_store, "append_journal", broken)
    with pytest.raises(StorageError) as info:
        backend.record_activity(KEY, minutes(1))
    assert isinstance(info.value.__cause__, PermissionError)
    assert backend.get_entry(KEY).updated_at == T0  # type: ignore[union-attr]
    assert os.access(directory, os.W_OK)


# -- agreement with the reference on unusual plans ------------------------------------------------


def _unusual_plans():
    """Plans the store rarely makes, each applied after seeding ``s1`` (key KEY) and ``s2``."""
    return {
        "ended at birth": RotationPlan(
            at=minutes(5),
            create=record("s3"),
            messages=[say("born ended")],
            end=[("s3", "compression"), ("s2", "idle"), ("s2", "daily")],
        ),
        "reopen an open session and end it": RotationPlan(
            at=minutes(5), reopen=["s2", "s2"], end=[("s2", "idle")]
        ),
        "repoint then write the same key": RotationPlan(
            at=minutes(5),
            repoint=[("s1", "s2")],
            entries=[EntryWrite(entry=entry_for(KEY, "s2", suspended=True), expected_revision=1)],
            end=[("s1", "compression")],
        ),
    }


@pytest.mark.parametrize("name", sorted(_unusual_plans()))
def test_unusual_plans_match_the_reference_backend(directory, name):
    """Plans outside the store's usual shapes leave the same state as InMemoryBackend's apply."""
    plan = _unusual_plans()[name]
    states = []
    reference = InMemoryBackend()
    with JSONLBackend(directory) as jsonl:
        for backend in (reference, jsonl):
            seed(backend, "s1", KEY, say("one"))
            seed(backend, "s2", None, say("two", platform_message_id="p1"))
            written = backend.apply(plan)
            states.append((written, _state(backend)))
    with JSONLBackend(directory) as reopened:
        assert _state(reopened) == states[1][1]
    assert states[0] == states[1]


def _state(backend):
    sessions = [backend.get_session(s) for s in ("s1", "s2", "s3")]
    messages = [
        backend.get_messages(s.id, include_inactive=True) for s in sessions if s is not None
    ]
    return backend.entries(), sessions, messages


def test_plan_requiring_an_unknown_session_writes_nothing(backend, directory):
    """require_open naming a session that does not exist raises SessionNotFoundError."""
    size = (directory / "journal.jsonl").stat().st_size
    with pytest.raises(SessionNotFoundError):
        backend.apply(RotationPlan(at=T0, create=record("s1"), require_open=["ghost"]))
    assert backend.get_session("s1") is None
    assert (directory / "journal.jsonl").stat().st_size == size


def test_reopening_an_open_session_writes_nothing(backend, directory):
    """Reopening a session that never ended returns it unchanged without a write."""
    seed(backend, "s1", KEY)
    size = (directory / "journal.jsonl").stat().st_size
    assert backend.reopen_session("s1") == backend.get_session("s1")
    assert (directory / "journal.jsonl").stat().st_size == size


def test_text_that_is_not_utf8_round_trips(backend, directory):
    """A lone surrogate in a message is written with escapes and reads back unchanged."""
    seed(backend, "s1", None, say("broken \ud800 text", extra={"note": "\udfff"}))
    assert b"\\ud800" in session_file(directory, "s1").read_bytes()
    with JSONLBackend(directory) as again:
        (message,) = again.get_messages("s1")
    assert message.content == "broken \ud800 text"
    assert message.extra == {"note": "\udfff"}


def test_blank_lines_are_ignored_but_counted(backend, directory):
    """Blank lines (an editor's doing) are skipped and later line numbers stay right."""
    seed(backend, "s1", None, say("one"))
    path = session_file(directory, "s1")
    with path.open("ab") as file:
        file.write(b"\n  \n")
    with JSONLBackend(directory) as again:
        assert [m.content for m in again.get_messages("s1")] == ["one"]
    with path.open("ab") as file:
        file.write(b"oops\n")
    with pytest.raises(CorruptRecordError) as info:
        JSONLBackend(directory)
    assert info.value.line == 5


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


def test_rotation_cut_before_its_commit_is_committed(backend, directory, monkeypatch):
    """Every file written but no commit: the next process only adds the commit."""
    seed(backend, "old", KEY)
    real = _jsonl_store.Store._journal_append

    def no_commit(self, records):
        if any(r.__class__.__name__ == "Commit" for r in records):
            raise OSError("killed before the commit")
        real(self, records)

    monkeypatch.setattr(_jsonl_store.Store, "_journal_append", no_commit)
    with pytest.raises(StorageError):
        backend.apply(rotation(KEY, "old", "new", 1))
    monkeypatch.undo()
    before = session_file(directory, "old").read_bytes()
    with JSONLBackend(directory) as after:
        assert after.get_entry(KEY).session_id == "new"  # type: ignore[union-attr]
    assert session_file(directory, "old").read_bytes() == before


# -- real processes --------------------------------------------------------------------------------

CHILD = Path(__file__).with_name("jsonl_child.py")
CRASH_KEYS = [f"agent:main:cli:dm:{n}" for n in range(3)]


def child(*args):
    """Start ``jsonl_child.py`` with this checkout of the library importable."""
    source = Path(hermes_sessions.__file__).resolve().parent.parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(source), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.Popen(
        [sys.executable, str(CHILD), *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )


def check_after_crash(directory, appended, rotated):
    """Reopening works; acknowledged writes are there once; keys point at sessions; no half turn."""
    with JSONLBackend(directory) as backend:
        for key in CRASH_KEYS:
            entry = backend.get_entry(key)
            assert entry is None or backend.get_session(entry.session_id) is not None, key
        for new, tag in rotated.items():
            assert backend.find_message(new, f"{tag}-s") is not None, new
        sessions = backend.list_sessions(SessionQuery(limit=None)).items
        seen: dict[str, int] = {}
        for item in sessions:
            messages = backend.get_messages(item.record.id, include_inactive=True)
            ids = [m.id or 0 for m in messages]
            assert ids == sorted(set(ids)), item.record.id
            for message in messages:
                pid = message.platform_message_id or ""
                seen[pid] = seen.get(pid, 0) + 1
        for tag, session_id in appended.items():
            assert seen.get(f"{tag}-u") == seen.get(f"{tag}-a") == 1, (tag, session_id)
            assert backend.find_message(session_id, f"{tag}-u") is not None
        halves = {p.rsplit("-", 1)[0] for p in seen if p.endswith(("-u", "-a"))}
        assert all(seen.get(f"{t}-u") == seen.get(f"{t}-a") == 1 for t in halves)


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing(directory):
    """A child appending and rotating is killed 24 times; every acknowledged write survives."""
    rng = random.Random(20260501)  # noqa: S311  # kill moments, not secrets
    appended: dict[str, str] = {}
    rotated: dict[str, str] = {}
    kills = 0
    for round_ in range(24):
        process = child("crash", directory, rng.randrange(1 << 30), round_)
        assert process.stdout is not None
        wanted = rng.randint(1, 12)
        lines = [process.stdout.readline() for _ in range(wanted)]
        # The delay only picks the moment of the kill, so that it falls inside an operation
        # (between an announcement and its data, inside a rotation) rather than right after an
        # acknowledgement; nothing waits on it and the checks hold wherever the kill lands.
        time.sleep(rng.uniform(0, 0.01))
        process.send_signal(signal.SIGKILL)
        rest = process.stdout.read()
        process.wait()
        process.stdin.close()  # type: ignore[union-attr]
        process.stdout.close()
        assert process.returncode == -signal.SIGKILL, b"".join(lines) + rest
        kills += 1
        complete = b"".join(lines) + rest
        for line in complete.decode().splitlines(keepends=True):
            if not line.endswith("\n"):
                continue
            kind, *fields = line.split()
            if kind == "A":
                appended[fields[1]] = fields[0]
            else:
                rotated[fields[1]] = fields[2]
        check_after_crash(directory, appended, rotated)
    assert kills >= 20
    assert len(appended) > kills
    assert len(rotated) > kills // 2


@pytest.mark.slow
def test_eight_processes_touching_and_appending_lose_nothing(backend, directory):
    """Eight processes recording activity and appending at once: nothing lost or doubled."""
    workers, count = 8, 20
    seed(backend, "shared", SHARED_KEY)
    for w in range(workers):
        seed(backend, f"own{w}", f"agent:main:cli:dm:w{w}")
    processes = [child("concurrent", directory, w, count) for w in range(workers)]
    for process in processes:
        assert process.stdout.readline() == b"ready\n"  # type: ignore[union-attr]
    for process in processes:
        process.stdin.write(b"go\n")  # type: ignore[union-attr]
        process.stdin.flush()  # type: ignore[union-attr]
    for process in processes:
        assert process.stdout.readline() == b"done\n"  # type: ignore[union-attr]
        assert process.wait() == 0
        process.stdin.close()  # type: ignore[union-attr]
        process.stdout.close()  # type: ignore[union-attr]
    shared = backend.get_messages("shared")
    assert sorted(str(m.content) for m in shared) == sorted(
        f"{w}:{n}" for w in range(workers) for n in range(count)
    )
    ids = [m.id or 0 for m in shared]
    assert ids == sorted(ids)
    assert len(set(ids)) == workers * count
    stored = backend.get_session("shared")
    assert stored is not None
    assert stored.message_count == workers * count
    last = START + timedelta(minutes=(workers - 1) * 1000 + count - 1)
    assert backend.get_entry(SHARED_KEY).updated_at == last  # type: ignore[union-attr]
    for w in range(workers):
        own = backend.get_entry(f"agent:main:cli:dm:w{w}")
        assert own is not None
        assert own.updated_at == START + timedelta(minutes=w * 1000 + count - 1)
        assert own.last_prompt_tokens == count - 1
        assert [m.content for m in backend.get_messages(f"own{w}")] == [
            f"own {n}" for n in range(count)
        ]
    with JSONLBackend(directory) as again:
        assert again.get_messages("shared") == shared
