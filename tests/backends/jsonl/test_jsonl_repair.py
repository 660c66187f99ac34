"""JSONLBackend.repair: damaged directories become usable again, with a backup of every change."""

from __future__ import annotations

import json
import stat
from datetime import timedelta

import pytest
from jsonl_helpers import KEY, edit_lines, session_file, signed

from hermes_sessions.backends import JSONLBackend
from hermes_sessions.exceptions import CorruptRecordError, StorageError
from hermes_sessions.protocols import RotationPlan
from hermes_sessions.testing._support import T0, entry_for, minutes, record, say, seed


def break_line(path, number, replacement=b"{not json"):
    """Overwrite line ``number`` of ``path`` with something unreadable."""
    lines = path.read_bytes().split(b"\n")
    lines[number - 1] = replacement
    path.write_bytes(b"\n".join(lines))


def test_repair_keeps_every_readable_line_and_a_backup(backend, directory):
    """A broken line is dropped, the rest kept, and the original file is in the backup."""
    seed(backend, "s1", KEY, say("one"), say("two"), say("three"))
    path = session_file(directory, "s1")
    break_line(path, 3)
    damaged = path.read_bytes()
    with pytest.raises(CorruptRecordError):
        JSONLBackend(directory)
    report = JSONLBackend.repair(directory)
    assert report.changed
    assert [(d.path, d.line) for d in report.dropped_lines] == [(path, 3)]
    assert report.backup is not None
    backup = report.backup / "sessions" / "s1.jsonl"
    assert backup.read_bytes() == damaged
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    with JSONLBackend(directory) as repaired:
        assert [m.content for m in repaired.get_messages("s1")] == ["one", "three"]
        assert repaired.get_entry(KEY).session_id == "s1"  # type: ignore[union-attr]


def test_repair_of_a_healthy_directory_changes_nothing(backend, directory):
    """Nothing damaged: no backup, same data."""
    seed(backend, "s1", KEY, say("fine"))
    backend.record_activity(KEY, minutes(3))
    report = JSONLBackend.repair(directory)
    assert not report.changed
    assert report.dropped_lines == ()
    assert not (directory / "backups").exists()
    assert backend.get_entry(KEY).updated_at == minutes(3)  # type: ignore[union-attr]
    assert [m.content for m in backend.get_messages("s1")] == ["fine"]


def test_running_processes_reload_after_a_repair(backend, directory):
    """A process that had the directory open sees the repaired files, not its stale cache."""
    seed(backend, "s1", KEY, say("one"), say("two"))
    path = session_file(directory, "s1")
    break_line(path, 3)
    JSONLBackend.repair(directory)
    assert [m.content for m in backend.get_messages("s1")] == ["one"]
    backend.append_messages("s1", [say("after")])
    with JSONLBackend(directory) as again:
        assert [m.content for m in again.get_messages("s1")] == ["one", "after"]


def test_repair_cuts_torn_lines_and_out_of_order_messages(backend, directory):
    """Torn last lines and messages whose ids go backwards are dropped and reported."""
    seed(backend, "s1", KEY, say("one"), say("two"))
    path = session_file(directory, "s1")
    second = path.read_bytes().split(b"\n")[2]
    with path.open("ab") as file:
        file.write(second + b"\n" + b'{"type":"mess')
    report = JSONLBackend.repair(directory)
    reasons = [d.reason for d in report.dropped_lines]
    assert any("does not follow" in r for r in reasons)
    assert any("torn" in r for r in reasons)
    with JSONLBackend(directory) as repaired:
        assert [m.content for m in repaired.get_messages("s1")] == ["one", "two"]


def test_repair_moves_a_file_without_header(backend, directory):
    """A session file whose header is unreadable is moved whole into the backup."""
    seed(backend, "s1", KEY, say("one"))
    seed(backend, "s2", "agent:main:telegram:dm:2", say("two"))
    path = session_file(directory, "s1")
    break_line(path, 1)
    report = JSONLBackend.repair(directory)
    assert report.moved_files == (path,)
    assert not path.exists()
    assert report.backup is not None
    assert (report.backup / "sessions" / "s1.jsonl").exists()
    assert report.dropped_entries == (KEY,)
    with JSONLBackend(directory) as repaired:
        assert repaired.get_session("s1") is None
        assert repaired.get_entry(KEY) is None
        assert [m.content for m in repaired.get_messages("s2")] == ["two"]


