"""Contract: a redelivered batch (a webhook sent twice) is stored once; usage rides along."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import attrs
import pytest

from hermes_sessions.exceptions import SessionNotFoundError
from hermes_sessions.testing._support import ContractBase, entry_for, minutes, say, seed
from hermes_sessions.usage import Usage

if TYPE_CHECKING:
    from hermes_sessions.models import Message
    from hermes_sessions.protocols import Backend
    from hermes_sessions.results import AppendResult

KEY = "agent:main:telegram:dm:1"


def _turn(reply: str = "answer") -> list[Message]:
    return [say("question", platform_message_id="42:7"), say(reply, role="assistant")]


class RedeliveryContract(ContractBase):
    """append_messages: the redelivery rule of ``rules.plan_append`` on every backend."""

    def test_redelivered_turn_stores_nothing(self, backend: Backend) -> None:
        """The same user message with a new reply is a redelivery: the new reply is not kept."""
        seed(backend, "s1")
        first = backend.append_messages("s1", _turn("first answer"))
        again = backend.append_messages("s1", _turn("second answer"))
        assert not first.duplicate
        assert again.duplicate
        assert list(again) == [first[0]]
        assert again.existing == (first[0],)
        assert again.stored == ()
        assert [m.content for m in backend.get_messages("s1")] == ["question", "first answer"]
        stored = backend.get_session("s1")
        assert stored is not None
        assert stored.message_count == 2

    def test_the_first_platform_id_decides(self, backend: Backend) -> None:
        """Messages without an id before the first id'd one do not hide a redelivery."""
        seed(backend, "s1")
        backend.append_messages("s1", [say("question", platform_message_id="p1")])
        again = backend.append_messages(
            "s1", [say("note"), say("question", platform_message_id="p1"), say("reply")]
        )
        assert again.duplicate
        assert [m.content for m in backend.get_messages("s1")] == ["question"]

    def test_later_known_ids_are_skipped_one_by_one(self, backend: Backend) -> None:
        """When the first id is new, a later known id is skipped and the rest is stored."""
        seed(backend, "s1")
        (old,) = backend.append_messages("s1", [say("old", platform_message_id="p1")])
        result = backend.append_messages(
            "s1",
            [
                say("new", platform_message_id="p2"),
                say("old again", platform_message_id="p1"),
                say("reply", role="assistant"),
            ],
        )
        assert not result.duplicate
        assert [m.content for m in result] == ["new", "old", "reply"]
        assert result.existing == (old,)
        assert [m.content for m in result.stored] == ["new", "reply"]
        assert [m.content for m in backend.get_messages("s1")] == ["old", "new", "reply"]

    def test_inactive_copies_count(self, backend: Backend) -> None:
        """A message that was undone or retracted still marks its redelivery."""
        seed(backend, "s1")
        first = backend.append_messages("s1", _turn())
        backend.set_active("s1", [m.id or 0 for m in first], active=False)
        again = backend.append_messages("s1", _turn("other"))
        assert again.duplicate
        assert not again[0].active
        assert len(backend.get_messages("s1", include_inactive=True)) == 2

    def test_a_redelivery_records_no_activity(self, backend: Backend) -> None:
        """``touch_at`` of a redelivered batch is not applied: nothing of it is written."""
        seed(backend, "s1")
        backend.put_entry(entry_for(KEY, "s1"), expected_revision=None)
        backend.append_messages("s1", _turn(), touch_at=minutes(1))
        backend.append_messages("s1", _turn(), touch_at=minutes(9))
        entry = backend.get_entry(KEY)
        assert entry is not None
        assert entry.updated_at == minutes(1)

    def test_concurrent_deliveries_of_one_turn_store_one_turn(self, backend: Backend) -> None:
        """Threads delivering the same turn at once: one stores it, every other is a duplicate."""
        seed(backend, "s1")
        results: list[AppendResult] = []
        start = threading.Barrier(6)

        def deliver(worker: int) -> None:
            start.wait()
            results.append(backend.append_messages("s1", _turn(f"reply {worker}")))

        threads = [threading.Thread(target=deliver, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(r.duplicate for r in results) == [False, True, True, True, True, True]
        stored = backend.get_messages("s1")
        assert len(stored) == 2
        assert stored[0].content == "question"
        winner = next(r for r in results if not r.duplicate)
        assert list(winner) == stored


class UsageContract(ContractBase):
    """append_messages(usage=...): the counters change in the same transaction as the messages."""

    def test_usage_is_added_with_the_messages(self, backend: Backend) -> None:
        """Every counter adds up over turns; ``model`` is set."""
        seed(backend, "s1")
        bill = Usage(input=100, output=20, cache_read=5, cache_write=3, reasoning=7, cost_usd=0.25)
        backend.append_messages("s1", _turn(), usage=attrs.evolve(bill, model="m-1"))
        backend.append_messages(
            "s1", [say("next question", platform_message_id="42:8")], usage=bill
        )
        record = backend.get_session("s1")
        assert record is not None
        assert (record.input_tokens, record.output_tokens) == (200, 40)
        assert (record.cache_read_tokens, record.cache_write_tokens) == (10, 6)
        assert record.reasoning_tokens == 14
        assert record.estimated_cost_usd == pytest.approx(0.5)
        assert record.model == "m-1"
        assert record.message_count == 3

    def test_a_redelivery_adds_no_usage(self, backend: Backend) -> None:
        """The second delivery's model call is not billed to the session twice."""
        seed(backend, "s1")
        backend.append_messages("s1", _turn(), usage=Usage(input=10))
        again = backend.append_messages("s1", _turn("other"), usage=Usage(input=10))
        assert again.duplicate
        record = backend.get_session("s1")
        assert record is not None
        assert record.input_tokens == 10

    def test_usage_of_a_failed_append_is_not_kept(self, backend: Backend) -> None:
        """An append that raises adds nothing (atomic with the messages)."""
        with pytest.raises(SessionNotFoundError):
            backend.append_messages("ghost", _turn(), usage=Usage(input=10))
        assert backend.get_session("ghost") is None
