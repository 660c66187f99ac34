"""JSONLBackend state and revision: where they live in the files, and crash safety."""

from __future__ import annotations

import pytest
from jsonl_helpers import json_lines, session_file

from hermes_sessions.backends import JSONLBackend
from hermes_sessions.backends.jsonl import _engine as _jsonl_engine
from hermes_sessions.exceptions import StorageError
from hermes_sessions.protocols import RotationPlan
from hermes_sessions.state import StateScope
from hermes_sessions.testing._support import T0, record, say, seed

LANE = StateScope.lane("agent:main:telegram:dm:42").id
APP = StateScope.app("main").id


def _scope(session_id):
    return StateScope.session(session_id).id


def _revision(backend, session_id):
    return backend.get_session(session_id).revision


def _torn_append(monkeypatch):
    """Make the next session-file append stop half-way, as if the process were killed."""
    real = _jsonl_engine.append_lines

    def torn(path, data, *, expected_size, sync):
        real(path, data[: len(data) // 2], expected_size=expected_size, sync=sync)
        raise OSError("killed mid-write")

    monkeypatch.setattr(_jsonl_engine, "append_lines", torn)


@pytest.mark.parametrize("with_messages", [True, False])
def test_state_of_a_write_cut_short_is_never_applied(
    backend, directory, monkeypatch, with_messages
):
    """Messages and state arrive together or not at all: the voided write carries the state."""
    seed(backend, "s1")
    backend.update_state({LANE: {"n": 1}}, session_id="s1")
    changes = {LANE: {"n": 2}, APP: {"a": 1}}
    if with_messages:
        write = lambda: backend.append_messages("s1", [say("lost"), say("too")], state=changes)  # noqa: E731
    else:
        write = lambda: backend.update_state(changes, session_id="s1")  # noqa: E731
    with monkeypatch.context() as patch:
        _torn_append(patch)
        with pytest.raises(StorageError, match="killed"):
            write()
    with JSONLBackend(directory) as after:
        assert after.get_state([LANE, APP]) == {LANE: {"n": 1}}
        assert _revision(after, "s1") == 1
        assert after.get_messages("s1") == []
        after.update_state({LANE: {"n": 3}}, session_id="s1", if_revision=1)
        assert _revision(after, "s1") == 2
    ops = [line["op"] for line in json_lines(directory / "journal.jsonl")]
    assert "void" in ops


def test_state_and_revision_live_in_the_documented_records(backend, directory):
    """Scopes ride on the journal (write, state); the session file gets a revise line."""
    seed(backend, "s1")
    backend.update_state({_scope("s1"): {"step": 1}}, session_id="s1")
    backend.update_state({APP: {"beta": True}})
    journal = json_lines(directory / "journal.jsonl")
    write = next(line for line in journal if line["op"] == "write")
    assert write["state"] == {_scope("s1"): {"step": 1}}
    assert write["lines"] == 1
    assert journal[-1]["op"] == "state"
    assert journal[-1]["scopes"] == {APP: {"beta": True}}
    assert json_lines(session_file(directory, "s1"))[-1]["type"] == "revise"


def test_state_and_revision_survive_compaction_and_rewrites(backend, directory):
    """The snapshot holds the scopes; a rewrite's header holds the revision it reached."""
    seed(backend, "s1", None, say("a"), say("b"))
    backend.append_messages("s1", [say("c")], state={LANE: {"m": 1}, _scope("s1"): {"x": 1}})
    first = backend.get_messages("s1")[0]
    backend.replace_message("s1", first.id, say("a2"))
    backend.compact()
    revision = _revision(backend, "s1")
    assert revision == 2
    snapshot = json_lines(directory / "routing.jsonl")
    assert snapshot[0]["states"] == 2
    assert {line["scope"] for line in snapshot if line["type"] == "state"} == {LANE, _scope("s1")}
    assert json_lines(session_file(directory, "s1"))[0]["record"]["revision"] == 2
    backend.scrub()  # rewrites every file without a change: no bump
    with JSONLBackend(directory) as after:
        assert after.get_state([LANE, _scope("s1")]) == {LANE: {"m": 1}, _scope("s1"): {"x": 1}}
        assert _revision(after, "s1") == revision


def test_another_process_sees_state_and_a_copied_session_scope(backend, directory):
    """A second backend on the directory catches up with state, plans and removals."""
    seed(backend, "s1")
    with JSONLBackend(directory) as other:
        assert other.get_state([_scope("s1")]) == {}
        backend.update_state({_scope("s1"): {"v": 1}}, session_id="s1")
        backend.apply(RotationPlan(at=T0, create=record("s2"), copy_state_from="s1"))
        assert other.get_state([_scope("s2")]) == {_scope("s2"): {"v": 1}}
        backend.delete_session("s1")
        assert other.get_state([_scope("s1"), _scope("s2")]) == {_scope("s2"): {"v": 1}}


def test_repair_keeps_state_when_it_rebuilds_the_index(backend, directory):
    """A lost journal after a compaction: repair restores the snapshot's state."""
    seed(backend, "s1")
    backend.update_state({LANE: {"kept": True}, _scope("s1"): {"x": 1}}, session_id="s1")
    backend.compact()
    backend.close()
    (directory / "journal.jsonl").unlink()
    report = JSONLBackend.repair(directory)
    assert report.rebuilt_index
    with JSONLBackend(directory) as after:
        assert after.get_state([LANE, _scope("s1")]) == {
            LANE: {"kept": True},
            _scope("s1"): {"x": 1},
        }
        assert _revision(after, "s1") == 1


def test_a_value_returned_is_a_copy(backend):
    """Changing what get_state returned changes nothing stored."""
    backend.update_state({APP: {"list": [1]}})
    backend.get_state([APP])[APP]["list"].append(2)
    assert backend.get_state([APP]) == {APP: {"list": [1]}}
