"""Contract: a redelivered batch (a webhook sent twice) is stored once; usage rides along.

A session a reset ended keeps its messages reachable by platform id — found, edited with
search following, recalled — which the store's redelivery window relies on.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import attrs
import pytest

from hermes_sessions.exceptions import SessionNotFoundError
from hermes_sessions.protocols import EntryWrite, RotationPlan
from hermes_sessions.queries import SearchQuery
from hermes_sessions.testing._support import (
    ContractBase,
    SearchableBackend,
    entry_for,
    evolve,
    minutes,
    record,
    say,
    seed,
)
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


def _reset_away(backend: Backend) -> Message:
    """Seed ``s1`` under ``KEY`` with two messages, then reset the key to ``s2``: ``s1`` ends."""
    seed(
        backend,
        "s1",
        KEY,
        say("ship the canary", platform_message_id="42:7"),
        say("update the runbook", platform_message_id="42:8"),
    )
    entry = backend.get_entry(KEY)
    assert entry is not None
    moved = entry_for(KEY, "s2", at=minutes(120), previous_session_id="s1")
    backend.apply(
        RotationPlan(
            at=minutes(120),
            create=record("s2", started_at=minutes(120)),
            entries=[EntryWrite(entry=moved, expected_revision=entry.revision)],
            end=[("s1", "idle")],
        )
    )
    found = backend.find_message("s1", "42:7")
    assert found is not None
    return found


class AfterResetContract(ContractBase):
    """A session a reset ended keeps its messages reachable: redeliveries, edits and recalls."""

    def test_an_ended_sessions_messages_are_found_edited_and_recalled(
        self, backend: Backend
    ) -> None:
        """By platform id in the ended session: found, replaced in place, soft-deleted."""
        old = _reset_away(backend)
        ended, entry = backend.get_session("s1"), backend.get_entry(KEY)
        assert ended is not None
        assert ended.end_reason == "idle"
        assert entry is not None
        assert (entry.session_id, entry.previous_session_id) == ("s2", "s1")
        assert backend.find_message("s2", "42:7") is None
        edited = backend.replace_message("s1", old.id or 0, evolve(old, content="ship the rollout"))
        assert (edited.id, edited.session_id, edited.content) == (old.id, "s1", "ship the rollout")
        recalled = backend.find_message("s1", "42:8")
        assert recalled is not None
        assert backend.set_active("s1", [recalled.id or 0], active=False) == 1
        assert [m.content for m in backend.get_messages("s1")] == ["ship the rollout"]

    def test_search_follows_edits_and_recalls_in_an_ended_session(
        self, searchable: SearchableBackend
    ) -> None:
        """The edited text is found and the old one is not; a recalled message is not found."""
        old = _reset_away(searchable)
        searchable.replace_message("s1", old.id or 0, evolve(old, content="ship the rollout"))
        recalled = searchable.find_message("s1", "42:8")
        assert recalled is not None
        searchable.set_active("s1", [recalled.id or 0], active=False)

        def found(text: str) -> list[int | None]:
            return [hit.message.id for hit in searchable.search(SearchQuery(text=text))]

        assert (found("rollout"), found("canary"), found("runbook")) == ([old.id], [], [])


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
