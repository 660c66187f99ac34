"""Contract: the atomic rotation plan and leases."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from hermes_sessions.exceptions import ConflictError, SessionNotFoundError
from hermes_sessions.protocols import Backend, EntryWrite, RotationPlan
from hermes_sessions.state import StateScope
from hermes_sessions.testing._support import (
    T0,
    ContractBase,
    entry_for,
    minutes,
    record,
    say,
    seed,
)

KEY = "agent:main:telegram:dm:1"
KEY2 = "agent:main:telegram:dm:2"


def rotate(key: str, old: str, new: str, revision: int, reason: str = "idle") -> RotationPlan:
    """The plan of an automatic reset of ``key`` from ``old`` to a new session ``new``."""
    return RotationPlan(
        at=minutes(60),
        create=record(new, started_at=minutes(60)),
        entries=[EntryWrite(entry=entry_for(key, new, at=minutes(60)), expected_revision=revision)],
        end=[(old, reason)],
    )


class PlanContract(ContractBase):
    """apply(plan): all or nothing, compare-and-swap, shared sessions, leases."""

    def test_first_contact_creates_session_and_entry(self, backend: Backend) -> None:
        """A plan creating a session with first messages and a new entry applies whole."""
        written = backend.apply(
            RotationPlan(
                at=T0,
                create=record("s1"),
                messages=[say("hello"), say("hi!", role="assistant")],
                entries=[EntryWrite(entry=entry_for(KEY, "s1"), expected_revision=None)],
            )
        )
        assert [(e.session_key, e.session_id, e.revision) for e in written] == [(KEY, "s1", 1)]
        assert backend.get_entry(KEY) == written[0]
        assert [m.content for m in backend.get_messages("s1")] == ["hello", "hi!"]
        stored = backend.get_session("s1")
        assert stored is not None
        assert stored.message_count == 2

    def test_rotation_ends_creates_and_repoints(self, backend: Backend) -> None:
        """A reset ends the old session, creates the new one and moves the key at once."""
        seed(backend, "old", KEY, say("yesterday"))
        (entry,) = backend.apply(rotate(KEY, "old", "new", revision=1))
        assert (entry.session_id, entry.revision) == ("new", 2)
        old = backend.get_session("old")
        assert old is not None
        assert (old.end_reason, old.ended_at) == ("idle", minutes(60))
        assert backend.get_session("new") is not None
        assert [m.content for m in backend.get_messages("old")] == ["yesterday"]

    def test_stale_plan_writes_nothing(self, backend: Backend) -> None:
        """A plan whose revision is stale raises ConflictError and changes nothing at all."""
        seed(backend, "old", KEY)
        backend.record_activity(KEY, minutes(5))
        seed(backend, "other")
        backend.put_entry(entry_for(KEY, "other"), expected_revision=1)
        with pytest.raises(ConflictError):
            backend.apply(rotate(KEY, "old", "new", revision=1))
        assert backend.get_session("new") is None
        old = backend.get_session("old")
        assert old is not None
        assert not old.is_ended
        entry = backend.get_entry(KEY)
        assert entry is not None
        assert entry.session_id == "other"

    def test_shared_session_is_not_ended_while_referenced(self, backend: Backend) -> None:
        """A session two keys point at is ended only when the last key leaves it."""
        seed(backend, "shared", KEY)
        backend.put_entry(entry_for(KEY2, "shared"), expected_revision=None)
        backend.apply(rotate(KEY, "shared", "n1", revision=1))
        shared = backend.get_session("shared")
        assert shared is not None
        assert not shared.is_ended
        backend.apply(rotate(KEY2, "shared", "n2", revision=1, reason="daily"))
        shared = backend.get_session("shared")
        assert shared is not None
        assert shared.end_reason == "daily"

    def test_repoint_moves_every_key(self, backend: Backend) -> None:
        """Repoint moves every key from one session to another and bumps their revisions."""
        seed(backend, "parent", KEY)
        backend.put_entry(entry_for(KEY2, "parent"), expected_revision=None)
        written = backend.apply(
            RotationPlan(
                at=minutes(5),
                create=record("child", parent_session_id="parent"),
                repoint=[("parent", "child")],
                end=[("parent", "compression")],
                require_open=["parent"],
            )
        )
        assert sorted((e.session_key, e.session_id, e.revision) for e in written) == [
            (KEY, "child", 2),
            (KEY2, "child", 2),
        ]
        parent = backend.get_session("parent")
        assert parent is not None
        assert parent.end_reason == "compression"
        assert backend.entries(session_id="parent") == []

    def test_require_open_refuses_an_ended_session(self, backend: Backend) -> None:
        """A plan requiring an ended session to be open conflicts and writes nothing."""
        seed(backend, "parent", KEY)
        backend.end_session("parent", "compression", at=minutes(1))
        with pytest.raises(ConflictError) as info:
            backend.apply(
                RotationPlan(
                    at=minutes(2),
                    create=record("child2", parent_session_id="parent"),
                    repoint=[("parent", "child2")],
                    require_open=["parent"],
                )
            )
        assert info.value.session_id == "parent"
        assert backend.get_session("child2") is None
        entry = backend.get_entry(KEY)
        assert entry is not None
        assert entry.session_id == "parent"

    def test_reopen_in_a_plan(self, backend: Backend) -> None:
        """Resuming an ended session reopens it and ends the one left behind."""
        seed(backend, "current", KEY)
        seed(backend, "target")
        backend.end_session("target", "session_reset", at=minutes(1))
        backend.apply(
            RotationPlan(
                at=minutes(2),
                reopen=["target"],
                entries=[EntryWrite(entry=entry_for(KEY, "target"), expected_revision=1)],
                end=[("current", "session_switch")],
            )
        )
        target = backend.get_session("target")
        current = backend.get_session("current")
        assert target is not None
        assert current is not None
        assert not target.is_ended
        assert current.end_reason == "session_switch"

    def test_plan_naming_an_unknown_session_writes_nothing(self, backend: Backend) -> None:
        """A plan pointing a key at a session that does not exist fails before writing."""
        seed(backend, "s1", KEY)
        with pytest.raises(SessionNotFoundError):
            backend.apply(
                RotationPlan(
                    at=minutes(1),
                    create=record("made"),
                    entries=[EntryWrite(entry=entry_for(KEY, "ghost"), expected_revision=1)],
                )
            )
        assert backend.get_session("made") is None

    def test_plan_creating_an_existing_session_conflicts(self, backend: Backend) -> None:
        """A plan whose new session id is taken conflicts and writes nothing (no silent merge)."""
        seed(backend, "taken", KEY, say("original"))
        with pytest.raises(ConflictError) as info:
            backend.apply(
                RotationPlan(
                    at=minutes(1),
                    create=record("taken"),
                    messages=[say("intruder")],
                    entries=[EntryWrite(entry=entry_for(KEY2, "taken"), expected_revision=None)],
                )
            )
        assert info.value.session_id == "taken"
        assert [m.content for m in backend.get_messages("taken")] == ["original"]
        assert backend.get_entry(KEY2) is None

    def test_require_open_of_an_unknown_session(self, backend: Backend) -> None:
        """Requiring a session that does not exist to be open is SessionNotFoundError."""
        with pytest.raises(SessionNotFoundError):
            backend.apply(RotationPlan(at=minutes(1), require_open=["ghost"]))

    def test_plan_end_keeps_the_first_reason(self, backend: Backend) -> None:
        """Ending through a plan does not overwrite an earlier end reason."""
        seed(backend, "old", KEY)
        backend.end_session("old", "suspended", at=minutes(1))
        backend.apply(rotate(KEY, "old", "new", revision=1))
        old = backend.get_session("old")
        assert old is not None
        assert (old.end_reason, old.ended_at) == ("suspended", minutes(1))

    def test_racing_first_contacts_make_one_session(self, backend: Backend) -> None:
        """Threads racing to create a key's first session: one plan wins, the rest conflict."""
        barrier = threading.Barrier(6)
        winners: list[str] = []

        def contact(n: int) -> None:
            plan = RotationPlan(
                at=T0,
                create=record(f"s{n}"),
                messages=[say(f"hello from {n}")],
                entries=[EntryWrite(entry=entry_for(KEY, f"s{n}"), expected_revision=None)],
            )
            barrier.wait()
            try:
                backend.apply(plan)
            except ConflictError:
                return
            winners.append(f"s{n}")

        threads = [threading.Thread(target=contact, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(winners) == 1
        entry = backend.get_entry(KEY)
        assert entry is not None
        assert entry.session_id == winners[0]
        losers = [f"s{n}" for n in range(6) if f"s{n}" != winners[0]]
        assert all(backend.get_session(s) is None for s in losers)

    # -- leases ------------------------------------------------------------------------------------

    def test_lease_is_exclusive_until_it_expires(self, backend: Backend) -> None:
        """A lease excludes other holders until its TTL passes; its holder may renew it."""
        ttl = timedelta(minutes=5)
        assert backend.acquire_lease("compress:s1", "a", ttl=ttl, now=T0)
        assert not backend.acquire_lease("compress:s1", "b", ttl=ttl, now=minutes(4))
        assert backend.acquire_lease("compress:s1", "a", ttl=ttl, now=minutes(4))
        assert not backend.acquire_lease("compress:s1", "b", ttl=ttl, now=minutes(8))
        assert backend.acquire_lease("compress:s1", "b", ttl=ttl, now=minutes(9))

    def test_lease_release(self, backend: Backend) -> None:
        """Only the holder's release frees a lease; leases on other resources are separate."""
        ttl = timedelta(minutes=5)
        assert backend.acquire_lease("r", "a", ttl=ttl, now=T0)
        assert backend.acquire_lease("other", "b", ttl=ttl, now=T0)
        backend.release_lease("r", "b")
        assert not backend.acquire_lease("r", "b", ttl=ttl, now=T0)
        backend.release_lease("r", "a")
        assert backend.acquire_lease("r", "b", ttl=ttl, now=T0)

    def test_a_plan_copies_a_transcript_to_the_new_session(self, backend: Backend) -> None:
        """copy_messages_from: the new session starts with the active messages, then its own."""
        seed(backend, "s1", None, say("a", platform_message_id="p1"), say("b"), say("c"))
        (_, hidden, _) = backend.get_messages("s1")
        backend.set_active("s1", [hidden.id or 0], active=False)
        backend.apply(
            RotationPlan(at=T0, create=record("s2"), copy_messages_from="s1", messages=[say("d")])
        )
        copied = backend.get_messages("s2")
        assert [m.content for m in copied] == ["a", "c", "d"]
        assert {m.session_id for m in copied} == {"s2"}
        assert copied[0].platform_message_id == "p1"
        assert [m.content for m in backend.get_messages("s1", include_inactive=True)] == [
            "a",
            "b",
            "c",
        ]
        stored = backend.get_session("s2")
        assert stored is not None
        assert stored.message_count == 3
        backend.apply(RotationPlan(at=T0, create=record("s3"), messages=[say(x) for x in "acd"]))
        same = backend.get_session("s3")
        assert same is not None
        assert stored.revision == same.revision

    def test_copying_a_transcript_from_an_unknown_session_writes_nothing(
        self, backend: Backend
    ) -> None:
        """A plan whose copy_messages_from does not exist raises and creates nothing."""
        with pytest.raises(SessionNotFoundError):
            backend.apply(RotationPlan(at=T0, create=record("s2"), copy_messages_from="ghost"))
        assert backend.get_session("s2") is None

    def test_copying_a_transcript_needs_a_session_to_create(self) -> None:
        """copy_messages_from without create is refused when the plan is built."""
        with pytest.raises(ValueError, match="copy_messages_from"):
            RotationPlan(at=T0, copy_messages_from="s1")

    # -- drop: the conditional delete of retention -------------------------------------------------

    def test_drop_deletes_an_unreferenced_session_whole(self, backend: Backend) -> None:
        """A drop deletes the session, its messages and state, and orphans its children."""
        seed(backend, "old", KEY, say("yesterday"))
        scope = StateScope.session("old").id
        backend.update_state({scope: {"a": 1}}, session_id="old")
        backend.apply(RotationPlan(at=minutes(1), create=record("child", parent_session_id="old")))
        backend.apply(rotate(KEY, "old", "new", revision=1))
        old = backend.get_session("old")
        assert old is not None
        backend.apply(RotationPlan(at=minutes(2), drop=[("old", old.revision)]))
        assert backend.get_session("old") is None
        assert backend.get_state([scope]) == {}
        child = backend.get_session("child")
        assert child is not None
        assert child.parent_session_id is None
        with pytest.raises(SessionNotFoundError):
            backend.get_messages("old")

    def test_drop_keeps_a_session_a_key_points_at(self, backend: Backend) -> None:
        """A key pointing at a dropped session (a resume got there first): ConflictError."""
        seed(backend, "old", KEY, say("keep me"))
        backend.apply(rotate(KEY, "old", "new", revision=1))
        old = backend.get_session("old")
        assert old is not None
        backend.put_entry(entry_for(KEY2, "old"), expected_revision=None)
        with pytest.raises(ConflictError) as info:
            backend.apply(RotationPlan(at=minutes(2), drop=[("old", old.revision)]))
        assert info.value.session_id == "old"
        assert [m.content for m in backend.get_messages("old")] == ["keep me"]

    def test_drop_keeps_a_session_that_changed(self, backend: Backend) -> None:
        """A session whose revision moved on since it was read is kept (ConflictError)."""
        seed(backend, "old", KEY, say("first"))
        backend.apply(rotate(KEY, "old", "new", revision=1))
        old = backend.get_session("old")
        assert old is not None
        backend.append_messages("old", [say("late")])
        with pytest.raises(ConflictError):
            backend.apply(RotationPlan(at=minutes(2), drop=[("old", old.revision)]))
        assert [m.content for m in backend.get_messages("old")] == ["first", "late"]

    def test_a_failed_drop_writes_nothing_of_the_plan(self, backend: Backend) -> None:
        """The drop's checks are the plan's: when one fails, nothing else of it is written."""
        seed(backend, "held", KEY)
        held = backend.get_session("held")
        assert held is not None
        with pytest.raises(ConflictError):
            backend.apply(
                RotationPlan(at=minutes(1), create=record("made"), drop=[("held", held.revision)])
            )
        assert backend.get_session("made") is None
        assert backend.get_session("held") is not None

    def test_a_plan_moves_a_key_off_a_session_and_drops_it(self, backend: Backend) -> None:
        """The key leaves the session in the plan that drops it: both happen, atomically."""
        seed(backend, "live", KEY, say("old news"))
        live = backend.get_session("live")
        assert live is not None
        (entry,) = backend.apply(
            RotationPlan(
                at=minutes(1),
                create=record("fresh", started_at=minutes(1)),
                entries=[EntryWrite(entry=entry_for(KEY, "fresh"), expected_revision=1)],
                end=[("live", "retention")],
                drop=[("live", live.revision)],
            )
        )
        assert entry.session_id == "fresh"
        assert backend.get_session("live") is None

    def test_dropping_an_unknown_session(self, backend: Backend) -> None:
        """Dropping a session that is gone (another pass took it) is SessionNotFoundError."""
        with pytest.raises(SessionNotFoundError):
            backend.apply(RotationPlan(at=minutes(1), drop=[("ghost", 1)]))

    def test_a_plan_cannot_drop_what_it_keeps(self) -> None:
        """Dropping a session the plan creates, reopens or points a key at is refused."""
        with pytest.raises(ValueError, match="drops"):
            RotationPlan(at=T0, reopen=["s1"], drop=[("s1", 1)])
        with pytest.raises(ValueError, match="drops"):
            RotationPlan(
                at=T0,
                entries=[EntryWrite(entry=entry_for(KEY, "s1"), expected_revision=None)],
                drop=[("s1", 1)],
            )
