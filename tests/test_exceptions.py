"""The exception tree: one root, matching built-ins, structured attributes, pickling."""

from __future__ import annotations

import ast
import json
import pickle
from pathlib import Path

import pytest

from hermes_sessions import exceptions
from hermes_sessions.exceptions import (
    AdapterPayloadError,
    AmbiguousMemoryMatchError,
    AmbiguousSessionError,
    BackendClosedError,
    ConflictError,
    CorruptRecordError,
    HermesSessionsError,
    IncognitoLaneError,
    IncognitoMemoryError,
    IncompatibleStoreError,
    InvalidArgumentError,
    InvalidIdError,
    InvalidKeyError,
    InvalidMemoryContentError,
    InvalidTitleError,
    InvalidValueError,
    LeaseHeldError,
    LockTimeoutError,
    MemoryContentBlockedError,
    MemoryDriftError,
    MemoryEntryNotFoundError,
    MemoryLimitError,
    MemoryRefusedError,
    MessageTooLargeError,
    MissingDependencyError,
    SessionNotFoundError,
    StateTooLargeError,
    StorageError,
    TitleConflictError,
    TurnDeadlockError,
    UnknownMemoryTargetError,
)

REFUSALS = [
    (InvalidMemoryContentError("the content is empty", target="memory", action="add"), ValueError),
    (
        MemoryContentBlockedError(
            target="user",
            action="replace",
            pattern_ids=["injection.role_hijack", "unicode.invisible"],
            excerpts=["you are now a p", "<U+200B>"],
        ),
        ValueError,
    ),
    (
        MemoryLimitError(
            target="memory",
            action="add",
            entries=["a", "b"],
            usage=4,
            limit=5,
            requested_usage=9,
        ),
        ValueError,
    ),
    (MemoryEntryNotFoundError("needle", target="memory", action="remove"), LookupError),
    (
        AmbiguousMemoryMatchError(
            "x", [f"entry {n}" for n in range(12)], target="user", action="replace"
        ),
        LookupError,
    ),
    (
        MemoryDriftError(
            target="memory",
            action="add",
            path=Path("/m/MEMORY.md"),
            backup_path=Path("/m/MEMORY.md.drift-20260101T000000Z-ab12cd34.bak"),
            reason="it is not valid UTF-8 (at byte 3)",
        ),
        RuntimeError,
    ),
    (
        MemoryDriftError(
            target="memory", action="add", path="/m/MEMORY.md", backup_path=None, reason="odd"
        ),
        RuntimeError,
    ),
    (IncognitoMemoryError("agent:main:feishu:dm:ou_lin", target="user", action="add"), OSError),
]
INSTANCES = [
    (InvalidKeyError("agent:x", "too short"), ValueError),
    (InvalidIdError("../x", "it contains '..'"), ValueError),
    (InvalidTitleError("t" * 101, "too long"), ValueError),
    (TitleConflictError("plans", "20260101_000000_abcdef12"), ValueError),
    (CorruptRecordError("bad json", path="/tmp/x.jsonl", line=7), ValueError),
    (StateTooLargeError("lane|agent:main:cli:dm:1", 70_000, 65_536), ValueError),
    (CorruptRecordError("bad json", path="state.db", table="messages", row=17), ValueError),
    (InvalidValueError("Message.extra['x']", "is nan"), ValueError),
    (InvalidArgumentError("undo needs n >= 1, got 0"), ValueError),
    (MessageTooLargeError(size=20, limit=10, index=1), ValueError),
    (SessionNotFoundError(session_id="abc"), LookupError),
    (SessionNotFoundError(key="agent:main:x:dm", hint="send a message first"), LookupError),
    (AmbiguousSessionError("2026", [f"id{i}" for i in range(12)]), LookupError),
    (ConflictError("agent:main:x:dm", expected_revision=3, actual_revision=4), RuntimeError),
    (ConflictError(session_id="20260101_000000_abcdef12"), RuntimeError),
    (BackendClosedError(), RuntimeError),
    (LeaseHeldError("compress:s1", "worker-2"), RuntimeError),
    (TurnDeadlockError("agent:main:telegram:dm:8", ["agent:main:telegram:dm:7"]), RuntimeError),
    (LockTimeoutError("/tmp/MEMORY.md.lock", 10.0), TimeoutError),
    (IncognitoLaneError("rotate", "lanes stay apart"), PermissionError),
    (StorageError("disk I/O error"), OSError),
    (IncompatibleStoreError("state.db", found_version=9, supported_version=2), OSError),
    (
        MissingDependencyError("pytest", extra="testing", feature="hermes_sessions.testing"),
        ImportError,
    ),
    *REFUSALS,
    (UnknownMemoryTargetError("notes"), ValueError),
    (AdapterPayloadError("telegram", "message.chat.type", "is missing"), ValueError),
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
    first = str(ConflictError("k", expected_revision=None, actual_revision=1))
    assert "expected no entry, found revision 1" in first
    gone = str(ConflictError("k", expected_revision=4, actual_revision=None, attempts=16))
    assert "expected revision 4, found no entry" in gone
    assert "16 times in a row" in gone
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


@pytest.mark.parametrize("error", [error for error, _ in REFUSALS])
def test_refusals_convert_to_json_error_results(error):
    """Every refusal has a JSON-serialisable ``to_dict`` with success false, code and message."""
    assert isinstance(error, MemoryRefusedError)
    data = error.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["success"] is False
    assert data["error"] == str(error)
    assert data["code"] == type(error).code
    assert (data["target"], data["action"]) == (error.target, error.action)


def test_codes_are_distinct():
    """Each refusal class has its own machine-readable code."""
    codes = {type(error).code for error, _ in REFUSALS}
    assert codes == {
        "invalid_content",
        "blocked",
        "over_limit",
        "no_match",
        "ambiguous_match",
        "drift",
        "incognito",
    }
    assert MemoryRefusedError("x", target="memory", action="add").to_dict()["code"] == "refused"


def test_new_classes_are_exported_and_drawn_in_the_tree():
    """Every new class is in ``__all__`` and in the module docstring's tree."""
    for cls in (MemoryRefusedError, UnknownMemoryTargetError, *(type(e) for e, _ in REFUSALS)):
        assert cls.__name__ in exceptions.__all__
        assert cls.__name__ in (exceptions.__doc__ or "")
    assert list(exceptions.__all__) == sorted(exceptions.__all__)


def test_memory_refusals_say_what_to_do():
    """Memory refusals name the numbers, the file and the next step."""
    limit = REFUSALS[2][0]
    assert "MEMORY.md would use 9 of its 5 characters (now 4)" in str(limit)
    assert "Consolidate" in str(limit)
    assert "distinctive part" in str(REFUSALS[3][0])
    ambiguous = REFUSALS[4][0]
    assert "12 different entries of USER.md" in str(ambiguous)
    assert "'entry 9', ..." in str(ambiguous)
    drift = REFUSALS[5][0]
    assert "MEMORY.md.drift-20260101T000000Z-ab12cd34.bak" in str(drift)
    assert "repair" in str(drift)
    assert "it is kept" in str(REFUSALS[6][0])
    assert REFUSALS[6][0].to_dict()["backup_path"] is None
    assert "'memory'" in str(UnknownMemoryTargetError("notes"))


def test_long_texts_are_shortened_in_messages():
    """A huge old_text or target does not flood the message."""
    error = MemoryEntryNotFoundError("x" * 500, target="memory", action="remove")
    assert len(str(error)) < 300
    assert error.old_text == "x" * 500
    target = UnknownMemoryTargetError("t" * 500)
    assert len(str(target)) < 300


def test_a_missing_dependency_names_the_extra_and_survives_pickling():
    """The error names the module, the feature and the pip command, also after pickling."""
    error = MissingDependencyError("pytest", extra="testing", feature="hermes_sessions.testing")
    copy = pickle.loads(pickle.dumps(error))  # noqa: S301  # our own data
    assert copy.name == "pytest"
    assert "pip install 'hermes-sessions[testing]'" in str(copy)
    assert "hermes_sessions.testing needs pytest" in str(copy)


def test_corrupt_records_of_a_database_name_file_table_and_row():
    """A damaged row is located by file, table and row, and its next step can be replaced."""
    error = CorruptRecordError(
        "body is not JSON", path="/data/state.db", table="messages", row=17, hint="restore it"
    )
    assert "/data/state.db, table messages row 17" in str(error)
    assert str(error).endswith("; restore it")
    assert error.located("/other.db") is error
    unplaced = CorruptRecordError("body is not JSON", table="messages", row=17)
    placed = unplaced.located("/data/state.db")
    assert (placed.path, placed.table, placed.row) == ("/data/state.db", "messages", 17)


def _bare_raises(path: Path) -> list[str]:
    """``raise ValueError(...)`` statements in ``path``, as ``file:line``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            func = node.exc.func
            if isinstance(func, ast.Name) and func.id == "ValueError":
                found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_module_raises_a_bare_value_error():
    """Every refusal of a value is a library error: ``except HermesSessionsError`` catches it."""
    package = Path(exceptions.__file__).parent
    bare = [hit for path in sorted(package.rglob("*.py")) for hit in _bare_raises(path)]
    assert bare == [], "raise InvalidArgumentError (or a closer subclass) instead"


def test_a_bad_setting_is_a_library_error():
    """Out-of-range settings raise InvalidArgumentError, which is still a ValueError."""
    from hermes_sessions import ResetPolicy, SessionQuery  # noqa: PLC0415  # the subjects

    with pytest.raises(InvalidArgumentError, match="idle_minutes"):
        ResetPolicy(mode="idle", idle_minutes=0)
    with pytest.raises(InvalidArgumentError, match="limit"):
        SessionQuery(limit=0)
