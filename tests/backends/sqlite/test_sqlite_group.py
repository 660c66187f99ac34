"""Group commit on SQLite: writers queued during a commit share the next one, with pinned semantics.

Each test forms a batch deterministically: it holds the backend's write lock, so the first writer
(the leader) waits for it with a batch of one, lets the other writers queue behind it, then lets
go. The leader commits alone; the first queued writer leads the rest, in arrival order, in one
transaction.
"""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from hermes_sessions.backends import SQLiteBackend
from hermes_sessions.backends.sqlite import _connections as connections
from hermes_sessions.backends.sqlite._group import GroupCommit, is_fatal
from hermes_sessions.exceptions import ConflictError, StorageError
from hermes_sessions.testing._support import minutes, say, seed

WAIT = 30.0
"""Seconds a test waits for writers to queue before failing (never reached when it works)."""


def _group(backend: SQLiteBackend) -> GroupCommit:
    group = backend._connections._group
    assert group is not None
    return group


def in_one_batch(backend, calls):
    """Run ``calls`` (functions of no argument) so that all of them form one batch.

    Returns each call's result or the exception it raised, in call order.
    """
    lock = backend._connections._write_lock
    outcomes: list[object] = [None] * len(calls)

    def attempt(index: int) -> None:
        try:
            outcomes[index] = calls[index]()
        except Exception as error:  # noqa: BLE001  # the outcome under test
            outcomes[index] = error

    group = _group(backend)
    with ThreadPoolExecutor(len(calls) + 1) as pool:
        with lock:
            # The leader: a batch of one, waiting for the lock we hold.
            leader = pool.submit(backend.record_activity, "nobody", seed_time())
            assert group.wait_queued(0, WAIT), "the leader never started"
            done = []
            for index in range(len(calls)):
                done.append(pool.submit(attempt, index))
                assert group.wait_queued(index + 1, WAIT), "a writer never queued"
        leader.result()
        for future in done:
            future.result()
    return outcomes


def seed_time():
    """Any moment: the leader's write touches a key nobody has."""
    return minutes(0)


def test_a_batch_applies_its_members_in_arrival_order(backend, commits):
    """Members of one batch commit together, in arrival order, each seeing the earlier ones."""
    seed(backend, "s1", "agent:main:telegram:dm:1")
    start = backend.get_session("s1").revision
    commits.clear()
    outcomes = in_one_batch(
        backend,
        [
            lambda n=n: backend.append_messages(
                "s1", [say(f"m{n}")], if_revision=start + n if n % 2 else None
            )
            for n in range(6)
        ],
    )
    assert [str(m.content) for m in backend.get_messages("s1")] == [f"m{n}" for n in range(6)]
    assert [result.revision for result in outcomes] == [start + n + 1 for n in range(6)]
    assert len(commits) == 2  # the leader alone, then the six queued writers at once


def test_two_deliveries_of_one_turn_in_a_batch_store_it_once(backend, commits):
    """The second delivery of a turn in the same batch sees the first and is a duplicate."""
    seed(backend, "s1", "agent:main:telegram:dm:1")
    turn = [say("question", platform_message_id="p-1"), say("answer", role="assistant")]
    commits.clear()
    first, second = in_one_batch(
        backend, [lambda: backend.append_messages("s1", turn) for _ in range(2)]
    )
    assert not first.duplicate
    assert second.duplicate
    assert [str(m.content) for m in backend.get_messages("s1")] == ["question", "answer"]
    assert backend.get_session("s1").message_count == 2
    assert len(commits) == 2


def test_a_members_conflict_fails_only_that_member(backend, commits):
    """A stale ``if_revision`` in a batch raises to its caller; the others are stored."""
    seed(backend, "s1", "agent:main:telegram:dm:1")
    start = backend.get_session("s1").revision
    commits.clear()
    outcomes = in_one_batch(
        backend,
        [
            lambda: backend.append_messages("s1", [say("first")]),
            lambda: backend.append_messages("s1", [say("stale")], if_revision=start),
            lambda: backend.append_messages("s1", [say("third")]),
        ],
    )
    assert isinstance(outcomes[1], ConflictError)
    assert [str(m.content) for m in backend.get_messages("s1")] == ["first", "third"]
    assert backend.get_session("s1").message_count == 2
    assert len(commits) == 2


def test_a_members_missing_session_fails_only_that_member(backend):
    """An append to a session that does not exist fails alone; its batch is committed."""
    seed(backend, "s1", "agent:main:telegram:dm:1")
    outcomes = in_one_batch(
        backend,
        [
            lambda: backend.append_messages("s1", [say("kept")]),
            lambda: backend.append_messages("missing", [say("lost")]),
        ],
    )
    assert isinstance(outcomes[1], LookupError)
    assert [str(m.content) for m in backend.get_messages("s1")] == ["kept"]


def _io_error() -> sqlite3.OperationalError:
    error = sqlite3.OperationalError("disk I/O error")
    error.sqlite_errorcode = sqlite3.SQLITE_IOERR_WRITE  # type: ignore[attr-defined]
    return error


