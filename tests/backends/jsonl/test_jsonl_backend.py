"""JSONLBackend beyond the conformance suite: its files, the object itself, search and plans."""

from __future__ import annotations

import os
import stat
import threading
from datetime import timedelta

import attrs
import filelock
import pytest
from jsonl_helpers import KEY, json_lines, session_file

from hermes_sessions.backends import JSONLBackend
from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.backends.jsonl import _engine as _jsonl_engine
from hermes_sessions.exceptions import (
    BackendClosedError,
    InvalidIdError,
    InvalidValueError,
    LockTimeoutError,
    SessionNotFoundError,
    StorageError,
)
from hermes_sessions.protocols import EntryWrite, RotationPlan
from hermes_sessions.queries import SearchQuery, SessionQuery
from hermes_sessions.testing._support import T0, entry_for, minutes, record, say, seed

# -- the files -------------------------------------------------------------------------------------


def test_files_are_plain_json_lines(backend, directory):
    """Session files, journal and snapshot are JSON lines a person (or grep) can read."""
    seed(backend, "s1", KEY, say("你好 docker", platform_message_id="m1"), title="标题")
    backend.append_messages("s1", [say("second", role="assistant")], touch_at=minutes(1))
    backend.end_session("s1", "idle", at=minutes(2))
    backend.compact()
    header, first, second, end = json_lines(session_file(directory, "s1"))
    assert header["type"] == "session"
    assert header["format"] == 2
    assert header["record"]["id"] == "s1"
    assert header["record"]["session_key"] == KEY
    assert header["record"]["title"] == "标题"
    assert (first["type"], first["message"]["content"], first["message"]["id"]) == (
        "message",
        "你好 docker",
        1,
    )
    assert second["message"]["role"] == "assistant"
    assert (end["type"], end["reason"]) == ("end", "idle")
    assert "你好 docker" in session_file(directory, "s1").read_text(encoding="utf-8")
    snapshot = json_lines(directory / "routing.jsonl")
    assert snapshot[0]["type"] == "snapshot"
    entries = [line["entry"] for line in snapshot if line["type"] == "entry"]
    assert [(e["session_key"], e["session_id"]) for e in entries] == [(KEY, "s1")]
    assert entries[0]["updated_at"] == "2026-05-01T09:01:00Z"
    assert json_lines(directory / "journal.jsonl") == [
        {"op": "journal", "format": 2, "base_tx": snapshot[0]["last_tx"]}
    ]


def test_every_write_is_announced_in_the_journal(backend, directory):
    """An append is one journal line naming the session; activity is one line, no rewrite."""
    seed(backend, "s1", KEY)
    snapshot_before = (directory / "routing.jsonl").exists()
    before = json_lines(directory / "journal.jsonl")
    backend.append_messages("s1", [say("q"), say("a", role="assistant")], touch_at=minutes(1))
    backend.record_activity(KEY, minutes(2), last_prompt_tokens=10)
    added = json_lines(directory / "journal.jsonl")[len(before) :]
    assert [(line["op"], line.get("session"), line.get("lines")) for line in added] == [
        ("write", "s1", 2),
        ("touch", None, None),
    ]
    assert added[1]["key"] == KEY
    assert (directory / "routing.jsonl").exists() == snapshot_before


def test_no_op_writes_write_nothing(backend, directory):
    """Writes that change nothing (old activity, ending an ended session, ...) add no line."""
    seed(backend, "s1", KEY, say("hi", platform_message_id="p"))
    backend.end_session("s1", "idle", at=minutes(1))
    size = (directory / "journal.jsonl").stat().st_size
    backend.record_activity(KEY, T0 - timedelta(minutes=5))
    backend.end_session("s1", "daily", at=minutes(2))
    backend.update_session("s1")
    assert backend.set_active("s1", [99], active=False) == 0
    assert backend.delete_messages("s1", [99]) == 0
    backend.append_messages("s1", [say("hi again", platform_message_id="p")])
    backend.append_messages("s1", [say("hi again", platform_message_id="p")], touch_at=T0)
    backend.release_lease("nothing", "nobody")
    assert (directory / "journal.jsonl").stat().st_size == size


