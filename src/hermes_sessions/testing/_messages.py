"""Contract: appending, reading and rewriting messages."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from hermes_sessions.exceptions import SessionNotFoundError
from hermes_sessions.models import Message
from hermes_sessions.testing._support import (
    T0,
    ContractBase,
    entry_for,
    evolve,
    minutes,
    say,
    seed,
)

if TYPE_CHECKING:
    from hermes_sessions.protocols import Backend

KEY = "agent:main:telegram:dm:1"
CALL = {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{}"}}


def count(backend: Backend, session_id: str) -> tuple[int, int]:
    """The session's (message_count, tool_call_count)."""
    stored = backend.get_session(session_id)
    assert stored is not None
    return stored.message_count, stored.tool_call_count


class AppendContract(ContractBase):
    """append_messages: ids, idempotency, atomicity, counters and activity."""

    def test_append_assigns_ids_in_order(self, backend: Backend) -> None:
        """Appended messages get increasing ids and their session id."""
        seed(backend, "s1")
        first = backend.append_messages("s1", [say("a"), say("b", role="assistant")])
        second = backend.append_messages("s1", [say("c")])
        both = [*first, *second]
        assert all(isinstance(m.id, int) for m in both)
        ids = [m.id or 0 for m in both]
        assert ids == sorted(ids)
        assert len(set(ids)) == 3
        assert {m.session_id for m in both} == {"s1"}
        assert backend.get_messages("s1") == both

    def test_every_field_round_trips(self, backend: Backend) -> None:
        """All message fields, multimodal content and unknown extras are kept losslessly."""
        seed(backend, "s1")
        message = Message(
            role="assistant",
            content=[
                {"type": "text", "text": "看图"},
                {"type": "image_url", "image_url": {"u": 1}},
            ],
            tool_calls=[CALL],
            tool_call_id="tc",
            tool_name="shell",
            timestamp=minutes(1),
            token_count=42,
            finish_reason="tool_calls",
            reasoning="thinking…",
            platform_message_id="pm-1",
            sender_id="ou_1",
            sender_name="林晓",
            extra={"reasoning_details": [{"type": "summary", "text": "x"}], "n": None},
        )
        (stored,) = backend.append_messages("s1", [message])
        assert stored == evolve(message, id=stored.id, session_id="s1")
        assert backend.get_message("s1", stored.id or 0) == stored

    def test_repeated_platform_id_is_stored_once(self, backend: Backend) -> None:
        """Appending the same platform message twice stores it once and returns the first."""
        seed(backend, "s1")
        (first,) = backend.append_messages("s1", [say("hi", platform_message_id="m1")])
        (again,) = backend.append_messages(
            "s1", [say("hi (redelivered)", platform_message_id="m1")]
        )
        assert again == first
        assert len(backend.get_messages("s1")) == 1
        assert count(backend, "s1") == (1, 0)

    def test_idempotency_covers_soft_deleted_messages(self, backend: Backend) -> None:
        """A redelivered message that was since retracted is not stored again."""
        seed(backend, "s1")
        (first,) = backend.append_messages("s1", [say("hi", platform_message_id="m1")])
        backend.set_active("s1", [first.id or 0], active=False)
        (again,) = backend.append_messages("s1", [say("hi", platform_message_id="m1")])
        assert again.id == first.id
        assert not again.active
        assert backend.get_messages("s1", include_inactive=True) == [again]

    def test_idempotency_is_per_session(self, backend: Backend) -> None:
        """The same platform id in another session is a different message."""
        seed(backend, "s1")
        seed(backend, "s2")
        backend.append_messages("s1", [say("a", platform_message_id="7")])
        backend.append_messages("s2", [say("b", platform_message_id="7")])
        assert [m.content for m in backend.get_messages("s2")] == ["b"]

    def test_duplicates_within_one_batch(self, backend: Backend) -> None:
        """A batch repeating a platform id stores it once."""
        seed(backend, "s1")
        stored = backend.append_messages(
            "s1", [say("a", platform_message_id="x"), say("b", platform_message_id="x")]
        )
        assert stored[0] == stored[1]
        assert len(backend.get_messages("s1")) == 1

    def test_messages_without_platform_id_always_append(self, backend: Backend) -> None:
        """Identical messages without a platform id are distinct messages."""
        seed(backend, "s1")
        backend.append_messages("s1", [say("same")])
        backend.append_messages("s1", [say("same")])
        assert len(backend.get_messages("s1")) == 2

    def test_append_to_missing_session_writes_nothing(self, backend: Backend) -> None:
        """Appending to an unknown session raises and creates nothing."""
        with pytest.raises(SessionNotFoundError):
            backend.append_messages("ghost", [say("boo")])
        assert backend.get_session("ghost") is None

    def test_batches_are_never_seen_half_written(self, backend: Backend) -> None:
        """Readers running beside a writer of two-message batches always see whole batches."""
        seed(backend, "s1")
        done = threading.Event()
        odd: list[int] = []

        def read() -> None:
            while not done.is_set():
                seen = len(backend.get_messages("s1"))
                if seen % 2:
                    odd.append(seen)

        reader = threading.Thread(target=read)
        reader.start()
        try:
            for n in range(40):
                backend.append_messages("s1", [say(f"q{n}"), say(f"a{n}", role="assistant")])
        finally:
            done.set()
            reader.join()
        assert odd == []
        assert len(backend.get_messages("s1")) == 80

    def test_concurrent_appends_lose_nothing(self, backend: Backend) -> None:
        """Threads appending to one session: every message stored once, ids unique."""
        seed(backend, "s1")

        def write(worker: int) -> None:
            for n in range(20):
                backend.append_messages(
                    "s1", [say(f"{worker}-{n}", platform_message_id=f"{worker}-{n}")]
                )

        threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        messages = backend.get_messages("s1")
        assert sorted(str(m.content) for m in messages) == sorted(
            f"{w}-{n}" for w in range(4) for n in range(20)
        )
        assert len({m.id for m in messages}) == 80
        assert count(backend, "s1") == (80, 0)

    def test_counters_count_active_messages_and_tool_calls(self, backend: Backend) -> None:
        """message_count counts active messages; tool_call_count counts their tool calls."""
        seed(backend, "s1")
        backend.append_messages(
            "s1",
            [
                say("run it"),
                say(None, role="assistant", tool_calls=[CALL, {**CALL, "id": "c2"}]),
                say("ok", role="tool", tool_call_id="c1"),
                say("hidden", active=False),
            ],
        )
        assert count(backend, "s1") == (3, 2)

    def test_touch_records_activity_on_every_key_of_the_session(self, backend: Backend) -> None:
        """touch_at moves updated_at of all keys pointing at the session, revisions untouched."""
        seed(backend, "s1", KEY)
        backend.put_entry(entry_for("agent:main:x:dm:2", "s1"), expected_revision=None)
        seed(backend, "s2", "agent:main:x:dm:3")
        backend.append_messages("s1", [say("hi")], touch_at=minutes(7))
        for entry in backend.entries(session_id="s1"):
            assert (entry.updated_at, entry.revision) == (minutes(7), 1)
        other = backend.get_entry("agent:main:x:dm:3")
        assert other is not None
        assert other.updated_at == T0

    def test_append_without_touch_keeps_activity(self, backend: Backend) -> None:
        """Internal appends (touch_at=None) do not refresh the key."""
        seed(backend, "s1", KEY)
        backend.append_messages("s1", [say("system note", role="system", timestamp=minutes(9))])
        entry = backend.get_entry(KEY)
        assert entry is not None
        assert entry.updated_at == T0


