"""The turn ledger in the async store (issue 40): ``turn(source, message=, holder=)``."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

from hermes_sessions import (
    InvalidArgumentError,
    LedgerUnavailableError,
    Message,
    SessionSource,
    SessionStore,
)
from hermes_sessions.aio import AsyncSessionStore
from hermes_sessions.backends.sqlite import SQLiteBackend

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from pathlib import Path

    from hermes_sessions.protocols import Backend
    from hermes_sessions.testing import FrozenClock

LIN = SessionSource(platform="telegram", chat_id="7", user_id="7")
HANG = 60  # a guard against a hang, not a performance limit


def run(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine on a fresh event loop, failing instead of hanging forever."""

    async def guarded() -> Any:
        return await asyncio.wait_for(coroutine, HANG)

    return asyncio.run(guarded())


def ask(text: str, platform_id: str) -> Message:
    """An inbound message with its platform id."""
    return Message(role="user", content=text, platform_message_id=platform_id)


def test_a_turn_accepts_answers_and_drops_the_redelivery(
    make_backend: Callable[[], Backend], clock: FrozenClock
) -> None:
    """The turn stores the message, its answer holds the reply and the intent; again: dropped."""

    async def scenario() -> None:
        store = AsyncSessionStore(SessionStore(make_backend(), clock=clock, ledger=True))
        async with store:
            async with store.turn(LIN, message=ask("hi", "m1"), holder="w1") as turn:
                assert not turn.duplicate
                assert turn.acceptance is not None
                context = await store.context(turn.session_id)
                assert [m.content for m in context.messages] == ["hi"]
                answer = await turn.answer(Message(role="assistant", content="hello"))
            (intent,) = answer.intents
            await store.ledger.mark_sent(intent.idempotency_key, "p-1")
            async with store.turn(LIN, message=ask("hi", "m1"), holder="w2") as again:
                assert again.duplicate
                assert not again.in_progress
                assert again.redelivered is not None
                with pytest.raises(LedgerUnavailableError, match="redelivery"):
                    await again.answer(Message(role="assistant", content="twice"))
            assert [m.content for m in await store.transcript(turn.session_id)] == ["hi", "hello"]
            assert await store.ledger.pending() == []
            assert await store.ledger.unknown() == []
            sent = await store.ledger.intent(intent.idempotency_key)
            assert sent is not None
            assert sent.status == "sent"

    run(scenario())


def test_a_redelivery_to_another_worker_is_in_progress(tmp_path: Path) -> None:
    """While one worker's turn runs, another worker given the same message is told so."""

    async def scenario() -> None:
        path = tmp_path / "state.db"
        first = AsyncSessionStore(SessionStore(SQLiteBackend(path), ledger=True))
        second = AsyncSessionStore(SessionStore(SQLiteBackend(path), ledger=True))
        async with first, second:
            async with first.turn(LIN, message=ask("hi", "m1"), holder="w1") as turn:
                async with second.turn(LIN, message=ask("hi", "m1"), holder="w2") as other:
                    assert other.in_progress
                await turn.answer(Message(role="assistant", content="one answer"))
            inbound = await second.ledger.get(turn.key, "m1")
            assert inbound is not None
            assert inbound.status == "answered"

    run(scenario())


def test_without_the_mode_a_turn_is_what_it_was(make_backend: Callable[[], Backend]) -> None:
    """No ledger: ``turn(source)`` as before; ``message=`` says how to turn the ledger on."""

    async def scenario() -> None:
        async with AsyncSessionStore(SessionStore(make_backend())) as store:
            async with store.turn(LIN, platform_message_id="m1") as turn:
                assert turn.acceptance is None
                assert not turn.duplicate
                with pytest.raises(LedgerUnavailableError, match="message= and holder="):
                    await turn.answer(Message(role="assistant", content="x"))
            with pytest.raises(LedgerUnavailableError, match="ledger=True"):
                async with store.turn(LIN, message=ask("hi", "m2"), holder="w1"):
                    pass
            with pytest.raises(LedgerUnavailableError):
                _ = store.ledger

    run(scenario())


def test_a_ledger_turn_needs_a_holder(make_backend: Callable[[], Backend]) -> None:
    """``message=`` without ``holder=`` is refused before anything is stored."""

    async def scenario() -> None:
        store = AsyncSessionStore(SessionStore(make_backend(), ledger=True))
        async with store:
            with pytest.raises(InvalidArgumentError, match="holder="):
                async with store.turn(LIN, message=ask("hi", "m1")):
                    pass
            assert await store.ledger.pending() == []

    run(scenario())


def test_the_async_ledger_recovers_after_a_restart(
    make_backend: Callable[[], Backend], clock: FrozenClock
) -> None:
    """Pending turns are claimed and answered, unknown sends retried under the same key."""

    async def scenario() -> None:
        store = AsyncSessionStore(SessionStore(make_backend(), clock=clock, ledger=True))
        async with store:
            short = timedelta(seconds=5)
            key = store.key_for(LIN)
            await store.ledger.accept(LIN, ask("one", "m1"), holder="dead", ttl=short)
            await store.ledger.accept(LIN, ask("two", "m2"), holder="dead")
            reply = Message(role="assistant", content="ok")
            await store.ledger.answer(key, "m2", reply, holder="dead", ttl=short)
            await store.ledger.accept(LIN, ask("three", "m3"), holder="dead")
            failed = await store.ledger.fail(key, "m3", holder="dead", reason="refused")
            assert failed.status == "failed"
            clock.advance(seconds=6)
            (pending,) = await store.ledger.pending(key=key)
            claimed = await store.ledger.claim(key, pending.platform_message_id, holder="new")
            assert claimed is not None
            await store.ledger.answer(key, "m1", reply, holder="new")
            unknown = await store.ledger.unknown()
            assert [i.inbound for i in unknown] == ["m2"]
            (stale,) = unknown
            again = await store.ledger.retry(stale.idempotency_key, holder="new")
            assert again is not None
            assert (await store.ledger.reply(again)).content == "ok"
            failed_send = await store.ledger.mark_failed(again.idempotency_key, "blocked")
            assert failed_send.status == "failed"
            statuses = sorted(i.status for i in await store.ledger.intents(key=key))
            assert statuses == ["failed", "pending"]
            assert "AsyncLedger" in repr(store.ledger)

    run(scenario())


def test_turn_fail_marks_the_message(make_backend: Callable[[], Backend]) -> None:
    """``turn.fail(reason)`` takes the message out of ``pending``."""

    async def scenario() -> None:
        store = AsyncSessionStore(SessionStore(make_backend(), ledger=True))
        async with store:
            async with store.turn(LIN, message=ask("(sticker)", "m1"), holder="w1") as turn:
                failed = await turn.fail("unsupported")
            assert failed.reason == "unsupported"
            assert await store.ledger.pending() == []

    run(scenario())
