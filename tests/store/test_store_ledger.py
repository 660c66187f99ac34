"""The turn ledger through the store (issue 40): opt-in, never persisted for incognito lanes.

Also: gone with retention and erasure; the values and errors it adds.
"""

from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from store_scenarios import DM, reply, user

from hermes_sessions import (
    IncognitoPolicy,
    KeyPolicy,
    SessionSource,
    SessionStore,
)
from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.exceptions import (
    ClaimLostError,
    InvalidArgumentError,
    LedgerConflictError,
    LedgerUnavailableError,
)
from hermes_sessions.ledger import Inbound, LedgerRow, inbound_id, intent_key
from hermes_sessions.protocols import Backend, SupportsLedger
from hermes_sessions.store import Ledger

if TYPE_CHECKING:
    from collections.abc import Callable

    from hermes_sessions.testing import FrozenClock


def test_the_ledger_is_off_unless_turned_on(make_backend: Callable[[], Backend]) -> None:
    """Without ``ledger=True`` the store says how to turn it on."""
    with SessionStore(make_backend()) as store, pytest.raises(LedgerUnavailableError) as caught:
        _ = store.ledger
    assert "ledger=True" in str(caught.value)


def test_a_backend_without_the_ability_is_refused() -> None:
    """A backend that does not implement ``SupportsLedger`` is named."""

    class Plain(InMemoryBackend):
        ledger_rows = None  # type: ignore[assignment]  # hides the ability

    backend = Plain()
    assert not isinstance(backend, SupportsLedger)
    with pytest.raises(LedgerUnavailableError, match="Plain"):
        _ = SessionStore(backend, ledger=True).ledger


def test_every_bundled_backend_has_the_ability(make_backend: Callable[[], Backend]) -> None:
    """``isinstance(backend, SupportsLedger)`` for every bundled backend."""
    backend = make_backend()
    try:
        assert isinstance(backend, SupportsLedger)
        assert isinstance(SessionStore(backend, ledger=True).ledger, Ledger)
    finally:
        backend.close()


def test_accept_needs_a_platform_message_id(store: SessionStore) -> None:
    """Without a platform id nothing could recognise a redelivery: refused, with the way out."""
    ledgered = SessionStore(store.backend, ledger=True)
    with pytest.raises(InvalidArgumentError, match=r"store\.append"):
        ledgered.ledger.accept(DM, user("no id"), holder="w1")


def test_a_message_stored_without_the_ledger_is_a_duplicate(store: SessionStore) -> None:
    """A delivery already stored by ``append`` is recognised; it has no row of its own."""
    session_id = store.get_or_create(DM).session_id
    store.append(session_id, user("hi", platform_message_id="m1"), reply("hello"))
    ledgered = SessionStore(store.backend, ledger=True)
    again = ledgered.ledger.accept(DM, user("hi", platform_message_id="m1"), holder="w1")
    assert again.duplicate
    assert again.inbound is None
    assert again.message is not None
    assert again.session_id == session_id
    assert not again.in_progress


def test_a_redelivery_after_a_reset_is_still_recognised(
    make_backend: Callable[[], Backend], clock: FrozenClock
) -> None:
    """The row is per lane, so a reset between deliveries does not store the message twice."""
    with SessionStore(make_backend(), clock=clock, ledger=True) as store:
        first = store.ledger.accept(DM, user("hi", platform_message_id="m1"), holder="w1")
        key = store.key_for(DM)
        store.reset(key)
        again = store.ledger.accept(DM, user("hi", platform_message_id="m1"), holder="w2")
        assert again.in_progress
        assert first.inbound is not None
        assert again.session_id == first.inbound.session_id
        assert store.messages(store.entry(key).session_id) == []