class ReadContract(ContractBase):
    """get_messages windows, get_message and find_message."""

    @pytest.fixture
    def ten(self, backend: Backend) -> list[Message]:
        """A session ``s1`` with ten messages, the fourth and fifth soft-deleted."""
        seed(backend, "s1")
        stored = backend.append_messages(
            "s1", [say(f"m{n}", platform_message_id=f"p{n}") for n in range(10)]
        )
        backend.set_active("s1", [stored[3].id or 0, stored[4].id or 0], active=False)
        return backend.get_messages("s1", include_inactive=True)

    def test_active_messages_by_default(self, backend: Backend, ten: list[Message]) -> None:
        """Soft-deleted messages are left out unless asked for."""
        assert [m.content for m in backend.get_messages("s1")] == [
            f"m{n}" for n in (0, 1, 2, 5, 6, 7, 8, 9)
        ]
        assert len(ten) == 10

    def test_bounds_are_exclusive(self, backend: Backend, ten: list[Message]) -> None:
        """after_id and before_id exclude the named messages."""
        window = backend.get_messages("s1", after_id=ten[1].id, before_id=ten[7].id)
        assert [m.content for m in window] == ["m2", "m5", "m6"]

    def test_limit_from_start_and_end(self, backend: Backend, ten: list[Message]) -> None:
        """Limit keeps the first messages, or the last ones with from_end, in order."""
        assert [m.content for m in backend.get_messages("s1", limit=2)] == ["m0", "m1"]
        tail = backend.get_messages("s1", limit=3, from_end=True)
        assert [m.content for m in tail] == ["m7", "m8", "m9"]
        older = backend.get_messages("s1", before_id=ten[6].id, limit=2, from_end=True)
        assert [m.content for m in older] == ["m2", "m5"]
        assert backend.get_messages("s1", limit=0) == []

    def test_include_inactive(self, backend: Backend, ten: list[Message]) -> None:
        """include_inactive returns soft-deleted messages marked inactive."""
        everything = backend.get_messages("s1", include_inactive=True)
        assert [m.active for m in everything].count(False) == 2
        assert everything == ten

    def test_reading_a_missing_session_raises(self, backend: Backend) -> None:
        """get_messages on an unknown session raises SessionNotFoundError."""
        with pytest.raises(SessionNotFoundError):
            backend.get_messages("ghost")

    def test_get_message(self, backend: Backend, ten: list[Message]) -> None:
        """get_message finds active and inactive messages, None otherwise."""
        assert backend.get_message("s1", ten[3].id or 0) == ten[3]
        assert backend.get_message("s1", 10_000) is None
        assert backend.get_message("ghost", 1) is None

    def test_find_message_by_platform_id(self, backend: Backend, ten: list[Message]) -> None:
        """find_message looks up a platform id within the session, inactive included."""
        assert backend.find_message("s1", "p4") == ten[4]
        assert backend.find_message("s1", "nope") is None
        assert backend.find_message("ghost", "p4") is None


