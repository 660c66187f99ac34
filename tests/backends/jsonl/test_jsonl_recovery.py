"""JSONLBackend recovery: writes cut short at fixed points are completed or voided; catching up."""

from __future__ import annotations

from datetime import timedelta

import pytest
from jsonl_helpers import KEY, json_lines, rotation, session_file

from hermes_sessions.backends import JSONLBackend
from hermes_sessions.backends.jsonl import _cache as _jsonl_cache
from hermes_sessions.backends.jsonl import _catchup as _jsonl_catchup
from hermes_sessions.backends.jsonl import _engine as _jsonl_engine
from hermes_sessions.exceptions import StorageError
from hermes_sessions.testing._support import T0, minutes, record, say, seed

# -- recovery at fixed crash points ----------------------------------------------------------------


def test_rotation_cut_short_is_completed_by_the_next_process(backend, directory, monkeypatch):
    """A crash after a rotation was announced is rolled forward: no half rotation is seen."""
    seed(backend, "old", KEY, say("before"))

    def crash(*_args, **_kwargs):
        raise OSError("simulated crash after the announcement")

    with monkeypatch.context() as patch:
        patch.setattr(_jsonl_engine.DirectoryEngine, "_complete_plan", crash)
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
    real = _jsonl_engine.DirectoryEngine._ensure_group

    def crash_in_group(self, session_id, tx, lines, records):
        real(self, session_id, tx, lines, records)
        path = self.session_path(session_id)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) - 7])  # the end line torn in half
        raise OSError("killed mid-write")

    monkeypatch.setattr(_jsonl_engine.DirectoryEngine, "_ensure_group", crash_in_group)
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
    real = _jsonl_engine.create_file

    def torn_create(path, data, *, sync):
        real(path, data[: len(data) // 2], sync=sync)
        raise OSError("killed")

    monkeypatch.setattr(_jsonl_engine, "create_file", torn_create)
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

    monkeypatch.setattr(_jsonl_engine.DirectoryEngine, "_ensure_group", crash)
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
    real = _jsonl_engine.append_lines

    def half(path, data, *, expected_size, sync):
        first = data[: data.index(b"\n") + 1]
        real(path, first, expected_size=expected_size, sync=sync)
        raise OSError("killed between two lines")

    monkeypatch.setattr(_jsonl_engine, "append_lines", half)
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
        _jsonl_engine.temp_path(path).write_bytes(data[:10])
        raise OSError("killed before rename")

    monkeypatch.setattr(_jsonl_engine, "replace_file", crash)
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
        before = reader._engine.state.sessions["s3"]
        backend.append_messages("s7", [say("new")], touch_at=minutes(1))
        tails, loads = [], []
        monkeypatch.setattr(
            _jsonl_catchup, "read_tail", lambda *a: tails.append(a[2]) or _jsonl_cache.read_tail(*a)
        )
        monkeypatch.setattr(
            _jsonl_catchup,
            "load_session",
            lambda *a: loads.append(a[1]) or _jsonl_cache.load_session(*a),
        )
        assert reader.get_entry("agent:main:x:dm:7").updated_at == minutes(1)  # type: ignore[union-attr]
        assert [m.content for m in reader.get_messages("s7")] == ["m7", "new"]
        reader.get_messages("s3")
        assert (tails, loads) == (["s7"], [])
        assert reader._engine.state.sessions["s3"] is before
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
        untouched = lagging._engine.state.sessions["s1"]
        backend.append_messages("s2", [say("late")], touch_at=minutes(3))
        backend.delete_session("s4")
        seed(backend, "s5", "agent:main:x:dm:5")
        backend.compact()
        assert [m.content for m in lagging.get_messages("s2")] == ["m2", "late"]
        assert lagging.get_session("s4") is None
        assert lagging.get_session("s5") is not None
        assert lagging.get_entry("agent:main:x:dm:2").updated_at == minutes(3)  # type: ignore[union-attr]
        assert lagging._engine.state.sessions["s1"] is untouched
        assert lagging.entries() == backend.entries()
    finally:
        lagging.close()


def test_compaction_cut_short_keeps_the_journal(backend, directory, monkeypatch):
    """A crash between writing the snapshot and the new journal loses nothing."""
    seed(backend, "s1", KEY, say("x"))
    real = _jsonl_engine.replace_file

    def snapshot_only(path, data, *, sync):
        if path.name == "journal.jsonl":
            raise OSError("killed between the two renames")
        real(path, data, sync=sync)

    monkeypatch.setattr(_jsonl_engine, "replace_file", snapshot_only)
    with pytest.raises(StorageError):
        backend.compact()
    monkeypatch.undo()
    backend.append_messages("s1", [say("y")], touch_at=minutes(2))
    with JSONLBackend(directory) as again:
        assert [m.content for m in again.get_messages("s1")] == ["x", "y"]
        assert again.get_entry(KEY).updated_at == minutes(2)  # type: ignore[union-attr]


def test_rotation_cut_before_its_commit_is_committed(backend, directory, monkeypatch):
    """Every file written but no commit: the next process only adds the commit."""
    seed(backend, "old", KEY)
    real = _jsonl_engine.DirectoryEngine._journal_append

    def no_commit(self, records):
        if any(r.__class__.__name__ == "Commit" for r in records):
            raise OSError("killed before the commit")
        real(self, records)

    monkeypatch.setattr(_jsonl_engine.DirectoryEngine, "_journal_append", no_commit)
    with pytest.raises(StorageError):
        backend.apply(rotation(KEY, "old", "new", 1))
    monkeypatch.undo()
    before = session_file(directory, "old").read_bytes()
    with JSONLBackend(directory) as after:
        assert after.get_entry(KEY).session_id == "new"  # type: ignore[union-attr]
    assert session_file(directory, "old").read_bytes() == before