def test_claims_renew_for_their_holder(
    make_backend: Callable[[], Backend], clock: FrozenClock
) -> None:
    """The holder renews its own claim before the lease runs out; others still cannot take it."""
    with SessionStore(make_backend(), clock=clock, ledger=True) as store:
        key = store.key_for(DM)
        ttl = timedelta(seconds=30)
        store.ledger.accept(DM, user("hi", platform_message_id="m1"), holder="w1", ttl=ttl)
        clock.advance(seconds=20)
        renewed = store.ledger.claim(key, "m1", holder="w1", ttl=ttl)
        assert renewed is not None
        clock.advance(seconds=20)
        assert store.ledger.claim(key, "m1", holder="w2") is None
        assert store.ledger.claim(key, "never", holder="w2") is None


def test_answers_carry_usage_and_several_replies(
    make_backend: Callable[[], Backend], clock: FrozenClock
) -> None:
    """Two replies get two intents with distinct stable keys; usage lands on the session."""
    from hermes_sessions import Usage  # noqa: PLC0415  # only here

    with SessionStore(make_backend(), clock=clock, ledger=True) as store:
        key = store.key_for(DM)
        store.ledger.accept(DM, user("hi", platform_message_id="m1"), holder="w1")
        answer = store.ledger.answer(
            key, "m1", reply("one"), reply("two"), holder="w1", usage=Usage(input=7, output=3)
        )
        keys = [i.idempotency_key for i in answer.intents]
        assert keys == [intent_key(key, "m1", 0), intent_key(key, "m1", 1)]
        assert [i.message_id for i in answer.intents] == [m.id for m in answer.replies]
        record = store.session(answer.inbound.session_id)
        assert (record.input_tokens, record.output_tokens) == (7, 3)
        quiet = store.ledger.accept(DM, user("hey", platform_message_id="m2"), holder="w1")
        assert quiet.inbound is not None
        kept = store.ledger.answer(key, "m2", reply("noted"), holder="w1", send=False)
        assert kept.intents == ()


def test_unknown_intents_are_reconciled_by_marking(
    make_backend: Callable[[], Backend], clock: FrozenClock
) -> None:
    """An intent found unknown after a restart is marked sent and leaves the listing."""
    with SessionStore(make_backend(), clock=clock, ledger=True) as store:
        key = store.key_for(DM)
        store.ledger.accept(DM, user("hi", platform_message_id="m1"), holder="w1")
        (intent,) = store.ledger.answer(key, "m1", reply("hello"), holder="w1").intents
        clock.advance(minutes=10)
        assert [i.idempotency_key for i in store.ledger.unknown(key=key)] == [
            intent.idempotency_key
        ]
        store.ledger.mark_sent(intent.idempotency_key, "p-1")
        assert store.ledger.unknown() == []
        assert store.ledger.retry(intent.idempotency_key, holder="w2") is None
        assert [i.status for i in store.ledger.intents(status="sent")] == ["sent"]
        with pytest.raises(InvalidArgumentError, match=r"ledger\.answer"):
            store.ledger.mark_sent("hs-unknown")


def test_failing_a_message_held_by_another_is_refused(
    make_backend: Callable[[], Backend], clock: FrozenClock
) -> None:
    """``fail`` by a worker that does not hold the message writes nothing."""
    with SessionStore(make_backend(), clock=clock, ledger=True) as store:
        key = store.key_for(DM)
        store.ledger.accept(DM, user("hi", platform_message_id="m1"), holder="w1")
        with pytest.raises(ClaimLostError, match="held by 'w1'"):
            store.ledger.fail(key, "m1", holder="w2", reason="x")
        with pytest.raises(ClaimLostError, match="never accepted"):
            store.ledger.answer(key, "other", reply("x"), holder="w1")
        pending = store.ledger.get(key, "m1")
        assert pending is not None
        assert pending.status == "accepted"


