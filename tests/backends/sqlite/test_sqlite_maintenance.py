"""SQLite upkeep: a bounded write-ahead log, optimize, vacuum, scrub and integrity checks."""

from __future__ import annotations

import threading

import pytest
from sqlite_helpers import found, raw

from hermes_sessions.backends import SQLiteBackend
from hermes_sessions.exceptions import LockTimeoutError
from hermes_sessions.testing._support import say, seed


def test_wal_stays_bounded_under_steady_writes(db_path):
    """With readers running beside a steady writer, the WAL never grows far past its limit."""
    limit = 256 * 1024
    with SQLiteBackend(db_path, wal_size_limit=limit) as backend:
        seed(backend, "s1")
        wal = db_path.parent / "state.db-wal"
        done = threading.Event()

        def read():
            while not done.is_set():
                backend.get_messages("s1", limit=5, from_end=True)

        reader = threading.Thread(target=read)
        reader.start()
        sizes = []
        try:
            for n in range(300):
                backend.append_messages("s1", [say(f"{n} " + "filler text 飞书机器人 " * 40)])
                sizes.append(wal.stat().st_size)
        finally:
            done.set()
            reader.join()
        # SQLite's own automatic checkpoint waits for 1,000 pages (4 MiB): far above the limit.
        # A truncation that meets a reader is retried at the next commit, hence the slack (on a
        # loaded machine the reader can pin a snapshot across a few commits: 4x, still 1 MiB).
        assert max(sizes) < 4 * limit
        assert sizes.count(0) >= 3


def test_maintenance_keeps_data_and_finds_problems(backend):
    """optimize, vacuum and checkpoint keep every message; integrity_check reports damage."""
    seed(backend, "s1", None, *(say(f"kiwi {n}") for n in range(50)))
    backend.optimize()
    backend.vacuum()
    assert backend.checkpoint()
    assert backend.checkpoint(truncate=False)
    assert len(found(backend, "kiwi")) == 50
    assert backend.integrity_check() == []
    connection = backend._connections.connection()
    connection.execute("UPDATE sessions SET message_count = 7")
    connection.execute("DELETE FROM messages_fts WHERE rowid = 3")
    connection.execute("INSERT INTO entries VALUES ('k', 'ghost', 1, 0, 0, NULL, '{}')")
    problems = backend.integrity_check()
    assert any("counters: s1: the record counts 7 messages" in p for p in problems)
    assert any("1 messages unindexed" in p for p in problems)
    assert any("dangling_key: k: points at missing session ghost" in p for p in problems)
    assert backend.rebuild_index() == 50
    assert len(found(backend, "kiwi")) == 50


def test_corrupt_fts_index_is_reported(backend):
    """A full-text index that disagrees with its content fails integrity_check."""
    seed(backend, "s1", None, say("kiwi"))
    backend._connections.connection().execute(
        "UPDATE messages_fts_content SET c0 = 'lime' WHERE id = 1"
    )
    assert any(problem.startswith("index: ") for problem in backend.integrity_check())


@pytest.mark.parametrize("secure_delete", [True, False])
def test_scrub_removes_deleted_text_from_the_files(db_path, secure_delete):
    """After delete_session and scrub(), the deleted text is nowhere in the database files."""
    secret = "zebrafish-password-4471"  # noqa: S105  # test data
    with SQLiteBackend(db_path, secure_delete=secure_delete) as backend:
        seed(backend, "keep", None, *(say(f"ordinary message {n}") for n in range(30)))
        seed(backend, "gone", None, say(f"my secret is {secret} 秘密口令"))
        backend.optimize()
        backend.delete_session("gone")
        backend.scrub()
        data = b"".join(path.read_bytes() for path in db_path.parent.iterdir())
        assert secret.encode() not in data
        assert "秘密口令".encode() not in data
        assert b"4471" not in data
        assert len(found(backend, "ordinary")) == 30


def test_scrub_refuses_to_report_success_while_an_old_reader_holds_the_wal(db_path):
    """scrub() raises LockTimeoutError when a reader keeps the WAL from being truncated."""
    with SQLiteBackend(db_path, busy_timeout=0.05) as backend:
        seed(backend, "s1", None, say("kiwi"))
        reader = raw(db_path)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM messages").fetchone()
        try:
            backend.append_messages("s1", [say("lime")])
            with pytest.raises(LockTimeoutError):
                backend.scrub()
        finally:
            reader.execute("COMMIT")
            reader.close()
        backend.scrub()


def test_wal_limit_can_be_left_to_sqlite(db_path):
    """wal_size_limit=None leaves checkpoints to SQLite; writes work the same."""
    with SQLiteBackend(db_path, wal_size_limit=None) as backend:
        seed(backend, "s1", None, say("kiwi"))
        assert found(backend, "kiwi") == ["kiwi"]