def test_non_numeric_increments_write_nothing(backend, directory):
    """An increment that is not a number (a bool included) is refused before any write."""
    seed(backend, "s1", KEY)
    size = (directory / "journal.jsonl").stat().st_size
    with pytest.raises(TypeError, match="must be a number"):
        backend.update_session("s1", increments={"input_tokens": True})
    assert (directory / "journal.jsonl").stat().st_size == size


def test_values_that_are_not_json_write_nothing(backend, directory):
    """A non-JSON value is refused (InvalidValueError, naming the field) before any write."""
    seed(backend, "s1", KEY)
    size = (directory / "journal.jsonl").stat().st_size
    with pytest.raises(InvalidValueError, match=r"metadata\['tags'\] is of type set"):
        backend.update_session("s1", values={"metadata": {"tags": {"a", "b"}}})
    with pytest.raises(InvalidValueError, match="NaN"):
        backend.update_session("s1", increments={"estimated_cost_usd": float("inf")})
    with pytest.raises(InvalidValueError):
        backend.append_messages("s1", [say("x", extra={"when": object()})])
    assert (directory / "journal.jsonl").stat().st_size == size
    assert sorted(p.name for p in (directory / "sessions").iterdir()) == ["s1.jsonl"]


def test_redelivery_writes_nothing_not_even_activity(backend, directory):
    """A redelivered batch leaves every file as it was: no line, no touch of the key."""
    seed(backend, "s1", KEY, say("hi", platform_message_id="p"))
    before = {path: path.read_bytes() for path in directory.rglob("*") if path.is_file()}
    result = backend.append_messages(
        "s1", [say("hi", platform_message_id="p"), say("reply")], touch_at=minutes(9)
    )
    assert result.duplicate
    assert {path: path.read_bytes() for path in directory.rglob("*") if path.is_file()} == before
    entry = backend.get_entry(KEY)
    assert entry is not None
    assert entry.updated_at != minutes(9)
    assert len(backend.get_messages("s1")) == 1


def test_edits_rewrite_the_file_without_the_old_text(backend, directory):
    """replace_message, replace_messages and delete_messages leave no trace of the old text."""
    seed(backend, "s1", None, say("secret one"), say("secret two"), say("keep"))
    first, second, _ = backend.get_messages("s1")
    backend.replace_message("s1", first.id or 0, say("redacted"))
    backend.delete_messages("s1", [second.id or 0])
    text = session_file(directory, "s1").read_text(encoding="utf-8")
    assert "secret" not in text
    assert [m.content for m in JSONLBackend(directory).get_messages("s1")] == ["redacted", "keep"]
    backend.replace_messages("s1", [say("fresh")])
    assert "keep" not in session_file(directory, "s1").read_text(encoding="utf-8")
    assert not list((directory / "sessions").glob(".*"))


def test_message_ids_are_never_reused_after_a_rewrite(backend, directory):
    """The next message id survives deleting the newest messages and reopening."""
    seed(backend, "s1", None, say("a"), say("b"), say("c"))
    newest = backend.get_messages("s1")[-1]
    backend.delete_messages("s1", [newest.id or 0])
    with JSONLBackend(directory) as again:
        (added,) = again.append_messages("s1", [say("d")])
    assert (added.id or 0) > (newest.id or 0)


def test_record_round_trip_keeps_last_activity_through_rewrites(backend, directory):
    """Counters and last activity read back from a rewritten file equal the cached ones."""
    seed(backend, "s1", None, say("a", timestamp=minutes(5)), say("b", timestamp=minutes(1)))
    backend.update_session("s1", increments={"input_tokens": 3, "estimated_cost_usd": 0.25})
    (old, _) = backend.get_messages("s1")
    backend.replace_message("s1", old.id or 0, say("a2", timestamp=minutes(30)))
    backend.set_active("s1", [old.id or 0], active=False)
    expected = backend.get_session("s1")
    with JSONLBackend(directory) as again:
        assert again.get_session("s1") == expected
    assert expected is not None
    assert (expected.last_active_at, expected.message_count) == (minutes(5), 1)


def test_session_ids_never_name_a_path_outside(backend, directory):
    """Ids like ``../x`` are refused before any path is built from them."""
    for call in (
        lambda: backend.get_session("../outside"),
        lambda: backend.append_messages("../../etc/passwd", [say("x")]),
        lambda: backend.get_messages(".hidden"),
        lambda: backend.delete_session("a/b"),
    ):
        with pytest.raises(InvalidIdError):
            call()
    assert sorted(p.name for p in directory.parent.iterdir()) == ["data"]


