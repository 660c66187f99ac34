"""JSONLBackend checksums: every line carries a CRC32, damage is corruption, a torn tail is not.

The checksum is checked here with ``zlib`` and the documented rule (the CRC32 of the line
without its ``crc`` member), not with the library's own code.
"""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from jsonl_helpers import KEY, crc_ok, json_lines, rotation, session_file

from hermes_sessions.backends import JSONLBackend
from hermes_sessions.backends.jsonl import _migrate
from hermes_sessions.exceptions import CorruptRecordError
from hermes_sessions.testing._support import minutes, say, seed

FORMAT_1 = Path(__file__).parents[2] / "fixtures" / "jsonl-format-1"


def every_line(directory: Path) -> list[tuple[Path, bytes]]:
    """Each line of each file of a data directory."""
    files = [directory / "journal.jsonl", *sorted((directory / "sessions").glob("*.jsonl"))]
    if (directory / "routing.jsonl").exists():
        files.append(directory / "routing.jsonl")
    return [(path, raw) for path in files for raw in path.read_bytes().splitlines()]


def flip(path: Path, old: bytes, new: bytes) -> None:
    """Replace the one occurrence of ``old`` in ``path`` (a bit flip, or a few)."""
    data = path.read_bytes()
    assert data.count(old) == 1
    path.write_bytes(data.replace(old, new))


def line_number(path: Path, needle: bytes) -> int:
    """The 1-based number of the line of ``path`` holding ``needle``."""
    lines = path.read_bytes().splitlines()
    return next(n for n, raw in enumerate(lines, 1) if needle in raw)


def test_every_line_of_every_file_carries_its_crc32(backend, directory):
    """Session files, the journal and the snapshot: each line ends with a valid checksum."""
    seed(backend, "s1", KEY, say("one"))
    backend.append_messages("s1", [say("two")], touch_at=minutes(1))
    backend.compact()
    backend.apply(rotation(KEY, "s1", "s2", 1))
    lines = every_line(directory)
    assert len(lines) > 8
    assert all(crc_ok(raw) for _, raw in lines)
    assert all(json.loads(raw)["crc"] for _, raw in lines)


def test_a_bit_flip_in_a_committed_message_is_corruption(backend, directory):
    """Text changed after it was written (still valid JSON) raises, naming the file and line."""
    seed(backend, "s1", KEY, say("hello"), say("world"))
    path = session_file(directory, "s1")
    flip(path, b'"hello"', b'"hellm"')
    with pytest.raises(CorruptRecordError, match="checksum") as info:
        JSONLBackend(directory)
    assert (info.value.path, info.value.line) == (path, 2)


@pytest.mark.parametrize(
    ("name", "old", "new"),
    [
        ("journal.jsonl", b"09:05:00Z", b"09:07:00Z"),
        ("routing.jsonl", b'"revision":1', b'"revision":3'),
    ],
)
def test_a_bit_flip_in_the_index_is_corruption(backend, directory, name, old, new):
    """A changed journal or snapshot line raises CorruptRecordError with its line."""
    seed(backend, "s1", KEY, say("hello"))
    backend.compact()
    backend.record_activity(KEY, minutes(5))
    path = directory / name
    flip(path, old, new)
    with pytest.raises(CorruptRecordError, match="checksum") as info:
        JSONLBackend(directory)
    assert (info.value.path, info.value.line) == (path, line_number(path, new))


def test_a_committed_line_that_lost_its_newline_is_not_a_torn_write(backend, directory):
    """Damage that makes an acknowledged last line look torn raises; nothing is cut."""
    seed(backend, "s1", KEY, say("one"))
    backend.append_messages("s1", [say("two")])
    backend.record_activity(KEY, minutes(2))  # the append is not the newest write any more
    path = session_file(directory, "s1")
    damaged = path.read_bytes()[:-1] + b"\x0b"
    path.write_bytes(damaged)
    with pytest.raises(CorruptRecordError, match="lines") as info:
        JSONLBackend(directory)
    assert info.value.path == path
    assert path.read_bytes() == damaged


