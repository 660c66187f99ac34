"""``JSONLBackend.check``: damage to any file is reported with its place, never raised."""

from __future__ import annotations

from jsonl_helpers import KEY, session_file

from hermes_sessions.testing._support import say, seed


def _seeded(backend):
    seed(backend, "s1", KEY, say("one"), say("two"), say("three"))
    seed(backend, "s2", None, say("other"), session_key="agent:main:telegram:dm:2")


def _storage(backend):
    report = backend.check()
    return [p for p in report.problems if p.kind in {"storage", "corrupt"}], report


def test_a_healthy_directory_is_ok(backend):
    """Files as the backend wrote them: nothing to report."""
    _seeded(backend)
    assert backend.check().ok


def test_a_bit_flip_in_a_session_file_names_file_and_line(backend, directory):
    """One changed byte fails the line's CRC32: the problem names the file and the line."""
    _seeded(backend)
    path = session_file(directory, "s1")
    data = bytearray(path.read_bytes())
    position = data.index(b"two")
    data[position] ^= 0x01
    path.write_bytes(bytes(data))
    problems, report = _storage(backend)
    assert not report.ok
    assert any(p.where == f"{path} line 3" for p in problems), problems


def test_a_truncated_session_file_is_reported(backend, directory):
    """A file cut in the middle of a line has a torn last line, and fewer lines than announced."""
    _seeded(backend)
    path = session_file(directory, "s1")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 10])
    problems, _ = _storage(backend)
    assert any(str(path) in p.where for p in problems), problems


def test_a_lost_line_is_reported(backend, directory):
    """A whole line gone (no checksum can see it) disagrees with the journal's line count."""
    _seeded(backend)
    path = session_file(directory, "s1")
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join(lines[:2] + lines[3:]))
    problems, _ = _storage(backend)
    assert any(str(path) in p.where for p in problems), problems


def test_a_zero_length_session_file_is_reported(backend, directory):
    """An emptied file has no header: reported, not raised."""
    _seeded(backend)
    path = session_file(directory, "s2")
    path.write_bytes(b"")
    problems, _ = _storage(backend)
    assert any(str(path) in p.where for p in problems), problems


def test_a_zero_length_journal_is_reported(backend, directory):
    """An emptied journal is reported with its path."""
    _seeded(backend)
    journal = directory / "journal.jsonl"
    journal.write_bytes(b"")
    problems, _ = _storage(backend)
    assert any(str(journal) in p.where for p in problems), problems


def test_a_foreign_file_in_place_of_a_session_is_reported(backend, directory):
    """Another program's text where a session file should be: every line fails to parse."""
    _seeded(backend)
    path = session_file(directory, "s2")
    path.write_bytes(b"hello, world\nnot ours\n")
    problems, _ = _storage(backend)
    assert any(p.where == f"{path} line 1" for p in problems), problems


def test_a_session_file_the_index_does_not_know_is_reported(backend, directory):
    """A session file nobody announced (copied in by hand) disagrees with the index."""
    _seeded(backend)
    stray = session_file(directory, "s9")
    stray.write_bytes(session_file(directory, "s2").read_bytes())
    problems, _ = _storage(backend)
    assert problems, "the stray file went unnoticed"


def test_check_changes_no_file(backend, directory):
    """Even on a damaged directory, check() rewrites, moves and backs up nothing."""
    _seeded(backend)
    path = session_file(directory, "s1")
    path.write_bytes(path.read_bytes()[:-10])
    before = {
        p: p.read_bytes() for p in directory.rglob("*") if p.is_file() and p.suffix != ".lock"
    }
    assert not backend.check().ok
    after = {p: p.read_bytes() for p in directory.rglob("*") if p.is_file() and p.suffix != ".lock"}
    assert after == before
    assert not (directory / "backups").exists()
