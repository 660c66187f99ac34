"""The exception tree: one root, matching built-ins, structured attributes, pickling."""

from __future__ import annotations

import pickle

import pytest

from hermes_sessions import exceptions
from hermes_sessions.exceptions import (
    AmbiguousSessionError,
    BackendClosedError,
    ConflictError,
    CorruptRecordError,
    HermesSessionsError,
    IncompatibleStoreError,
    InvalidIdError,
    InvalidKeyError,
    InvalidTitleError,
    LeaseHeldError,
    LockTimeoutError,
    SessionNotFoundError,
    StorageError,
    TitleConflictError,
)

INSTANCES = [
    (InvalidKeyError("agent:x", "too short"), ValueError),
    (InvalidIdError("../x", "it contains '..'"), ValueError),
    (InvalidTitleError("t" * 101, "too long"), ValueError),
    (TitleConflictError("plans", "20260101_000000_abcdef12"), ValueError),
    (CorruptRecordError("bad json", path="/tmp/x.jsonl", line=7), ValueError),
    (SessionNotFoundError(session_id="abc"), LookupError),
    (SessionNotFoundError(key="agent:main:x:dm", hint="send a message first"), LookupError),
    (AmbiguousSessionError("2026", [f"id{i}" for i in range(12)]), LookupError),
    (ConflictError("agent:main:x:dm", expected_revision=3, actual_revision=4), RuntimeError),
    (ConflictError(session_id="20260101_000000_abcdef12"), RuntimeError),
    (BackendClosedError(), RuntimeError),
    (LeaseHeldError("compress:s1", "worker-2"), RuntimeError),
    (LockTimeoutError("/tmp/MEMORY.md.lock", 10.0), TimeoutError),
    (StorageError("disk I/O error"), OSError),
    (IncompatibleStoreError("state.db", found_version=9, supported_version=2), OSError),
]


@pytest.mark.parametrize(("error", "builtin"), INSTANCES)
def test_every_error_has_one_root_and_its_builtin(error, builtin):
    """Each error is a HermesSessionsError and the built-in that matches its meaning."""
    assert isinstance(error, HermesSessionsError)
    assert isinstance(error, builtin)


@pytest.mark.parametrize(("error", "builtin"), INSTANCES)
def test_errors_pickle_with_their_attributes(error, builtin):
    """Errors survive pickling (crossing processes) with message and attributes intact."""
    copy = pickle.loads(pickle.dumps(error))  # noqa: S301  # our own data
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.__dict__ == error.__dict__
    assert isinstance(copy, builtin)


def test_every_public_exception_is_in_the_tree():
    """The module exports exactly the documented classes, all under the root."""
    for name in exceptions.__all__:
        cls = getattr(exceptions, name)
        assert issubclass(cls, HermesSessionsError)
        assert name in (exceptions.__doc__ or "")


def test_messages_say_what_to_do():
    """Messages carry the structured facts and a next step."""
    corrupt = CorruptRecordError("bad json", path="/data/s.jsonl", line=7)
    assert "/data/s.jsonl" in str(corrupt)
    assert "line 7" in str(corrupt)
    assert "repair" in str(corrupt)
    assert "re-read" in str(ConflictError("k", expected_revision=1, actual_revision=2))
    assert "upgrade" in str(IncompatibleStoreError("x", found_version=3, supported_version=2))
    ambiguous = AmbiguousSessionError("20", [f"id{i}" for i in range(12)])
    assert ambiguous.candidates[-1] == "id11"
    assert "id9, ..." in str(ambiguous)
    assert "hint" not in str(SessionNotFoundError(session_id="x"))


def test_corrupt_record_without_a_path():
    """A corrupt record that did not come from a file says so without a location."""
    error = CorruptRecordError("not an object")
    assert error.path is None
    assert error.line is None
    assert " in " not in str(error).split(":")[0]