def test_a_lost_end_line_does_not_reopen_the_session(backend, directory):
    """Deleting a session's end line is detected: a key never gets two live sessions."""
    seed(backend, "s1", KEY, say("one"))
    backend.apply(rotation(KEY, "s1", "s2", 1))
    backend.append_messages("s2", [say("two")])
    path = session_file(directory, "s1")
    lines = path.read_bytes().splitlines(keepends=True)
    assert b'"type":"end"' in lines[-1]
    path.write_bytes(b"".join(lines[:-1]))
    with pytest.raises(CorruptRecordError, match="lines") as info:
        JSONLBackend(directory)
    assert info.value.path == path


@pytest.mark.parametrize("compacted", [False, True])
def test_a_lost_line_in_the_middle_of_a_session_file_is_corruption(backend, directory, compacted):
    """A missing message line is found against the journal, or against the snapshot."""
    seed(backend, "s1", KEY, say("one"))
    backend.append_messages("s1", [say("two")])
    backend.append_messages("s1", [say("three")])
    if compacted:
        backend.compact()
    path = session_file(directory, "s1")
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2] + lines[3:]))
    with pytest.raises(CorruptRecordError, match=r"3 lines.*4") as info:
        # after a compaction, opening reads no session file: the first read of it finds it
        JSONLBackend(directory).get_messages("s1")
    assert info.value.path == path


def test_a_lost_journal_line_in_the_middle_is_corruption(backend, directory):
    """A journal missing a record between two others is refused, naming the line after it."""
    seed(backend, "s1", KEY, say("one"))
    backend.record_activity(KEY, minutes(1))
    backend.record_activity(KEY, minutes(2))
    journal = directory / "journal.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(b"".join(lines[:-2] + lines[-1:]))
    with pytest.raises(CorruptRecordError, match="missing") as info:
        JSONLBackend(directory)
    assert (info.value.path, info.value.line) == (journal, len(lines) - 1)


def test_a_lost_commit_is_corruption(backend, directory):
    """A rotation followed by later records but not by its commit lost its commit line."""
    seed(backend, "s1", KEY, say("one"))
    backend.record_activity(KEY, minutes(1))
    journal = directory / "journal.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    assert b'"op":"commit"' in lines[2]
    journal.write_bytes(b"".join(lines[:2] + lines[3:]))
    with pytest.raises(CorruptRecordError, match="commit") as info:
        JSONLBackend(directory)
    assert (info.value.path, info.value.line) == (journal, 3)


@pytest.mark.parametrize("blank", [False, True])
def test_a_line_without_checksum_is_corruption(backend, directory, blank):
    """A line added by hand (or an empty line) in a checksummed file raises with its number."""
    seed(backend, "s1", KEY, say("one"))
    path = session_file(directory, "s1")
    with path.open("ab") as file:
        file.write(b"\n" if blank else b'{"type":"reopen","tx":1}\n')
    with pytest.raises(CorruptRecordError, match="empty line" if blank else "no checksum") as info:
        JSONLBackend(directory)
    assert (info.value.path, info.value.line) == (path, 3)


def test_a_torn_last_write_is_still_dropped(backend, directory):
    """The newest write cut short (no newline, the journal's last record) is rolled back."""
    seed(backend, "s1", KEY, say("one"))
    path = session_file(directory, "s1")
    whole = path.read_bytes()
    backend.append_messages("s1", [say("two")])
    path.write_bytes(path.read_bytes()[:-7])
    with JSONLBackend(directory) as again:
        assert [m.content for m in again.get_messages("s1")] == ["one"]
    assert path.read_bytes() == whole


def test_repair_drops_lines_whose_checksum_fails(backend, directory):
    """repair() drops a damaged line (keeping it in the backup) and the directory opens again."""
    seed(backend, "s1", KEY, say("one"), say("two"), say("three"))
    path = session_file(directory, "s1")
    flip(path, b'"two"', b'"twx"')
    report = JSONLBackend.repair(directory)
    assert [(d.path, d.line) for d in report.dropped_lines] == [(path, 3)]
    assert "checksum" in report.dropped_lines[0].reason
    with JSONLBackend(directory) as repaired:
        assert [m.content for m in repaired.get_messages("s1")] == ["one", "three"]


