"""SQLite connections and transactions: processes, crashes, retries, threads and forks."""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlite_helpers import found, raw

import hermes_sessions
from hermes_sessions.backends import SQLiteBackend
from hermes_sessions.backends.sqlite import _connections as connections
from hermes_sessions.exceptions import LockTimeoutError
from hermes_sessions.testing._support import minutes, record, say, seed


def _append_in_process(path, worker, count):
    """Append ``count`` messages one call at a time, redelivering every fifth one."""
    with SQLiteBackend(path) as backend:
        for n in range(count):
            message = say(f"{worker}:{n}", platform_message_id=f"{worker}:{n}")
            backend.append_messages("shared", [message], touch_at=minutes(n))
            if n % 5 == 0:
                backend.append_messages("shared", [message])


@pytest.mark.slow
def test_eight_processes_append_without_loss_or_duplicates(db_path):
    """Eight processes appending at once: every message exactly once, no lock error."""
    with SQLiteBackend(db_path) as backend:
        seed(backend, "shared", "agent:main:telegram:dm:1")
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_append_in_process, args=(db_path, worker, 30))
        for worker in range(8)
    ]
    for process in workers:
        process.start()
    for process in workers:
        process.join()
    assert [process.exitcode for process in workers] == [0] * 8
    with SQLiteBackend(db_path) as backend:
        contents = [str(m.content) for m in backend.get_messages("shared")]
        assert sorted(contents) == sorted(f"{w}:{n}" for w in range(8) for n in range(30))
        record = backend.get_session("shared")
        assert record is not None
        assert record.message_count == 240
        assert backend.integrity_check() == []


_CRASH_WRITER = """
import sys
from hermes_sessions.backends import SQLiteBackend
from hermes_sessions.models import Message

backend = SQLiteBackend(sys.argv[1])
n = 0
while True:
    (stored,) = backend.append_messages(
        "s1", [Message(role="user", content=f"m{n} 飞书", platform_message_id=f"p{n}")]
    )
    print(stored.id, flush=True)
    n += 1
"""


@pytest.mark.slow
def test_killed_writer_loses_no_acknowledged_append(db_path):
    """SIGKILL during appends: on reopen every acknowledged message is there exactly once."""
    with SQLiteBackend(db_path) as backend:
        seed(backend, "s1")
    source = str(Path(hermes_sessions.__file__).resolve().parents[1])
    environment = {**os.environ, "PYTHONPATH": source}
    writer = subprocess.Popen(
        [sys.executable, "-c", _CRASH_WRITER, str(db_path)],
        stdout=subprocess.PIPE,
        text=True,
        env=environment,
    )
    acknowledged = []
    assert writer.stdout is not None
    for line in writer.stdout:
        acknowledged.append(int(line))
        if len(acknowledged) == 150:
            writer.send_signal(signal.SIGKILL)
            break
    writer.wait()
    writer.stdout.close()
    with SQLiteBackend(db_path) as backend:
        stored = backend.get_messages("s1")
        ids = [m.id for m in stored]
        assert len(ids) == len(set(ids))
        assert set(acknowledged) <= set(ids)
        assert backend.integrity_check() == []
        assert len(found(backend, "飞书")) == len(stored)


def test_busy_database_is_retried_then_succeeds(db_path, monkeypatch):
    """A write that finds the database locked is retried after a pause and succeeds."""
    backend = SQLiteBackend(db_path, busy_timeout=0.01, retries=3)
    blocker = raw(db_path)
    blocker.execute("BEGIN IMMEDIATE")
    pauses = []

    def pause(seconds):
        pauses.append(seconds)
        if blocker.in_transaction:
            blocker.execute("COMMIT")

    monkeypatch.setattr(connections, "_sleep", pause)
    with backend:
        stored = backend.create_session(record("s1"))
        assert backend.get_session("s1") == stored
    blocker.close()
    assert len(pauses) == 1
    assert 0 <= pauses[0] <= 0.25


def test_lock_held_too_long_raises_lock_timeout(db_path, monkeypatch):
    """When every retry finds the database locked, the caller gets LockTimeoutError."""
    backend = SQLiteBackend(db_path, busy_timeout=0.01, retries=2)
    blocker = raw(db_path)
    blocker.execute("BEGIN IMMEDIATE")
    pauses = []
    monkeypatch.setattr(connections, "_sleep", pauses.append)
    with backend, pytest.raises(LockTimeoutError) as info:
        backend.create_session(record("s1"))
    blocker.execute("ROLLBACK")
    blocker.close()
    assert len(pauses) == 2
    assert info.value.resource == str(db_path)
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)


def test_each_thread_uses_its_own_connection(backend):
    """Threads get separate connections; a finished thread's connection is released."""
    seen = []

    def work():
        seen.append(backend._connections.connection())
        backend.get_session("nope")

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen[0] is not backend._connections.connection()
    del seen[:]
    gc.collect()
    assert len(backend._connections) == 1


def test_a_forked_child_opens_its_own_connection(backend):
    """After fork the child uses a new connection, never the parent's."""
    seed(backend, "s1")
    parent = backend._connections.connection()
    child = os.fork()
    if child == 0:  # pragma: no cover  # runs in the child; its exit code is the assertion
        ok = (
            backend._connections.connection() is not parent
            and backend.get_session("s1") is not None
        )
        backend.append_messages("s1", [say("from the child")])
        backend.close()  # closes the child's connection only
        os._exit(0 if ok else 1)
    _pid, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert backend._connections.connection() is parent
    backend.append_messages("s1", [say("from the parent")])
    assert [m.content for m in backend.get_messages("s1")] == ["from the child", "from the parent"]


def test_work_that_ended_its_own_transaction_is_not_rolled_back_twice(backend):
    """An error after the transaction already ended propagates as it is."""

    def work(connection):
        connection.execute("ROLLBACK")
        raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        backend._connections.run(work, write=True)
    assert backend.get_session("s1") is None