class RewriteContract(ContractBase):
    """Edits, transcript replacement, soft delete/restore and hard delete."""

    def test_replace_message_keeps_the_id(self, backend: Backend) -> None:
        """An edit changes the content in place and recounts tool calls."""
        seed(backend, "s1")
        (old,) = backend.append_messages("s1", [say("draft", role="assistant")])
        new = backend.replace_message(
            "s1", old.id or 0, say("final", role="assistant", tool_calls=[CALL])
        )
        assert (new.id, new.content, new.session_id) == (old.id, "final", "s1")
        assert backend.get_messages("s1") == [new]
        assert count(backend, "s1") == (1, 1)

    def test_replace_message_moves_the_platform_id(self, backend: Backend) -> None:
        """After an edit, the message is found by its (possibly new) platform id."""
        seed(backend, "s1")
        (old,) = backend.append_messages("s1", [say("v1", platform_message_id="m1")])
        backend.replace_message("s1", old.id or 0, say("v2", platform_message_id="m1"))
        found = backend.find_message("s1", "m1")
        assert found is not None
        assert found.content == "v2"

    def test_replace_message_cannot_take_another_messages_platform_id(
        self, backend: Backend
    ) -> None:
        """An edit that would give a message another message's platform id is a ValueError."""
        seed(backend, "s1")
        first, _second = backend.append_messages(
            "s1", [say("a", platform_message_id="m1"), say("b", platform_message_id="m2")]
        )
        with pytest.raises(ValueError, match="m2"):
            backend.replace_message("s1", first.id or 0, say("a2", platform_message_id="m2"))
        found = backend.find_message("s1", "m2")
        assert found is not None
        assert found.content == "b"
        assert backend.get_message("s1", first.id or 0) == first

    def test_replace_unknown_message_raises(self, backend: Backend) -> None:
        """Editing a message that does not exist raises SessionNotFoundError."""
        seed(backend, "s1")
        with pytest.raises(SessionNotFoundError):
            backend.replace_message("s1", 99, say("x"))

    def test_replace_messages_swaps_the_transcript(self, backend: Backend) -> None:
        """replace_messages swaps the whole transcript; counters and platform ids follow."""
        seed(backend, "s1", None, say("old", platform_message_id="o1"), say("old2"))
        stored = backend.replace_messages(
            "s1", [say("summary", role="system"), say("new", tool_calls=[CALL])]
        )
        assert [m.content for m in backend.get_messages("s1")] == ["summary", "new"]
        assert backend.get_messages("s1", include_inactive=True) == stored
        assert count(backend, "s1") == (2, 1)
        assert backend.find_message("s1", "o1") is None
        (again,) = backend.append_messages("s1", [say("old", platform_message_id="o1")])
        assert again.id not in {m.id for m in stored}

    def test_soft_delete_and_restore(self, backend: Backend) -> None:
        """set_active hides and restores messages, reports changes, and keeps counts exact."""
        seed(backend, "s1")
        stored = backend.append_messages(
            "s1", [say("q"), say(None, role="assistant", tool_calls=[CALL]), say("r")]
        )
        ids = [m.id or 0 for m in stored[1:]]
        assert backend.set_active("s1", ids, active=False) == 2
        assert backend.set_active("s1", ids, active=False) == 0
        assert count(backend, "s1") == (1, 0)
        assert backend.set_active("s1", ids, active=True) == 2
        assert count(backend, "s1") == (3, 1)
        assert backend.get_messages("s1") == list(stored)

    def test_hard_delete(self, backend: Backend) -> None:
        """delete_messages removes messages for good; their platform ids become free."""
        seed(backend, "s1")
        stored = backend.append_messages(
            "s1", [say("keep"), say("drop", platform_message_id="d1"), say("drop2")]
        )
        assert backend.delete_messages("s1", [m.id or 0 for m in stored[1:]] + [999]) == 2
        assert backend.get_messages("s1", include_inactive=True) == list(stored[:1])
        assert count(backend, "s1") == (1, 0)
        (again,) = backend.append_messages("s1", [say("drop", platform_message_id="d1")])
        assert again.id not in {m.id for m in stored}

    def test_ids_keep_increasing_after_deletes(self, backend: Backend) -> None:
        """Ids are never reused within a session, even after the newest ones are deleted."""
        seed(backend, "s1")
        stored = backend.append_messages("s1", [say("a"), say("b")])
        backend.delete_messages("s1", [stored[1].id or 0])
        (later,) = backend.append_messages("s1", [say("c")])
        assert (later.id or 0) > (stored[1].id or 0)

    def test_timestamps_are_kept_as_instants(self, backend: Backend) -> None:
        """Message timestamps come back as the same instants."""
        seed(backend, "s1")
        (stored,) = backend.append_messages("s1", [say("t", timestamp=T0)])
        assert stored.timestamp == T0
        fetched = backend.get_messages("s1")[0]
        assert fetched.timestamp == T0