def test_repair_accepts_a_file_that_lost_lines(backend, directory):
    """A file with lost lines is kept as it is and indexed with what it holds."""
    seed(backend, "s1", KEY, say("one"))
    backend.apply(rotation(KEY, "s1", "s2", 1))
    path = session_file(directory, "s1")
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-1]))
    JSONLBackend.repair(directory)
    with JSONLBackend(directory) as repaired:
        assert repaired.get_session("s1").end_reason is None  # type: ignore[union-attr]
        assert repaired.get_entry(KEY).session_id == "s2"  # type: ignore[union-attr]


# -- format 1: read, then migrated -----------------------------------------------------------------


@pytest.fixture
def old_directory(tmp_path):
    """A copy of a data directory written in format 1 (no checksums)."""
    target = tmp_path / "old"
    shutil.copytree(FORMAT_1, target)
    return target


def test_a_format_1_directory_opens_with_everything_in_it(old_directory):
    """Every key, session, message, end, update, soft delete and lease of format 1 is read."""
    with JSONLBackend(old_directory) as backend:
        entry = backend.get_entry("agent:main:telegram:dm:42")
        assert entry is not None
        assert (entry.session_id, entry.revision) == ("20260502_090000_aaaa0002", 2)
        old = backend.get_session("20260501_090000_aaaa0001")
        assert old is not None
        assert (old.end_reason, old.title, old.input_tokens, old.message_count) == (
            "daily",
            "部署",
            120,
            2,
        )
        assert [m.content for m in backend.get_messages("20260502_090000_aaaa0002")] == ["again"]
        group = backend.get_entry("agent:main:feishu:group:oc_1:ou_1")
        assert group is not None
        assert group.updated_at == minutes(60 * 25 + 1)
        lease = "compress:20260502_090000_aaaa0002"
        assert not backend.acquire_lease(lease, "host-b", ttl=timedelta(minutes=1), now=minutes(0))


def test_opening_migrates_every_file_to_checksummed_lines(old_directory):
    """After the first open every line carries its checksum, and the data reads the same."""
    assert not any(crc_ok(raw) for _, raw in every_line(old_directory))
    with JSONLBackend(old_directory) as backend:
        messages = backend.get_messages("20260501_090000_aaaa0001", include_inactive=True)
    assert [(m.content, m.active) for m in messages] == [
        ("怎么部署 docker-compose？", True),
        ("Run docker compose up -d.", True),
        ("thanks", False),
    ]
    assert all(crc_ok(raw) for _, raw in every_line(old_directory))
    headers = [json_lines(path)[0] for path in (old_directory / "sessions").glob("*.jsonl")]
    assert {header["format"] for header in headers} == {2}
    with JSONLBackend(old_directory) as again:
        assert again.get_messages("20260501_090000_aaaa0001", include_inactive=True) == messages
        again.append_messages("20260502_090000_aaaa0002", [say("after")])
    with JSONLBackend(old_directory) as third:
        assert [m.content for m in third.get_messages("20260502_090000_aaaa0002")] == [
            "again",
            "after",
        ]


def test_a_migration_cut_short_is_finished_by_the_next_open(old_directory, monkeypatch):
    """A crash after some files were migrated leaves a directory the next open completes."""
    real = _migrate.migrate_session_file
    done = []

    def crash_after_one(*args, **kwargs):
        if done:
            raise KeyboardInterrupt  # the process dies here
        done.append(real(*args, **kwargs))

    monkeypatch.setattr(_migrate, "migrate_session_file", crash_after_one)
    with pytest.raises(KeyboardInterrupt):
        JSONLBackend(old_directory)
    monkeypatch.undo()
    with JSONLBackend(old_directory) as backend:
        assert [m.content for m in backend.get_messages("20260502_100000_aaaa0003")] == [
            "群聊里的问题"
        ]
    assert all(crc_ok(raw) for _, raw in every_line(old_directory))