def test_repair_drops_entries_of_missing_sessions(backend, directory):
    """A session file deleted by hand: its entry goes, everything else stays."""
    seed(backend, "s1", KEY)
    seed(backend, "s2", "agent:main:telegram:dm:2", say("kept"))
    backend.record_activity("agent:main:telegram:dm:2", minutes(4))
    session_file(directory, "s1").unlink()
    report = JSONLBackend.repair(directory)
    assert report.dropped_entries == (KEY,)
    assert report.rebuilt_index
    with JSONLBackend(directory) as repaired:
        assert repaired.get_entry(KEY) is None
        assert repaired.get_entry("agent:main:telegram:dm:2").updated_at == minutes(4)  # type: ignore[union-attr]


def test_repair_rebuilds_a_lost_index_from_the_sessions(backend, directory):
    """Without journal and snapshot, keys point again at their newest open session."""
    seed(backend, "old", KEY, say("old"), started_at=T0)
    backend.apply(
        RotationPlan(
            at=minutes(60), create=record("new", started_at=minutes(60)), end=[("old", "idle")]
        )
    )
    backend.create_session(record("keyless", session_key=None))
    backend.compact()
    (directory / "journal.jsonl").unlink()
    (directory / "routing.jsonl").unlink()
    with pytest.raises(CorruptRecordError):
        JSONLBackend(directory)
    report = JSONLBackend.repair(directory)
    assert report.rebuilt_index
    assert sorted(report.adopted_sessions) == ["keyless", "new", "old"]
    with JSONLBackend(directory) as repaired:
        entries = repaired.entries()
        assert [(e.session_key, e.session_id) for e in entries] == [
            (KEY, "old"),
            ("agent:main:telegram:dm:u1", "new"),
        ]
        assert [m.content for m in repaired.get_messages("old")] == ["old"]


def test_repair_salvages_a_lost_journal_from_the_snapshot(backend, directory):
    """Journal gone, snapshot kept: the snapshot's entries come back."""
    seed(backend, "s1", KEY, say("x"))
    backend.compact()
    (directory / "journal.jsonl").unlink()
    report = JSONLBackend.repair(directory)
    assert report.rebuilt_index
    with JSONLBackend(directory) as repaired:
        assert repaired.get_entry(KEY).session_id == "s1"  # type: ignore[union-attr]


def test_repair_recovers_journal_records_after_a_lost_snapshot(backend, directory):
    """Snapshot gone: entries come from the sessions, then the journal's later records."""
    seed(backend, "s1", KEY, say("x"))
    backend.compact()
    backend.record_activity(KEY, minutes(8), last_prompt_tokens=77)
    (directory / "routing.jsonl").write_bytes(b"garbage\n")
    report = JSONLBackend.repair(directory)
    assert report.rebuilt_index
    assert report.backup is not None
    with JSONLBackend(directory) as repaired:
        entry = repaired.get_entry(KEY)
        assert entry is not None
        assert (entry.session_id, entry.updated_at, entry.last_prompt_tokens) == (
            "s1",
            minutes(8),
            77,
        )


def test_repair_fixes_the_journal_and_snapshot_lines(backend, directory):
    """Broken journal and snapshot lines are dropped; a lost journal header is recreated."""
    seed(backend, "s1", KEY, say("x"))
    seed(backend, "s2", "agent:main:telegram:dm:2")
    backend.compact()
    snapshot = directory / "routing.jsonl"
    lines = snapshot.read_bytes().split(b"\n")
    snapshot.write_bytes(b"\n".join([lines[0], b"[]", *lines[1:]]))
    backend.record_activity(KEY, minutes(2))
    journal = directory / "journal.jsonl"
    journal.write_bytes(journal.read_bytes().split(b"\n", 1)[1] + b'{"op":"void","tx":1}\n')
    with pytest.raises(CorruptRecordError):
        JSONLBackend(directory)
    report = JSONLBackend.repair(directory)
    assert {d.path for d in report.dropped_lines} == {snapshot, journal}
    with JSONLBackend(directory) as repaired:
        assert repaired.get_entry(KEY).updated_at == minutes(2)  # type: ignore[union-attr]
        assert repaired.get_session("s2") is not None


def test_repair_adopts_an_unlisted_session_file(backend, directory):
    """A session file the index does not know (copied in by hand) is listed."""
    seed(backend, "s1", KEY, say("x"))
    session_file(directory, "copy").write_bytes(session_file(directory, "s1").read_bytes())
    edit_lines(session_file(directory, "copy"), b'"s1"', b'"copy"')
    report = JSONLBackend.repair(directory)
    assert report.adopted_sessions == ("copy",)
    with JSONLBackend(directory) as repaired:
        assert [m.content for m in repaired.get_messages("copy")] == ["x"]