def test_an_io_error_fails_every_member_of_its_batch(backend, commits):
    """An I/O error in one member fails the whole batch: nobody's write is stored."""
    seed(backend, "s1", "agent:main:telegram:dm:1")
    run = backend._connections.run

    def broken(connection: sqlite3.Connection) -> None:
        raise _io_error()

    commits.clear()
    outcomes = in_one_batch(
        backend,
        [
            lambda: backend.append_messages("s1", [say("before")]),
            lambda: run(broken, write=True),
            lambda: backend.append_messages("s1", [say("after")]),
        ],
    )
    assert isinstance(outcomes[0], StorageError)
    assert isinstance(outcomes[1], sqlite3.OperationalError)
    assert isinstance(outcomes[2], StorageError)
    assert backend.get_messages("s1") == []
    assert len(commits) == 1  # only the leader's write was committed
    backend.append_messages("s1", [say("later")])  # the next batch works again
    assert [str(m.content) for m in backend.get_messages("s1")] == ["later"]


def test_a_failed_commit_fails_every_member_of_its_batch(backend, monkeypatch):
    """When the ``COMMIT`` of a batch fails, every member raises and nothing is stored."""
    seed(backend, "s1", "agent:main:telegram:dm:1")
    original = connections.crashpoints.reached

    def fail_before_commit(point: str) -> None:
        if point == "sqlite.before_commit" and threading.current_thread().name != "MainThread":
            raise _io_error()
        original(point)

    outcomes = [None, None]

    def arm():
        monkeypatch.setattr(connections.crashpoints, "reached", fail_before_commit)

    lock = backend._connections._write_lock
    group = _group(backend)
    with ThreadPoolExecutor(3) as pool:
        with lock:
            leader = pool.submit(backend.record_activity, "nobody", seed_time())
            assert group.wait_queued(0, WAIT), "the leader never started"
            futures = []
            for n in range(2):
                futures.append(pool.submit(backend.append_messages, "s1", [say(f"m{n}")]))
                assert group.wait_queued(n + 1, WAIT)
            arm()
        for n, future in enumerate(futures):
            outcomes[n] = future.exception()
        assert isinstance(leader.exception(), StorageError)  # the leader's batch failed too
    monkeypatch.setattr(connections.crashpoints, "reached", original)
    assert all(isinstance(outcome, StorageError) for outcome in outcomes)
    assert backend.get_messages("s1") == []


def test_a_call_returns_only_once_its_write_is_durable(db_path):
    """When a batched append returns, another connection already reads what it stored."""
    with SQLiteBackend(db_path) as backend:
        seed(backend, "s1", "agent:main:telegram:dm:1")
        readers: list[list[str]] = []

        def append_and_look(n: int) -> None:
            backend.append_messages("s1", [say(f"m{n}", platform_message_id=f"p{n}")])
            other = sqlite3.connect(db_path)
            try:
                rows = other.execute(
                    "SELECT platform_message_id FROM messages WHERE platform_message_id = ?",
                    (f"p{n}",),
                ).fetchall()
            finally:
                other.close()
            readers.append([row[0] for row in rows])

        in_one_batch(backend, [lambda n=n: append_and_look(n) for n in range(4)])
        assert sorted(readers) == [[f"p{n}"] for n in range(4)]


def test_writes_of_different_kinds_share_a_batch(backend, commits):
    """A routing write and appends to two sessions, queued together, share one commit."""
    seed(backend, "s1", "agent:main:telegram:dm:1")
    seed(backend, "s2", "agent:main:telegram:dm:2")
    entry = backend.get_entry("agent:main:telegram:dm:1")
    commits.clear()
    outcomes = in_one_batch(
        backend,
        [
            lambda: backend.append_messages("s1", [say("one")]),
            lambda: backend.append_messages("s2", [say("two")]),
            lambda: backend.put_entry(entry, expected_revision=entry.revision),
        ],
    )
    assert not any(isinstance(outcome, Exception) for outcome in outcomes)
    assert len(commits) == 2


def test_without_group_commit_every_write_commits_alone(db_path, commits):
    """``group_commit=False``: writes queued on one another still commit one by one."""
    with SQLiteBackend(db_path, group_commit=False) as backend:
        seed(backend, "s1", "agent:main:telegram:dm:1")
        commits.clear()
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(backend.append_messages, "s1", [say(f"m{n}")]) for n in range(4)]
            for future in futures:
                future.result()
        assert len(commits) == 4
        assert backend._connections._group is None


def test_group_commit_is_validated():
    """``group_commit`` takes a bool only."""
    with pytest.raises(TypeError):
        SQLiteBackend(":memory:", group_commit="yes")


@pytest.mark.parametrize(
    ("error", "fatal"),
    [
        (_io_error(), True),
        (sqlite3.IntegrityError("UNIQUE constraint failed"), False),
        (ConflictError("moved on"), False),
        (KeyboardInterrupt(), True),
    ],
)
def test_only_the_databases_own_errors_fail_a_batch(error, fatal):
    """I/O errors and interrupts fail the batch; a constraint or a conflict fails its member."""
    assert is_fatal(error) is fatal
