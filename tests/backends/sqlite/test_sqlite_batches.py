"""``SQLiteBackend.write_batch``: whole calls in one transaction, each in a savepoint."""

from __future__ import annotations

import sqlite3

from hermes_sessions import crashpoints
from hermes_sessions.backends import InMemoryBackend, JSONLBackend, SQLiteBackend
from hermes_sessions.backends.sqlite import _connections as connections
from hermes_sessions.exceptions import ConflictError, StorageError
from hermes_sessions.protocols import SupportsWriteBatches
from hermes_sessions.testing._support import say, seed


def _texts(backend, session_id):
    return [str(m.content) for m in backend.get_messages(session_id)]


def test_only_sqlite_offers_write_batches(tmp_path):
    """The ability is SQLite's; the other bundled backends keep one commit per write."""
    with SQLiteBackend(tmp_path / "state.db") as sqlite_backend:
        assert isinstance(sqlite_backend, SupportsWriteBatches)
    assert not isinstance(InMemoryBackend(), SupportsWriteBatches)
    with JSONLBackend(tmp_path / "jsonl") as jsonl:
        assert not isinstance(jsonl, SupportsWriteBatches)


def test_a_batch_commits_once_and_each_call_sees_the_earlier_ones(backend, commits):
    """Calls run in order in one transaction: a read in a later call sees an earlier write."""
    seed(backend, "s1", "agent:main:telegram:dm:1")
    commits.clear()
    outcomes = backend.write_batch(
        [
            lambda: backend.append_messages("s1", [say("one")]),
            lambda: _texts(backend, "s1"),
            lambda: backend.append_messages("s1", [say("two")]),
        ]
    )
    assert [error for _result, error in outcomes] == [None, None, None]
    assert outcomes[1][0] == ["one"]
    assert _texts(backend, "s1") == ["one", "two"]
    assert len(commits) == 1


def test_an_empty_batch_commits_nothing(backend, commits):
    """No calls, no transaction."""
    commits.clear()
    assert backend.write_batch([]) == []
    assert commits == []


def test_a_batch_of_one_rolls_back_its_own_error(backend):
    """A lone call that fails stores nothing and gets its own error back."""
    seed(backend, "s1", "agent:main:telegram:dm:1")

    def half_then_conflict():
        backend.append_messages("s1", [say("half")])
        raise ConflictError(session_id="s1")

    ((result, error),) = backend.write_batch([half_then_conflict])
    assert result is None
    assert isinstance(error, ConflictError)
    assert _texts(backend, "s1") == []


def test_a_calls_own_error_rolls_back_only_its_savepoint(backend):
    """A call that wrote and then failed leaves nothing; the calls around it are committed."""
    seed(backend, "s1", "agent:main:telegram:dm:1")

    def half_then_conflict():
        backend.append_messages("s1", [say("half")])
        raise ConflictError(session_id="s1")

    outcomes = backend.write_batch(
        [
            lambda: backend.append_messages("s1", [say("before")]),
            half_then_conflict,
            lambda: backend.append_messages("s1", [say("after")]),
        ]
    )
    assert isinstance(outcomes[1][1], ConflictError)
    assert outcomes[0][1] is None
    assert outcomes[2][1] is None
    assert _texts(backend, "s1") == ["before", "after"]


def test_a_busy_database_runs_the_whole_batch_again(backend, monkeypatch):
    """A busy error inside a call rolls the batch back and runs every call again, once stored."""
    seed(backend, "s1", "agent:main:telegram:dm:1")
    monkeypatch.setattr(connections, "_sleep", lambda _seconds: None)
    attempts = 0

    def busy_once():
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            error = sqlite3.OperationalError("database is locked")
            error.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
            raise StorageError("SQLite failed") from error
        return "second time"

    outcomes = backend.write_batch(
        [lambda: backend.append_messages("s1", [say("once")]), busy_once]
    )
    assert outcomes[1] == ("second time", None)
    assert attempts == 2
    assert _texts(backend, "s1") == ["once"]


def test_an_interrupt_in_a_call_fails_the_whole_batch(backend):
    """A ``KeyboardInterrupt`` is not a call's own error: the batch stores nothing."""
    seed(backend, "s1", "agent:main:telegram:dm:1")

    def interrupted():
        raise KeyboardInterrupt

    outcomes = backend.write_batch(
        [lambda: backend.append_messages("s1", [say("lost")]), interrupted]
    )
    assert all(isinstance(error, KeyboardInterrupt) for _result, error in outcomes)
    assert outcomes[0][1] is not outcomes[1][1]  # each caller raises its own copy
    assert _texts(backend, "s1") == []


def test_a_failed_commit_is_a_storage_error_for_every_call(backend, monkeypatch):
    """The ``COMMIT`` failing is translated like any SQLite error of the backend."""
    seed(backend, "s1", "agent:main:telegram:dm:1")
    original = crashpoints.reached

    def fail(point: str) -> None:
        if point == "sqlite.before_commit":
            error = sqlite3.OperationalError("disk I/O error")
            error.sqlite_errorcode = sqlite3.SQLITE_IOERR_WRITE  # type: ignore[attr-defined]
            raise error
        original(point)

    monkeypatch.setattr(connections.crashpoints, "reached", fail)
    outcomes = backend.write_batch(
        [lambda n=n: backend.append_messages("s1", [say(f"m{n}")]) for n in range(3)]
    )
    monkeypatch.setattr(connections.crashpoints, "reached", original)
    assert all(isinstance(error, StorageError) for _result, error in outcomes)
    assert _texts(backend, "s1") == []


def test_without_group_commit_each_call_commits_alone(db_path, commits):
    """``group_commit=False`` is kept: the calls of a batch are committed one by one."""
    with SQLiteBackend(db_path, group_commit=False) as backend:
        seed(backend, "s1", "agent:main:telegram:dm:1")
        commits.clear()
        outcomes = backend.write_batch(
            [lambda n=n: backend.append_messages("s1", [say(f"m{n}")]) for n in range(3)]
        )
        assert [error for _result, error in outcomes] == [None, None, None]
        assert _texts(backend, "s1") == ["m0", "m1", "m2"]
    assert len(commits) == 3


def test_without_group_commit_a_calls_error_is_its_own(db_path):
    """Without group commit too, a failing call gets its error and the others are stored."""
    with SQLiteBackend(db_path, group_commit=False) as backend:
        seed(backend, "s1", "agent:main:telegram:dm:1")

        def conflict():
            raise ConflictError(session_id="s1")

        outcomes = backend.write_batch(
            [lambda: backend.append_messages("s1", [say("kept")]), conflict]
        )
        assert outcomes[0][1] is None
        assert isinstance(outcomes[1][1], ConflictError)
        assert _texts(backend, "s1") == ["kept"]
