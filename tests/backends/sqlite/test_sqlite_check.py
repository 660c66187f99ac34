"""``SQLiteBackend.check``: a database damaged under an open backend is reported, not raised."""

from __future__ import annotations

import pytest

from hermes_sessions.backends import SQLiteBackend
from hermes_sessions.testing._support import say, seed


def _filled(db_path):
    backend = SQLiteBackend(db_path)
    for n in range(20):
        seed(backend, f"s{n}", f"k{n}", *(say(f"message {n} {i} " * 20) for i in range(10)))
    backend.checkpoint()
    return backend


def _damage(db_path, how):
    data = bytearray(db_path.read_bytes())
    if how == "bit flips":
        for offset in range(4096 * 3 + 100, len(data), 4096):
            data[offset] ^= 0xFF
    elif how == "truncation":
        data = data[: len(data) // 2]
    elif how == "zero length":
        data = bytearray()
    elif how == "foreign file":
        data = bytearray(b"not a database " * (len(data) // 15))
    db_path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["bit flips", "truncation", "zero length", "foreign file"])
def test_damage_under_an_open_backend_is_reported(db_path, how):
    """Whatever happened to the file, check() returns problems and raises nothing."""
    backend = _filled(db_path)
    try:
        assert backend.check().ok
        _damage(db_path, how)
        report = backend.check()
        assert not report.ok
        assert report.problems[0].kind in {"storage", "corrupt", "index"}
    finally:
        backend.close()


def test_integrity_check_lists_the_problems_of_check(backend, db_path):
    """The older ``integrity_check()`` returns check()'s problems as lines."""
    seed(backend, "s1", "k1", say("hello"))
    backend._connections.connection().execute("UPDATE sessions SET message_count = 4")
    assert backend.integrity_check() == [str(p) for p in backend.check().problems]
    assert backend.integrity_check()[0].startswith("counters: s1: ")
