"""Contract: the turn ledger (``SupportsLedger``) — rows kept atomically with their messages.

The first half states the backend's part (compare-and-swap rows, written with the messages they
speak of, gone with their session); the second runs the store's rules on the backend: a message
accepted once, a redelivery while it is answered reported in progress, claims taken over only
after their lease, an answer stored with its reply and its send intent, intents left unmarked
listed as unknown after send. Backends without the ability skip all of it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from hermes_sessions.clock import FrozenClock
from hermes_sessions.exceptions import (
    ClaimLostError,
    InvalidArgumentError,
    LedgerConflictError,
    SessionNotFoundError,
)
from hermes_sessions.keys import KeyPolicy
from hermes_sessions.ledger import Inbound, LedgerRow
from hermes_sessions.models import SessionSource
from hermes_sessions.protocols import SupportsLedger
from hermes_sessions.store import SessionStore
from hermes_sessions.testing._support import (
    T0,
    ContractBase,
    evolve,
    minutes,
    run_threads,
    run_workers,
    say,
    seed,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from hermes_sessions.protocols import Backend

KEY = "agent:main:telegram:dm:u1"
SOURCE = SessionSource(platform="telegram", chat_id="c1", user_id="u1")
LANE = KeyPolicy().build(SOURCE)


def _ledger(backend: Backend) -> SupportsLedger:
    if not isinstance(backend, SupportsLedger):
        pytest.skip("the backend does not implement SupportsLedger")
    return backend


def _row(row_id: str, session_id: str = "s1", **fields: object) -> LedgerRow:
    values: dict[str, object] = {
        "kind": "inbound",
        "id": row_id,
        "session_id": session_id,
        "session_key": KEY,
        "status": "accepted",
        "updated_at": T0,
        "data": {"note": "ü ✓ 你好", "nested": {"n": [1, 2.5, None, True]}},
    }
    values.update(fields)
    return LedgerRow(**values)  # type: ignore[arg-type]  # the test's own fields


def _store(backend: Backend) -> tuple[SessionStore, FrozenClock]:
    clock = FrozenClock(T0)
    return SessionStore(backend, clock=clock, ledger=True), clock


def _accept_worker(factory: Callable[[Path], Backend], directory: Path, worker: int) -> None:
    """Accept the one message as ``w<worker>``; answer it if this worker won."""
    with SessionStore(factory(directory), ledger=True) as store:
        accepted = store.ledger.accept(
            SOURCE, say("hello", platform_message_id="race"), holder=f"w{worker}"
        )
        if not accepted.duplicate:
            store.ledger.answer(
                store.key_for(SOURCE),
                "race",
                say(f"answer by w{worker}", role="assistant"),
                holder=f"w{worker}",
            )


class LedgerContract(ContractBase):
    """``SupportsLedger`` and the ledger's rules on every backend that has it."""

    # -- the backend's part ------------------------------------------------------------------------

    def test_rows_are_written_with_their_messages(self, backend: Backend) -> None:
        """One write stores the message and the row, binding the message's stored id."""
        ledger = _ledger(backend)
        seed(backend, "s1", KEY)
        row = evolve(_row("r1"), message_index=0)
        result = ledger.ledger_write(
            "s1", [row], messages=[say("hi", platform_message_id="p1")], touch_at=minutes(1)
        )
        (stored,) = ledger.ledger_rows("inbound")
        assert stored.version == 1
        assert stored.data == {**row.data, "message_id": result[0].id}
        assert stored.message_index is None
        assert (stored.id, stored.session_id, stored.session_key) == ("r1", "s1", KEY)
        assert stored.updated_at == T0
        assert [m.content for m in backend.get_messages("s1")] == ["hi"]
        entry = backend.get_entry(KEY)
        assert entry is not None
        assert entry.updated_at == minutes(1)

    def test_a_row_that_exists_is_not_created_again(self, backend: Backend) -> None:
        """Version 0 means "no row yet": a second creation conflicts and stores nothing."""
        ledger = _ledger(backend)
        seed(backend, "s1", KEY)
        ledger.ledger_write("s1", [_row("r1")])
        with pytest.raises(LedgerConflictError) as caught:
            ledger.ledger_write(
                "s1", [_row("r1", status="other")], messages=[say("x", platform_message_id="p")]
            )
        assert (caught.value.expected_version, caught.value.actual_version) == (0, 1)
        assert backend.get_messages("s1") == []
        assert [r.status for r in ledger.ledger_rows("inbound")] == ["accepted"]

    def test_versions_are_compared_and_swapped(self, backend: Backend) -> None:
        """A change based on the stored version lands (version + 1); a stale one conflicts."""
        ledger = _ledger(backend)
        seed(backend, "s1", KEY)
        ledger.ledger_write("s1", [_row("r1")])
        ledger.ledger_write("s1", [_row("r1", status="answered", version=1)])
        with pytest.raises(LedgerConflictError):
            ledger.ledger_write("s1", [_row("r1", status="failed", version=1)])
        (stored,) = ledger.ledger_rows("inbound", ids=["r1"])
        assert (stored.status, stored.version) == ("answered", 2)

    def test_one_stale_row_writes_nothing(self, backend: Backend) -> None:
        """Rows and messages of one write land together or not at all."""
        ledger = _ledger(backend)
        seed(backend, "s1", KEY)
        ledger.ledger_write("s1", [_row("r1")])
        with pytest.raises(LedgerConflictError):
            ledger.ledger_write(
                "s1",
                [_row("r2", kind="outbound", status="pending"), _row("r1", version=5)],
                messages=[say("reply", role="assistant")],
            )
        assert ledger.ledger_rows("outbound") == []
        assert backend.get_messages("s1") == []

    def test_a_redelivered_message_writes_no_row(self, backend: Backend) -> None:
        """A redelivery is recognised first: duplicate, and its rows are not written."""
        ledger = _ledger(backend)
        seed(backend, "s1", KEY)
        backend.append_messages("s1", [say("hi", platform_message_id="p1")])
        result = ledger.ledger_write(
            "s1", [_row("r1")], messages=[say("hi again", platform_message_id="p1")]
        )
        assert result.duplicate
        assert ledger.ledger_rows("inbound") == []

    def test_listing_filters_and_order(self, backend: Backend) -> None:
        """Rows list by kind, ids, status and lane, oldest change first."""
        ledger = _ledger(backend)
        seed(backend, "s1", KEY)
        seed(backend, "s2", "agent:main:telegram:dm:u2", user_id="u2")
        ledger.ledger_write(
            "s1", [_row("b", updated_at=minutes(2)), _row("a", updated_at=minutes(3))]
        )
        ledger.ledger_write(
            "s2", [_row("c", "s2", session_key="agent:main:telegram:dm:u2", status="answered")]
        )
        ledger.ledger_write("s1", [_row("d", kind="outbound", status="pending")])
        assert [r.id for r in ledger.ledger_rows("inbound")] == ["c", "b", "a"]
        assert [r.id for r in ledger.ledger_rows("inbound", status="accepted")] == ["b", "a"]
        assert [r.id for r in ledger.ledger_rows("inbound", session_key=KEY)] == ["b", "a"]
        assert [r.id for r in ledger.ledger_rows("inbound", ids=["a", "zz", "d"])] == ["a"]
        assert ledger.ledger_rows("inbound", ids=[]) == []
        assert [r.id for r in ledger.ledger_rows("outbound")] == ["d"]

    def test_rows_go_with_their_session(self, backend: Backend) -> None:
        """Deleting a session deletes its rows, and only its rows."""
        ledger = _ledger(backend)
        seed(backend, "s1")
        seed(backend, "s2")
        ledger.ledger_write("s1", [_row("a"), _row("b", kind="outbound", status="pending")])
        ledger.ledger_write("s2", [_row("c", "s2")])
        assert backend.delete_session("s1")
        assert [r.id for r in ledger.ledger_rows("inbound")] == ["c"]
        assert ledger.ledger_rows("outbound") == []

    def test_writes_are_checked(self, backend: Backend) -> None:
        """A row of another session, a row twice, an unknown session: refused."""
        ledger = _ledger(backend)
        seed(backend, "s1")
        with pytest.raises(InvalidArgumentError):
            ledger.ledger_write("s1", [_row("a", "s2")])
        with pytest.raises(InvalidArgumentError):
            ledger.ledger_write("s1", [_row("a"), _row("a")])
        with pytest.raises(InvalidArgumentError):
            ledger.ledger_write("s1", [evolve(_row("a"), message_index=1)], messages=[say("x")])
        with pytest.raises(SessionNotFoundError):
            ledger.ledger_write("nope", [_row("a", "nope")])
        assert ledger.ledger_rows("inbound") == []

    def test_rows_survive_reopening(self, backend: Backend, reopen: Callable[[], Backend]) -> None:
        """Persistent backends keep rows, versions and data across a reopen."""
        ledger = _ledger(backend)
        seed(backend, "s1", KEY)
        ledger.ledger_write("s1", [_row("r1")])
        ledger.ledger_write("s1", [_row("r1", status="answered", version=1)])
        fresh = _ledger(reopen())
        (stored,) = fresh.ledger_rows("inbound")
        assert (stored.status, stored.version, stored.data) == ("answered", 2, _row("r").data)

    def test_threads_creating_one_row_one_wins(self, backend: Backend) -> None:
        """Eight threads creating the same row: exactly one succeeds."""
        ledger = _ledger(backend)
        seed(backend, "s1", KEY)
        won: list[int] = []

        def work(worker: int) -> None:
            try:
                ledger.ledger_write(
                    "s1", [_row("r1", data={"w": worker})], messages=[say(f"m{worker}")]
                )
            except LedgerConflictError:
                return
            won.append(worker)

        run_threads(work, workers=8)
        assert len(won) == 1
        (stored,) = ledger.ledger_rows("inbound")
        assert stored.data == {"w": won[0]}
        assert [m.content for m in backend.get_messages("s1")] == [f"m{won[0]}"]

    # -- the store's rules -------------------------------------------------------------------------

    def test_accept_stores_the_message_and_recognises_redeliveries(self, backend: Backend) -> None:
        """Accepted once; the redelivery while it is answered is in progress, then answered."""
        _ledger(backend)
        store, _ = _store(backend)
        first = store.ledger.accept(SOURCE, say("hi", platform_message_id="m1"), holder="w1")
        assert not first.duplicate
        assert first.inbound is not None
        assert first.inbound.status == "accepted"
        assert first.message is not None
        assert first.inbound.message_id == first.message.id
        again = store.ledger.accept(SOURCE, say("hi", platform_message_id="m1"), holder="w2")
        assert again.duplicate
        assert again.in_progress
        store.ledger.answer(LANE, "m1", say("hello", role="assistant"), holder="w1")
        late = store.ledger.accept(SOURCE, say("hi", platform_message_id="m1"), holder="w2")
        assert late.duplicate
        assert not late.in_progress
        assert late.inbound is not None
        assert late.inbound.status == "answered"
        assert [m.content for m in store.messages(first.inbound.session_id)] == ["hi", "hello"]

    def test_answer_stores_reply_status_and_intent_together(self, backend: Backend) -> None:
        """The reply, ``answered`` and a pending intent with a stable key: one write."""
        _ledger(backend)
        store, _ = _store(backend)
        store.ledger.accept(SOURCE, say("hi", platform_message_id="m1"), holder="w1")
        answer = store.ledger.answer(LANE, "m1", say("hello", role="assistant"), holder="w1")
        assert answer.inbound.status == "answered"
        (intent,) = answer.intents
        assert intent.status == "pending"
        assert intent.message_id == answer.replies[0].id
        assert intent.inbound == "m1"
        assert store.ledger.intent(intent.idempotency_key) == intent
        assert store.ledger.pending() == []
        sent = store.ledger.mark_sent(intent.idempotency_key, "tg-99")
        assert (sent.status, sent.sent_id) == ("sent", "tg-99")
        assert store.ledger.mark_sent(intent.idempotency_key, "tg-99") == sent

    def test_only_the_holder_finishes_and_a_dead_holder_is_taken_over(
        self, backend: Backend
    ) -> None:
        """A claim is taken over only after its lease; the old holder then cannot answer."""
        _ledger(backend)
        store, clock = _store(backend)
        store.ledger.accept(
            SOURCE, say("hi", platform_message_id="m1"), holder="w1", ttl=timedelta(seconds=30)
        )
        assert store.ledger.claim(LANE, "m1", holder="w2") is None
        (pending,) = store.ledger.pending()
        assert (pending.holder, pending.held(clock.now())) == ("w1", True)
        clock.advance(seconds=31)
        taken = store.ledger.claim(LANE, "m1", holder="w2")
        assert taken is not None
        assert taken.holder == "w2"
        with pytest.raises(ClaimLostError) as caught:
            store.ledger.answer(LANE, "m1", say("late", role="assistant"), holder="w1")
        assert caught.value.current_holder == "w2"
        store.ledger.answer(LANE, "m1", say("by w2", role="assistant"), holder="w2")
        with pytest.raises(ClaimLostError):
            store.ledger.answer(LANE, "m1", say("twice", role="assistant"), holder="w2")
        session_id = taken.session_id
        assert [m.content for m in store.messages(session_id)] == ["hi", "by w2"]

    def test_failed_turns_leave_pending(self, backend: Backend) -> None:
        """``fail`` records the reason; the message is no longer pending."""
        _ledger(backend)
        store, _ = _store(backend)
        store.ledger.accept(SOURCE, say("hi", platform_message_id="m1"), holder="w1")
        failed = store.ledger.fail(LANE, "m1", holder="w1", reason="model refused")
        assert (failed.status, failed.reason) == ("failed", "model refused")
        assert store.ledger.pending() == []
        got = store.ledger.get(LANE, "m1")
        assert got == failed

    def test_unmarked_intents_are_unknown_after_send(self, backend: Backend) -> None:
        """An intent its holder never marked is listed once the lease ran out; a retry keeps it."""
        _ledger(backend)
        store, clock = _store(backend)
        store.ledger.accept(SOURCE, say("hi", platform_message_id="m1"), holder="w1")
        (intent,) = store.ledger.answer(
            LANE, "m1", say("hello", role="assistant"), holder="w1", ttl=timedelta(seconds=10)
        ).intents
        assert store.ledger.unknown() == []
        clock.advance(seconds=11)
        (unknown,) = store.ledger.unknown()
        assert unknown.idempotency_key == intent.idempotency_key
        retried = store.ledger.retry(intent.idempotency_key, holder="w2")
        assert retried is not None
        assert (retried.idempotency_key, retried.attempts) == (intent.idempotency_key, 2)
        assert store.ledger.retry(intent.idempotency_key, holder="w3") is None
        assert store.ledger.unknown() == []
        failed = store.ledger.mark_failed(intent.idempotency_key, "chat deleted")
        assert (failed.status, failed.reason) == ("failed", "chat deleted")

    def test_pending_lists_age_and_holder_after_reopening(
        self, backend: Backend, reopen: Callable[[], Backend]
    ) -> None:
        """After a restart the accepted, unanswered message is pending with its holder."""
        _ledger(backend)
        store, _ = _store(backend)
        store.ledger.accept(SOURCE, say("hi", platform_message_id="m1"), holder="w1")
        fresh, clock = _store(reopen())
        clock.advance(minutes=5)
        (pending,) = fresh.ledger.pending()
        assert isinstance(pending, Inbound)
        assert (pending.holder, pending.age(clock.now())) == ("w1", timedelta(minutes=5))
        assert fresh.ledger.claim(LANE, "m1", holder="w9") is not None

    def test_processes_accepting_one_message_answer_once(
        self, multiprocess: Backend, data_dir: Path
    ) -> None:
        """Four processes given the same delivery: one accepts and answers it, once."""
        _ledger(multiprocess)
        SessionStore(multiprocess).get_or_create(SOURCE)
        codes = run_workers(_accept_worker, self.make_backend, data_dir, workers=4)
        assert codes == [0] * 4
        store, _ = _store(multiprocess)
        inbound = store.ledger.get(LANE, "race")
        assert inbound is not None
        assert inbound.status == "answered"
        contents = [str(m.content) for m in store.messages(inbound.session_id)]
        assert contents.count("hello") == 1
        assert sum(c.startswith("answer by") for c in contents) == 1
