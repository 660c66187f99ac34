"""The JSONL backend's file primitives: whole appends, reads to the end, failures cleaned up."""

from __future__ import annotations

import os

import pytest

from hermes_sessions.backends.jsonl import _lines as _jsonl_lines
from hermes_sessions.exceptions import StorageError


def test_failed_append_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    """An append that fails after writing part of its lines cuts the file back."""
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"a":1}\n')
    real = os.write
    calls = []

    def partial(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real(fd, bytes(data[:5]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_jsonl_lines.os, "write", partial)
    with pytest.raises(OSError, match="No space"):
        _jsonl_lines.append_lines(path, b'{"b":2}\n{"c":3}\n', expected_size=8, sync=True)
    monkeypatch.undo()
    assert path.read_bytes() == b'{"a":1}\n'
    assert calls == [16, 11]


def test_short_writes_are_continued(tmp_path, monkeypatch):
    """A write the kernel cut short is continued until every byte is written."""
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"")
    real = os.write
    monkeypatch.setattr(_jsonl_lines.os, "write", lambda fd, data: real(fd, bytes(data[:3])))
    _jsonl_lines.append_lines(path, b'{"long":"line"}\n', expected_size=0, sync=False)
    monkeypatch.undo()
    assert path.read_bytes() == b'{"long":"line"}\n'


def test_append_refuses_a_file_of_unexpected_size(tmp_path):
    """Appending to a file that is not the expected size writes nothing."""
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"a":1}\n')
    with pytest.raises(StorageError, match="another program"):
        _jsonl_lines.append_lines(path, b'{"b":2}\n', expected_size=0, sync=False)
    assert path.read_bytes() == b'{"a":1}\n'


def test_reads_continue_after_a_short_read(tmp_path, monkeypatch):
    """A read returning fewer bytes than asked is continued; one returning none stops."""
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"a":1}\n{"b":2}\n')
    real = os.pread
    monkeypatch.setattr(_jsonl_lines.os, "pread", lambda fd, n, at: real(fd, min(n, 5), at))
    chunk = _jsonl_lines.read_chunk(path, offset=0, first_line=1)
    assert [line.data for line in chunk.lines] == [{"a": 1}, {"b": 2}]
    monkeypatch.setattr(_jsonl_lines.os, "pread", lambda fd, _n, at: b"" if at else real(fd, 8, at))
    chunk = _jsonl_lines.read_chunk(path, offset=0, first_line=1)
    assert ([line.data for line in chunk.lines], chunk.end, chunk.torn) == ([{"a": 1}], 8, False)


def test_chunks_report_torn_tails_and_offsets(tmp_path):
    """A chunk lists complete lines with their numbers and offsets and flags a torn tail."""
    chunk = _jsonl_lines.parse_chunk(
        b'{"a":1}\n\n{"b":2}\n{"c":', offset=100, first_line=7, path=tmp_path
    )
    assert [(line.number, line.start) for line in chunk.lines] == [(7, 100), (9, 109)]
    assert (chunk.end, chunk.last_line, chunk.torn) == (117, 9, True)


def test_private_directories(tmp_path):
    """make_private_dir creates parents and a 0700 directory, and accepts an existing one."""
    target = tmp_path / "a" / "b"
    _jsonl_lines.make_private_dir(target)
    _jsonl_lines.make_private_dir(target)
    assert target.stat().st_mode & 0o777 == 0o700