def test_repair_completes_an_unfinished_rotation(backend, directory):
    """A rotation announced but never committed is completed by repair, like by an open."""
    seed(backend, "old", KEY)
    journal = directory / "journal.jsonl"
    entry = json.loads(journal.read_bytes().splitlines()[1])["entries"][0]
    entry.update(session_id="new", revision=2)
    plan = {
        "op": "plan",
        "tx": 2,
        "at": "2026-05-01T10:00:00Z",
        "create": {
            "record": {"id": "new", "source": "telegram", "started_at": "2026-05-01T10:00:00Z"},
            "next_id": 1,
            "messages": [],
        },
        "reopen": [],
        "end": [["old", "idle"]],
        "entries": [entry],
    }
    with journal.open("ab") as file:
        file.write(signed(plan))
    JSONLBackend.repair(directory)
    with JSONLBackend(directory) as repaired:
        assert repaired.get_entry(KEY).session_id == "new"  # type: ignore[union-attr]
        assert repaired.get_session("old").end_reason == "idle"  # type: ignore[union-attr]


def test_repair_voids_a_cut_short_batch_when_the_index_is_damaged(backend, directory):
    """Half a batch after a crash, plus a damaged snapshot: the half batch is still cut."""
    seed(backend, "s1", KEY, say("before"))
    backend.compact()
    backend.append_messages("s1", [say("q"), say("a", role="assistant")], touch_at=minutes(5))
    path = session_file(directory, "s1")
    path.write_bytes(path.read_bytes().rsplit(b"\n", 2)[0] + b"\n")  # the answer never landed
    (directory / "routing.jsonl").write_bytes(b"{}\n")
    report = JSONLBackend.repair(directory)
    assert report.rebuilt_index
    with JSONLBackend(directory) as repaired:
        assert [m.content for m in repaired.get_messages("s1")] == ["before"]
        assert repaired.get_entry(KEY).updated_at == T0  # type: ignore[union-attr]