def test_files_and_directories_are_private(backend, directory):
    """Every directory is 0700 and every file 0600, lock, snapshot and backups included."""
    seed(backend, "s1", KEY, say("x"))
    backend.compact()
    session_file(directory, "s1").write_bytes(b"garbage\n")
    JSONLBackend.repair(directory)
    paths = [directory, *directory.rglob("*")]
    assert any(p.name == "routing.jsonl" for p in paths)
    assert any("backups" in p.parts for p in paths)
    for path in paths:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), path


# -- search ----------------------------------------------------------------------------------------


QUERIES = ["docker", "机器", "deploy OR 部署", '"docker compose"', "net*", "-x docker", "🚀"]


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("order", ["rank", "newest", "oldest"])
def test_search_matches_the_reference_backend(directory, query, order):
    """The same data gives the same hits, scores and snippets as InMemoryBackend (reopened)."""
    texts = [
        "docker-compose up fails",
        "use docker compose v2",
        "docker部署redis",
        "机器学习",
        "飞书机器人 deploy 🚀",
        "the network is down",
        "x docker",
    ]
    reference = InMemoryBackend()
    with JSONLBackend(directory) as jsonl:
        for backend in (reference, jsonl):
            for s in range(3):
                seed(
                    backend,
                    f"s{s}",
                    None,
                    *(say(t, timestamp=minutes(i + s)) for i, t in enumerate(texts[s::2])),
                    source="tool" if s == 2 else "telegram",
                )
            backend.set_active("s0", [1], active=False)
    search = SearchQuery(text=query, order=order, limit=None, exclude_sources=())
    with JSONLBackend(directory) as reopened:
        got = reopened.search(search)
    want = reference.search(search)
    assert [(h.message, h.session, h.score, h.snippet, h.spans) for h in got] == [
        (h.message, h.session, h.score, h.snippet, h.spans) for h in want
    ]


# -- the object itself -----------------------------------------------------------------------------


def test_constructor_checks_its_arguments(directory):
    """Bad options fail at construction, before anything is created."""
    with pytest.raises(ValueError, match="durability"):
        JSONLBackend(directory, durability="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="compact_threshold"):
        JSONLBackend(directory, compact_threshold=0)
    with pytest.raises(ValueError, match="lock_timeout"):
        JSONLBackend(directory, lock_timeout=-1)
    assert not directory.exists()


def test_options_are_typed_and_read_only(directory):
    """Options of the wrong type fail at construction; once open, they are attributes that stay."""
    with pytest.raises(TypeError, match="lock_timeout"):
        JSONLBackend(directory, lock_timeout="soon")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="compact_threshold"):
        JSONLBackend(directory, compact_threshold=True)
    assert not directory.exists()
    with JSONLBackend(str(directory), durability="normal", compact_threshold=5) as backend:
        assert (backend.directory, backend.durability) == (directory, "normal")
        assert (backend.lock_timeout, backend.compact_threshold) == (30.0, 5)
        with pytest.raises(attrs.exceptions.FrozenAttributeError):
            backend.durability = "full"  # type: ignore[misc]


def test_normal_durability_reads_back(directory):
    """durability='normal' (no fsync) stores the same data."""
    with JSONLBackend(directory, durability="normal") as backend:
        seed(backend, "s1", KEY, say("x"))
        backend.append_messages("s1", [say("w")])
        backend.replace_messages("s1", [say("y")])
        backend.create_session(record("gone"))
        backend.delete_session("gone")
        backend.compact()
        assert repr(backend) == f"<JSONLBackend {str(directory)!r} normal>"
    with JSONLBackend(directory) as again:
        assert [m.content for m in again.get_messages("s1")] == ["y"]
        assert again.directory == directory
    assert repr(again).endswith("closed>")


def test_closed_backend_refuses_compaction(backend):
    """compact() after close raises BackendClosedError."""
    backend.close()
    with pytest.raises(BackendClosedError):
        backend.compact()