def test_retention_and_erasure_take_the_rows(
    make_backend: Callable[[], Backend], clock: FrozenClock
) -> None:
    """Deleting a session (retention, erase_user) deletes its ledger rows with it."""
    with SessionStore(make_backend(), clock=clock, ledger=True) as store:
        key = store.key_for(DM)
        store.ledger.accept(DM, user("hi", platform_message_id="m1"), holder="w1")
        old = store.entry(key).session_id
        store.ledger.answer(key, "m1", reply("hello"), holder="w1")
        store.reset(key)
        store.delete(old)
        assert store.ledger.get(key, "m1") is None
        assert store.ledger.intents() == []
        store.ledger.accept(DM, user("again", platform_message_id="m2"), holder="w1")
        store.erase_user(DM.platform, DM.user_id or "")
        assert store.ledger.pending() == []


def test_incognito_lanes_keep_their_rows_in_memory(
    make_backend: Callable[[], Backend], clock: FrozenClock
) -> None:
    """An incognito lane's message and rows never reach the persistent backend."""
    secret = SessionSource(platform="feishu", chat_id="ou_x", user_id="ou_x")
    policy = IncognitoPolicy(keys=[KeyPolicy().build(secret)])
    with SessionStore(make_backend(), clock=clock, incognito=policy, ledger=True) as store:
        key = store.key_for(secret)
        store.ledger.accept(secret, user("psst", platform_message_id="s1"), holder="w1")
        store.ledger.answer(key, "s1", reply("ok"), holder="w1")
        store.ledger.accept(DM, user("hi", platform_message_id="m1"), holder="w1")
        persistent = store.backend.persistent  # type: ignore[attr-defined]  # the router's
        assert isinstance(persistent, SupportsLedger)
        assert [r.session_key for r in persistent.ledger_rows("inbound")] == [store.key_for(DM)]
        assert persistent.ledger_rows("outbound") == []
        assert {r.session_key for r in store.backend.ledger_rows("inbound")} == {  # type: ignore[attr-defined]
            key,
            store.key_for(DM),
        }
        assert store.ledger.get(key, "s1") is not None


def test_row_values_round_trip() -> None:
    """``Inbound`` survives its row; a damaged row is a ``CorruptRecordError``."""
    from hermes_sessions.exceptions import CorruptRecordError  # noqa: PLC0415  # only here

    when = datetime(2026, 5, 12, 1, 0, tzinfo=UTC)
    inbound = Inbound(
        session_key="k",
        platform_message_id="p|1",
        session_id="s",
        status="failed",
        accepted_at=when,
        updated_at=when,
        reason="boom",
        version=3,
    )
    assert Inbound.from_row(inbound.to_row()) == inbound
    assert inbound.to_row().id == inbound_id("k", "p|1") != inbound_id("k|p", "1")
    damaged = LedgerRow(
        kind="inbound", id="x", session_id="s", session_key="k", status="lost", updated_at=when
    )
    with pytest.raises(CorruptRecordError):
        Inbound.from_row(damaged)
    with pytest.raises(InvalidArgumentError):
        LedgerRow(kind="other", id="x", session_id="s", session_key="k", status="", updated_at=when)  # type: ignore[arg-type]


def test_ledger_errors_pickle() -> None:
    """The new errors cross process boundaries with their attributes."""
    conflict = LedgerConflictError("inbound", "r", expected_version=0, actual_version=1)
    lost = ClaimLostError("k", "p", holder="w1", current_holder="w2", status="accepted")
    for error in (conflict, lost, LedgerUnavailableError("off")):
        copy = pickle.loads(pickle.dumps(error))  # noqa: S301  # our own bytes
        assert str(copy) == str(error)
        assert copy.__dict__ == error.__dict__


def test_a_lease_of_zero_has_run_out_at_once(
    make_backend: Callable[[], Backend], clock: FrozenClock
) -> None:
    """``ttl=timedelta(0)`` is a lease already over, not the default two minutes."""
    with SessionStore(make_backend(), clock=clock, ledger=True) as store:
        key = store.key_for(DM)
        zero = timedelta(0)
        store.ledger.accept(DM, user("hi", platform_message_id="m1"), holder="w1", ttl=zero)
        taken = store.ledger.claim(key, "m1", holder="w2")
        assert taken is not None
        assert taken.holder == "w2"
