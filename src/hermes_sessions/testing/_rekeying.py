"""Contract: key migration's steps of a rotation plan (``RotationPlan.delete`` and ``rekey``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from hermes_sessions.exceptions import ConflictError, InvalidArgumentError, SessionNotFoundError
from hermes_sessions.protocols import Backend, EntryWrite, RotationPlan
from hermes_sessions.testing._support import T0, ContractBase, entry_for, minutes, say, seed

if TYPE_CHECKING:
    from collections.abc import Callable

OLD = "agent:main:feishu:group:oc_1:ou_1"
NEW = "agent:main:feishu:group:oc_1"
OTHER = "agent:main:feishu:group:oc_1:ou_2"


def _move(backend: Backend, old: str, new: str, session_id: str) -> RotationPlan:
    """A plan moving ``old``'s entry to ``new`` and the record's key with it."""
    current = backend.get_entry(old)
    assert current is not None
    return RotationPlan(
        at=minutes(5),
        delete=[(old, current.revision)],
        entries=[EntryWrite(entry=entry_for(new, session_id), expected_revision=None)],
        rekey=[(session_id, new)],
    )


class KeyRewriteContract(ContractBase):
    """Deleting entries and rewriting a record's ``session_key`` inside one rotation plan."""

    def test_moves_an_entry_and_its_record_key_together(self, backend: Backend) -> None:
        """One plan deletes the old key, writes the new one and rewrites the record's key."""
        seed(backend, "s1", OLD, say("hi"))
        before = backend.get_session("s1")
        assert before is not None
        backend.apply(_move(backend, OLD, NEW, "s1"))
        assert backend.get_entry(OLD) is None
        moved = backend.get_entry(NEW)
        assert moved is not None
        assert (moved.session_id, moved.revision) == ("s1", 1)
        after = backend.get_session("s1")
        assert after is not None
        assert after.session_key == NEW
        assert (after.revision, after.message_count, after.end_reason) == (before.revision, 1, None)
        assert [m.content for m in backend.get_messages("s1")] == ["hi"]
        assert [e.session_key for e in backend.entries(session_id="s1")] == [NEW]

    def test_a_stale_delete_writes_nothing(self, backend: Backend) -> None:
        """A delete naming another revision raises ConflictError and changes nothing."""
        seed(backend, "s1", OLD)
        plan = RotationPlan(
            at=T0,
            delete=[(OLD, 7)],
            entries=[EntryWrite(entry=entry_for(NEW, "s1"), expected_revision=None)],
            rekey=[("s1", NEW)],
        )
        with pytest.raises(ConflictError):
            backend.apply(plan)
        assert backend.get_entry(OLD) is not None
        assert backend.get_entry(NEW) is None
        stored = backend.get_session("s1")
        assert stored is not None
        assert stored.session_key == OLD

    def test_deleting_a_missing_entry_conflicts(self, backend: Backend) -> None:
        """A delete of a key without an entry raises ConflictError."""
        seed(backend, "s1", OLD)
        with pytest.raises(ConflictError):
            backend.apply(RotationPlan(at=T0, delete=[(OTHER, 1)]))
        assert backend.get_entry(OLD) is not None

    def test_rekeying_an_unknown_session_writes_nothing(self, backend: Backend) -> None:
        """A rekey naming no session raises SessionNotFoundError before anything changes."""
        seed(backend, "s1", OLD)
        plan = RotationPlan(at=T0, delete=[(OLD, 1)], rekey=[("nowhere", NEW)])
        with pytest.raises(SessionNotFoundError):
            backend.apply(plan)
        assert backend.get_entry(OLD) is not None

    def test_a_merged_session_ends_once_no_key_points_at_it(self, backend: Backend) -> None:
        """Ending after a delete: the session left without a key ends, a shared one stays open."""
        seed(backend, "s1", OLD)
        seed(backend, "s2", OTHER)
        backend.put_entry(entry_for(NEW, "s2"), expected_revision=None)
        plan = RotationPlan(
            at=minutes(5),
            delete=[(OLD, 1), (OTHER, 1)],
            rekey=[("s1", NEW), ("s2", NEW)],
            end=[("s1", "key_merged"), ("s2", "key_merged")],
        )
        backend.apply(plan)
        ended = backend.get_session("s1")
        kept = backend.get_session("s2")
        assert ended is not None
        assert kept is not None
        assert (ended.end_reason, ended.ended_at, ended.session_key) == (
            "key_merged",
            minutes(5),
            NEW,
        )
        assert (kept.end_reason, kept.session_key) == (None, NEW)
        assert [e.session_key for e in backend.entries()] == [NEW]

    def test_the_plan_survives_reopening(
        self, backend: Backend, reopen: Callable[[], Backend]
    ) -> None:
        """Deleted entries stay deleted and rewritten keys stay rewritten after a reopen."""
        seed(backend, "s1", OLD, say("hi"))
        backend.apply(_move(backend, OLD, NEW, "s1"))
        fresh = reopen()
        assert fresh.get_entry(OLD) is None
        moved = fresh.get_entry(NEW)
        stored = fresh.get_session("s1")
        assert moved is not None
        assert stored is not None
        assert (moved.session_id, stored.session_key) == ("s1", NEW)

    def test_a_plan_may_not_delete_and_write_one_key(self) -> None:
        """Deleting and writing the same key in one plan is refused when the plan is made."""
        with pytest.raises(InvalidArgumentError, match="same keys"):
            RotationPlan(
                at=T0,
                delete=[(OLD, 1)],
                entries=[EntryWrite(entry=entry_for(OLD, "s1"), expected_revision=None)],
            )