def test_lock_timeout_is_reported(backend, directory):
    """A directory lock held elsewhere for too long gives LockTimeoutError, not a hang."""
    seed(backend, "s1", KEY)
    holder = filelock.FileLock(directory / ".lock")
    ready, done = threading.Event(), threading.Event()

    def hold():
        with holder:
            ready.set()
            done.wait()

    thread = threading.Thread(target=hold)
    thread.start()
    ready.wait()
    try:
        with pytest.raises(LockTimeoutError) as info:
            JSONLBackend(directory, lock_timeout=0.01)
        assert info.value.resource.endswith(".lock")
        assert backend.get_entry(KEY) is not None  # a read with nothing new needs no lock
    finally:
        done.set()
        thread.join()


def test_session_listing_reflects_other_processes(backend, directory):
    """A listing in one process shows sessions another one just created."""
    with JSONLBackend(directory) as other:
        seed(other, "s1", KEY, say("hello there"))
        page = backend.list_sessions(SessionQuery())
    assert [(item.record.id, item.preview) for item in page.items] == [("s1", "hello there")]


def test_os_errors_become_storage_errors(backend, directory, monkeypatch):
    """A file-system failure reaches the caller as StorageError with the cause chained."""
    seed(backend, "s1", KEY)

    def broken(*_args, **_kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(_jsonl_engine, "append_journal", broken)
    with pytest.raises(StorageError) as info:
        backend.record_activity(KEY, minutes(1))
    assert isinstance(info.value.__cause__, PermissionError)
    assert backend.get_entry(KEY).updated_at == T0  # type: ignore[union-attr]
    assert os.access(directory, os.W_OK)


# -- agreement with the reference on unusual plans ------------------------------------------------


def _unusual_plans():
    """Plans the store rarely makes, each applied after seeding ``s1`` (key KEY) and ``s2``."""
    return {
        "ended at birth": RotationPlan(
            at=minutes(5),
            create=record("s3"),
            messages=[say("born ended")],
            end=[("s3", "compression"), ("s2", "idle"), ("s2", "daily")],
        ),
        "reopen an open session and end it": RotationPlan(
            at=minutes(5), reopen=["s2", "s2"], end=[("s2", "idle")]
        ),
        "repoint then write the same key": RotationPlan(
            at=minutes(5),
            repoint=[("s1", "s2")],
            entries=[EntryWrite(entry=entry_for(KEY, "s2", suspended=True), expected_revision=1)],
            end=[("s1", "compression")],
        ),
    }


@pytest.mark.parametrize("name", sorted(_unusual_plans()))
def test_unusual_plans_match_the_reference_backend(directory, name):
    """Plans outside the store's usual shapes leave the same state as InMemoryBackend's apply."""
    plan = _unusual_plans()[name]
    states = []
    reference = InMemoryBackend()
    with JSONLBackend(directory) as jsonl:
        for backend in (reference, jsonl):
            seed(backend, "s1", KEY, say("one"))
            seed(backend, "s2", None, say("two", platform_message_id="p1"))
            written = backend.apply(plan)
            states.append((written, _state(backend)))
    with JSONLBackend(directory) as reopened:
        assert _state(reopened) == states[1][1]
    assert states[0] == states[1]


def _state(backend):
    sessions = [backend.get_session(s) for s in ("s1", "s2", "s3")]
    messages = [
        backend.get_messages(s.id, include_inactive=True) for s in sessions if s is not None
    ]
    return backend.entries(), sessions, messages


def test_plan_requiring_an_unknown_session_writes_nothing(backend, directory):
    """require_open naming a session that does not exist raises SessionNotFoundError."""
    size = (directory / "journal.jsonl").stat().st_size
    with pytest.raises(SessionNotFoundError):
        backend.apply(RotationPlan(at=T0, create=record("s1"), require_open=["ghost"]))
    assert backend.get_session("s1") is None
    assert (directory / "journal.jsonl").stat().st_size == size


def test_reopening_an_open_session_writes_nothing(backend, directory):
    """Reopening a session that never ended returns it unchanged without a write."""
    seed(backend, "s1", KEY)
    size = (directory / "journal.jsonl").stat().st_size
    assert backend.reopen_session("s1") == backend.get_session("s1")
    assert (directory / "journal.jsonl").stat().st_size == size