def test_repair_needs_a_directory(tmp_path):
    """Repairing a path that does not exist is an error, not a new empty store."""
    with pytest.raises(StorageError):
        JSONLBackend.repair(tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()


def test_repair_drops_misplaced_headers_and_ignores_foreign_files(backend, directory):
    """A second header in a session file or the journal is dropped; odd file names are left."""
    seed(backend, "s1", KEY, say("one"))
    path = session_file(directory, "s1")
    header = path.read_bytes().split(b"\n")[0]
    with path.open("ab") as file:
        file.write(b"\n" + header + b"\n")
    journal = directory / "journal.jsonl"
    with journal.open("ab") as file:
        file.write(journal.read_bytes().split(b"\n")[0] + b"\n")
    foreign = directory / "sessions" / "not an id!.jsonl"
    foreign.write_bytes(b"notes\n")
    report = JSONLBackend.repair(directory)
    assert sorted((d.path.name, d.line) for d in report.dropped_lines) == [
        ("journal.jsonl", 4),
        ("s1.jsonl", 3),  # a blank line is not a line the backend writes
        ("s1.jsonl", 4),
    ]
    assert foreign.read_bytes() == b"notes\n"
    with JSONLBackend(directory) as repaired:
        assert [m.content for m in repaired.get_messages("s1")] == ["one"]


def test_salvage_keeps_a_complete_last_append(backend, directory):
    """With a damaged snapshot, a last append that fully landed keeps its lines and activity."""
    seed(backend, "s1", KEY, say("before"))
    backend.compact()
    backend.append_messages("s1", [say("q"), say("a", role="assistant")], touch_at=minutes(5))
    (directory / "routing.jsonl").write_bytes(b"{}\n")
    JSONLBackend.repair(directory)
    with JSONLBackend(directory) as repaired:
        assert [m.content for m in repaired.get_messages("s1")] == ["before", "q", "a"]
        assert repaired.get_entry(KEY).updated_at == minutes(5)  # type: ignore[union-attr]


def test_salvage_voids_an_append_that_never_landed(backend, directory):
    """With a damaged snapshot, an announced append with no line on disk records no activity."""
    seed(backend, "s1", KEY, say("before"))
    backend.compact()
    before = session_file(directory, "s1").read_bytes()
    backend.append_messages("s1", [say("q")], touch_at=minutes(5))
    session_file(directory, "s1").write_bytes(before)
    (directory / "routing.jsonl").write_bytes(b"{}\n")
    JSONLBackend.repair(directory)
    with JSONLBackend(directory) as repaired:
        assert [m.content for m in repaired.get_messages("s1")] == ["before"]
        assert repaired.get_entry(KEY).updated_at == T0  # type: ignore[union-attr]


def test_salvage_replays_deletions_of_what_it_could_not_rebuild(backend, directory):
    """Journal records that remove entries or leases the lost snapshot held are harmless."""
    seed(backend, "s1", KEY)
    backend.put_entry(entry_for("agent:main:other:dm:9", "s1"), expected_revision=None)
    assert backend.acquire_lease("r", "h", ttl=timedelta(minutes=10), now=T0)
    backend.compact()
    backend.delete_entry("agent:main:other:dm:9", expected_revision=1)
    backend.release_lease("r", "h")
    (directory / "routing.jsonl").write_bytes(b"{}\n")
    JSONLBackend.repair(directory)
    with JSONLBackend(directory) as repaired:
        assert [e.session_key for e in repaired.entries()] == [KEY]
        assert repaired.acquire_lease("r", "other", ttl=timedelta(minutes=10), now=T0)


def test_rebuilt_keys_prefer_open_then_newest_sessions(backend, directory):
    """A rebuilt key points at its newest open session, even if an ended one started later."""
    backend.create_session(record("older", session_key=KEY, started_at=T0))
    backend.create_session(record("open", session_key=KEY, started_at=minutes(10)))
    backend.create_session(record("closed", session_key=KEY, started_at=minutes(20)))
    backend.create_session(record("oldest", session_key=KEY, started_at=T0 - timedelta(hours=1)))
    backend.end_session("closed", "idle", at=minutes(30))
    (directory / "journal.jsonl").unlink()
    JSONLBackend.repair(directory)
    with JSONLBackend(directory) as repaired:
        assert repaired.get_entry(KEY).session_id == "open"  # type: ignore[union-attr]


def test_adopted_file_keeps_the_first_end_reason(backend, directory):
    """A hand-made file ending a session twice is read with the first reason, as the API does."""
    seed(backend, "s1", KEY, say("one"))
    made = session_file(directory, "made")
    made.write_bytes(session_file(directory, "s1").read_bytes())
    edit_lines(made, b'"s1"', b'"made"')
    with made.open("ab") as file:
        file.write(signed({"type": "end", "tx": 1, "reason": "idle", "at": "2026-05-01T10:00:00Z"}))
        file.write(
            signed({"type": "end", "tx": 1, "reason": "daily", "at": "2026-05-02T10:00:00Z"})
        )
    assert JSONLBackend.repair(directory).adopted_sessions == ("made",)
    with JSONLBackend(directory) as repaired:
        stored = repaired.get_session("made")
        assert stored is not None
        assert (stored.end_reason, stored.ended_at) == ("idle", minutes(60))


def test_bulk_loading_by_writing_session_files(directory):
    """Session files written in the documented format are adopted, keys included, no backup."""
    sessions = directory / "sessions"
    sessions.mkdir(parents=True)
    for n in range(3):
        header = {
            "type": "session",
            "format": 1,
            "tx": 0,
            "next_id": 2,
            "record": {
                "id": f"b{n}",
                "source": "import",
                "started_at": "2026-05-01T09:00:00Z",
                "session_key": f"agent:main:import:dm:{n}",
                "message_count": 7,  # derived from the messages, whatever the file says
            },
        }
        message = {
            "type": "message",
            "tx": 0,
            "message": {"id": 1, "role": "user", "content": "hi"},
        }
        lines = [json.dumps(header), json.dumps(message)]
        (sessions / f"b{n}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = JSONLBackend.repair(directory)
    assert report.changed
    assert (report.backup, report.rebuilt_index) == (None, True)
    assert report.adopted_sessions == ("b0", "b1", "b2")
    with JSONLBackend(directory) as loaded:
        assert [(e.session_key, e.session_id) for e in loaded.entries()] == [
            (f"agent:main:import:dm:{n}", f"b{n}") for n in range(3)
        ]
        (hello,) = loaded.get_messages("b1")
        assert hello.content == "hi"
        assert loaded.get_session("b1").message_count == 1  # type: ignore[union-attr]
        (more,) = loaded.append_messages("b1", [say("more")])
        assert more.id == 2
