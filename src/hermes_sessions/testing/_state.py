"""Contract: state in scopes, changed alone or with an append; the per-session revision."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from hermes_sessions.exceptions import ConflictError, SessionNotFoundError, StateTooLargeError
from hermes_sessions.protocols import Backend, RotationPlan, SupportsStateScopes
from hermes_sessions.state import DELETE, MAX_STATE_BYTES, StateScope
from hermes_sessions.testing._support import T0, ContractBase, record, run_workers, say, seed
from hermes_sessions.usage import Usage

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

LANE = StateScope.lane("agent:main:telegram:dm:u1").id
APP = StateScope.app("main").id
USER = StateScope.user("main", "telegram", "u1").id


def _session(session_id: str) -> str:
    return StateScope.session(session_id).id


def _revision(backend: Backend, session_id: str) -> int:
    stored = backend.get_session(session_id)
    assert stored is not None
    return stored.revision


def _state_worker(
    factory: Callable[[Path], Backend], directory: Path, count: int, worker: int
) -> None:
    with factory(directory) as backend:
        for n in range(count):
            backend.update_state({LANE: {f"{worker}:{n}": n}}, session_id="shared")


class StateContract(ContractBase):
    """get_state / update_state, state with appends and plans, and the revision."""

    def test_unknown_scopes_hold_nothing(self, backend: Backend) -> None:
        """A scope nobody wrote is absent from the result (not an empty dict)."""
        assert backend.get_state([APP, LANE]) == {}
        assert backend.get_state([]) == {}

    def test_state_scopes_lists_every_scope_with_a_value(self, backend: Backend) -> None:
        """Optional ``state_scopes()`` lists every scope holding a value, sorted (none emptied)."""
        if not isinstance(backend, SupportsStateScopes):
            pytest.skip("the backend does not implement SupportsStateScopes")
        assert backend.state_scopes() == []
        backend.update_state({LANE: {"a": 1}, APP: {"b": 2}, USER: {"c": 3}, "x|%7C y": {"d": 4}})
        assert backend.state_scopes() == sorted([LANE, APP, USER, "x|%7C y"])
        backend.update_state({USER: {"c": DELETE}})
        assert backend.state_scopes() == sorted([LANE, APP, "x|%7C y"])

    def test_a_delta_sets_keys_and_delete_removes_them(self, backend: Backend) -> None:
        """Top-level keys are set; DELETE removes one; an emptied scope is absent."""
        assert backend.update_state({LANE: {"model": "m-1", "lang": "zh"}}) is None
        backend.update_state({LANE: {"model": "m-2"}, APP: {"flag": True}})
        assert backend.get_state([LANE, APP, USER]) == {
            LANE: {"model": "m-2", "lang": "zh"},
            APP: {"flag": True},
        }
        backend.update_state({LANE: {"model": DELETE, "missing": DELETE}})
        assert backend.get_state([LANE]) == {LANE: {"lang": "zh"}}
        backend.update_state({LANE: {"lang": DELETE}})
        assert backend.get_state([LANE]) == {}

    def test_values_round_trip_as_json(self, backend: Backend) -> None:
        """Nested JSON, CJK text, U+0000 and numbers come back equal."""
        value: dict[str, Any] = {
            "nested": {"list": [1, 2.5, None, True, "文字"], "empty": {}},
            "nul": "a\x00b",
            "big": 2**53,
        }
        backend.update_state({USER: value})
        assert backend.get_state([USER]) == {USER: value}

    def test_a_change_through_a_session_moves_its_revision(self, backend: Backend) -> None:
        """With session_id the revision goes up by one and the record is returned."""
        seed(backend, "s1")
        before = _revision(backend, "s1")
        updated = backend.update_state({_session("s1"): {"step": 1}}, session_id="s1")
        assert updated is not None
        assert updated.revision == before + 1
        assert _revision(backend, "s1") == before + 1

    def test_a_stale_revision_is_refused_and_writes_nothing(self, backend: Backend) -> None:
        """if_revision that is not the session's current revision raises ConflictError."""
        seed(backend, "s1")
        current = _revision(backend, "s1")
        with pytest.raises(ConflictError) as caught:
            backend.update_state({LANE: {"a": 1}}, session_id="s1", if_revision=current + 5)
        assert caught.value.session_id == "s1"
        assert caught.value.actual_revision == current
        assert backend.get_state([LANE]) == {}
        assert _revision(backend, "s1") == current
        backend.update_state({LANE: {"a": 1}}, session_id="s1", if_revision=current)
        assert backend.get_state([LANE]) == {LANE: {"a": 1}}

    def test_if_revision_needs_a_session(self, backend: Backend) -> None:
        """A revision belongs to a session: without session_id it is a ValueError."""
        with pytest.raises(ValueError, match="session_id"):
            backend.update_state({LANE: {"a": 1}}, if_revision=0)

    def test_an_unknown_session_writes_nothing(self, backend: Backend) -> None:
        """update_state through a missing session raises SessionNotFoundError."""
        with pytest.raises(SessionNotFoundError):
            backend.update_state({LANE: {"a": 1}}, session_id="ghost")
        assert backend.get_state([LANE]) == {}

    def test_a_scope_over_the_limit_is_refused_whole(self, backend: Backend) -> None:
        """Over 64 KiB: StateTooLargeError, and no scope of the delta changes."""
        seed(backend, "s1")
        backend.update_state({LANE: {"keep": 1}})
        big = "x" * MAX_STATE_BYTES
        with pytest.raises(StateTooLargeError) as caught:
            backend.update_state({APP: {"ok": 1}, LANE: {"big": big}}, session_id="s1")
        assert caught.value.scope == LANE
        assert backend.get_state([APP, LANE]) == {LANE: {"keep": 1}}
        assert _revision(backend, "s1") == 0
        at_limit = "y" * (MAX_STATE_BYTES - len('{"v":""}'))
        backend.update_state({APP: {"v": at_limit}})
        assert backend.get_state([APP]) == {APP: {"v": at_limit}}

    def test_an_append_changes_state_in_the_same_write(self, backend: Backend) -> None:
        """Messages, usage and state arrive together; the revision moves by one."""
        seed(backend, "s1")
        result = backend.append_messages(
            "s1",
            [say("hi", platform_message_id="1:1"), say("hello", role="assistant")],
            usage=Usage(input=7),
            state={_session("s1"): {"turns": 1}, LANE: {"model": "m"}},
        )
        assert result.revision == 1
        stored = backend.get_session("s1")
        assert stored is not None
        assert (stored.revision, stored.message_count, stored.input_tokens) == (1, 2, 7)
        assert backend.get_state([_session("s1"), LANE]) == {
            _session("s1"): {"turns": 1},
            LANE: {"model": "m"},
        }
        again = backend.append_messages("s1", [say("more")])
        assert again.revision == 2

    def test_a_redelivery_changes_no_state(self, backend: Backend) -> None:
        """A duplicate batch applies no delta, moves no revision, and is never a conflict."""
        seed(backend, "s1")
        backend.append_messages(
            "s1", [say("hi", platform_message_id="1:1")], state={LANE: {"n": 1}}
        )
        again = backend.append_messages(
            "s1", [say("hi", platform_message_id="1:1")], state={LANE: {"n": 2}}, if_revision=0
        )
        assert again.duplicate
        assert again.revision == 1
        assert backend.get_state([LANE]) == {LANE: {"n": 1}}

    def test_a_stale_append_stores_nothing(self, backend: Backend) -> None:
        """if_revision on append: ConflictError, no message, no usage, no state."""
        seed(backend, "s1")
        backend.append_messages("s1", [say("first")])
        with pytest.raises(ConflictError):
            backend.append_messages(
                "s1", [say("late")], usage=Usage(input=3), state={LANE: {"a": 1}}, if_revision=0
            )
        stored = backend.get_session("s1")
        assert stored is not None
        assert (stored.message_count, stored.input_tokens, stored.revision) == (1, 0, 1)
        assert [m.content for m in backend.get_messages("s1")] == ["first"]
        assert backend.get_state([LANE]) == {}
        ok = backend.append_messages("s1", [say("now")], if_revision=1)
        assert ok.revision == 2

    def test_an_append_whose_state_is_too_large_stores_nothing(self, backend: Backend) -> None:
        """The size check comes before any write: the messages are not stored either."""
        seed(backend, "s1")
        with pytest.raises(StateTooLargeError):
            backend.append_messages(
                "s1", [say("hi")], state={LANE: {"big": "x" * (MAX_STATE_BYTES + 1)}}
            )
        assert backend.get_messages("s1") == []
        assert _revision(backend, "s1") == 0

    def test_rewrites_of_the_transcript_move_the_revision(self, backend: Backend) -> None:
        """Edits, rewinds, restores and deletes are changes too; a no-op is not."""
        seed(backend, "s1", None, say("a"), say("b"))
        first, second = backend.get_messages("s1")
        assert first.id is not None
        assert second.id is not None
        start = _revision(backend, "s1")
        backend.replace_message("s1", first.id, say("a2"))
        assert _revision(backend, "s1") == start + 1
        backend.set_active("s1", [second.id], active=False)
        assert _revision(backend, "s1") == start + 2
        backend.set_active("s1", [second.id], active=False)  # nothing changes
        assert _revision(backend, "s1") == start + 2
        backend.delete_messages("s1", [second.id])
        assert _revision(backend, "s1") == start + 3
        backend.replace_messages("s1", [say("c")])
        assert _revision(backend, "s1") == start + 4

    def test_deleting_a_session_deletes_its_state(self, backend: Backend) -> None:
        """The session scope goes with the session; other scopes stay."""
        seed(backend, "s1")
        backend.update_state({_session("s1"): {"a": 1}, LANE: {"b": 2}}, session_id="s1")
        assert backend.delete_session("s1")
        assert backend.get_state([_session("s1"), LANE]) == {LANE: {"b": 2}}

    def test_a_plan_copies_session_state_to_the_new_session(self, backend: Backend) -> None:
        """copy_state_from: the created session starts with a copy; the source keeps its own."""
        seed(backend, "s1")
        backend.update_state({_session("s1"): {"vars": {"x": 1}}}, session_id="s1")
        backend.apply(RotationPlan(at=T0, create=record("s2"), copy_state_from="s1"))
        assert backend.get_state([_session("s2")]) == {_session("s2"): {"vars": {"x": 1}}}
        backend.update_state({_session("s2"): {"vars": {"x": 2}}}, session_id="s2")
        assert backend.get_state([_session("s1")]) == {_session("s1"): {"vars": {"x": 1}}}
        assert _revision(backend, "s2") == 1

    def test_copying_from_an_unknown_session_writes_nothing(self, backend: Backend) -> None:
        """A plan whose copy_state_from does not exist raises and creates nothing."""
        with pytest.raises(SessionNotFoundError):
            backend.apply(RotationPlan(at=T0, create=record("s2"), copy_state_from="ghost"))
        assert backend.get_session("s2") is None

    def test_state_survives_reopening(self, reopen: Callable[[], Backend]) -> None:
        """Every scope and the revision are there after a reopen."""
        first = reopen()
        seed(first, "s1")
        first.append_messages("s1", [say("hi")], state={LANE: {"a": 1}, _session("s1"): {"b": 2}})
        first.update_state({APP: {"c": [3]}})
        second = reopen()
        assert second.get_state([LANE, _session("s1"), APP]) == {
            LANE: {"a": 1},
            _session("s1"): {"b": 2},
            APP: {"c": [3]},
        }
        assert _revision(second, "s1") == 1

    def test_threads_changing_one_scope_lose_no_update(self, backend: Backend) -> None:
        """Eight threads setting their own keys of one scope: every key is there."""
        seed(backend, "s1")

        def work(worker: int) -> None:
            for n in range(15):
                backend.update_state({LANE: {f"{worker}:{n}": n}}, session_id="s1")

        threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(backend.get_state([LANE])[LANE]) == 120
        assert _revision(backend, "s1") == 120

    def test_of_two_writes_at_one_revision_exactly_one_wins(self, backend: Backend) -> None:
        """Concurrent appends naming the same revision: one stored, the other ConflictError."""
        seed(backend, "s1")
        outcomes: list[str] = []
        barrier = threading.Barrier(2)

        def work(worker: int) -> None:
            barrier.wait()
            try:
                backend.append_messages("s1", [say(f"w{worker}")], if_revision=0)
            except ConflictError:
                outcomes.append("conflict")
            else:
                outcomes.append("stored")

        threads = [threading.Thread(target=work, args=(w,)) for w in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes) == ["conflict", "stored"]
        assert len(backend.get_messages("s1")) == 1

    def test_processes_changing_one_scope_lose_no_update(
        self, multiprocess: Backend, data_dir: Path
    ) -> None:
        """Four processes merging keys into one scope: all 60 keys, revision 60."""
        seed(multiprocess, "shared")
        assert run_workers(_state_worker, self.make_backend, data_dir, 15) == [0, 0, 0, 0]
        assert len(multiprocess.get_state([LANE])[LANE]) == 60
        assert _revision(multiprocess, "shared") == 60
