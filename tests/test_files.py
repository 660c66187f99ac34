"""hermes_sessions.files: private files, whole writes, atomic replacement, directory syncs."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_sessions import files


def mode(path):
    """The permission bits of ``path``."""
    return stat.S_IMODE(path.stat().st_mode)


def test_write_file_creates_a_private_file(tmp_path):
    """A new file holds exactly the bytes given and only its owner may read it."""
    path = tmp_path / "f"
    files.write_file(path, b"data")
    assert path.read_bytes() == b"data"
    assert mode(path) == 0o600


def test_write_file_overwrites_unless_exclusive(tmp_path):
    """Without ``exclusive`` an old file is truncated; with it, FileExistsError leaves it alone."""
    path = tmp_path / "f"
    path.write_bytes(b"a much longer old content")
    files.write_file(path, b"new", sync=False)
    assert path.read_bytes() == b"new"
    with pytest.raises(FileExistsError):
        files.write_file(path, b"other", exclusive=True)
    assert path.read_bytes() == b"new"


def test_write_all_continues_short_writes(tmp_path, monkeypatch):
    """A write the kernel cuts short is continued until every byte is written."""
    path = tmp_path / "f"
    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real(fd, bytes(data[:2])))
    files.write_file(path, b"0123456789", sync=False)
    monkeypatch.undo()
    assert path.read_bytes() == b"0123456789"


def test_write_all_cuts_a_failed_write_back(tmp_path, monkeypatch):
    """A write failing part-way leaves the file as long as it was where the write started."""
    path = tmp_path / "f"
    path.write_bytes(b"kept")
    real = os.write
    calls = []

    def failing(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real(fd, bytes(data[:3]))
        raise OSError(28, "No space left on device")

    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    monkeypatch.setattr(os, "write", failing)
    try:
        with pytest.raises(OSError, match="No space"):
            files.write_all(fd, b"lost bytes", start=4)
    finally:
        monkeypatch.undo()
        os.close(fd)
    assert path.read_bytes() == b"kept"
    assert calls == [10, 7]


def test_create_file_syncs_the_directory_only_with_sync(tmp_path, monkeypatch):
    """``create_file`` makes the new name durable with ``sync`` and skips that without it."""
    synced = []
    monkeypatch.setattr(files, "fsync_dir", synced.append)
    files.create_file(tmp_path / "a", b"a")
    files.create_file(tmp_path / "b", b"b", sync=False)
    assert synced == [tmp_path]
    assert (tmp_path / "b").read_bytes() == b"b"


def test_temp_path_is_hidden_beside_the_file(tmp_path):
    """The default temporary file is a hidden sibling of the target."""
    assert files.temp_path(tmp_path / "routing.jsonl") == tmp_path / ".routing.jsonl.tmp"


def test_replace_file_replaces_and_leaves_no_temporary(tmp_path):
    """After a replacement the target holds the new bytes, privately, and no temporary is left."""
    path = tmp_path / "f"
    path.write_bytes(b"old")
    files.replace_file(path, b"new")
    assert path.read_bytes() == b"new"
    assert mode(path) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_replace_file_goes_through_the_temporary_it_is_given(tmp_path, monkeypatch):
    """A caller-chosen temporary name is the file that is renamed over the target."""
    path = tmp_path / "f"
    chosen = tmp_path / ".f.1234.tmp"
    renamed = []
    real = Path.replace

    def recording(self, target):
        renamed.append((self, target))
        return real(self, target)

    monkeypatch.setattr(Path, "replace", recording)
    files.replace_file(path, b"new", temporary=chosen, sync=False)
    assert renamed == [(chosen, path)]
    assert not chosen.exists()


def test_a_failed_rename_keeps_the_old_file_and_removes_the_temporary(tmp_path, monkeypatch):
    """If the rename fails the target is untouched, the temporary is gone, the error propagates."""
    path = tmp_path / "f"
    path.write_bytes(b"old")

    def broken(_self, _target):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(Path, "replace", broken)
    with pytest.raises(OSError, match="Input/output"):
        files.replace_file(path, b"new")
    monkeypatch.undo()
    assert path.read_bytes() == b"old"
    assert not files.temp_path(path).exists()


def test_replace_file_overwrites_a_stale_temporary(tmp_path):
    """A temporary file left by a crashed writer does not stop the next replacement."""
    path = tmp_path / "f"
    files.temp_path(path).write_bytes(b"half a write")
    files.replace_file(path, b"whole")
    assert path.read_bytes() == b"whole"
    assert not files.temp_path(path).exists()


@given(data=st.binary(max_size=4096))
def test_replace_file_round_trips_any_bytes(tmp_path_factory, data):
    """Whatever the bytes, the file afterwards holds exactly them."""
    path = tmp_path_factory.mktemp("replace") / "f"
    files.replace_file(path, data, sync=False)
    assert path.read_bytes() == data


def test_fsync_dir_needs_a_directory(tmp_path):
    """Syncing a path that is not a directory is an OSError, not a silent no-op."""
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        files.fsync_dir(tmp_path / "f")
