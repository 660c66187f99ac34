"""``before_rotate``: hosts hear of a session before a rotation ends it, while it is still open."""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from store_scenarios import DM, user, with_policy

from hermes_sessions import EndingSession, Message, ResetPolicy, RetentionPolicy
from hermes_sessions.aio import AsyncSessionStore

if TYPE_CHECKING:
    from hermes_sessions.store import SessionStore


def recorder(store: SessionStore) -> list[tuple[str | None, str, str, str | None, str | None]]:
    """Record each ending session with its state at call time: end reason and key's session."""
    heard: list[tuple[str | None, str, str, str | None, str | None]] = []

    @store.before_rotate
    def remember(ending: EndingSession) -> None:
        record = store.session(ending.session_id)
        entry = store.backend.get_entry(ending.session_key) if ending.session_key else None
        pointed = entry.session_id if entry is not None else None
        heard.append(
            (ending.session_key, ending.session_id, str(ending.reason), record.end_reason, pointed)
        )

    return heard


def test_every_rotation_that_ends_a_session_calls_it_first(store, clock):
    """Idle resets, /new, compression and retention each call it, the session still open."""
    idle = with_policy(store, ResetPolicy(mode="idle", idle_minutes=10))
    heard = recorder(idle)
    first = idle.get_or_create(DM)
    key = first.entry.session_key
    assert heard == []  # first contact ends nothing
    idle.append(first.session_id, user("remember: I like tea"))
    clock.advance(minutes=11)
    second = idle.get_or_create(DM)
    assert second.reset is not None
    third = idle.reset(key)
    compressed = idle.compress(third.session_id, [user("summary")], holder="h")
    clock.advance(days=200)
    idle.maintain(RetentionPolicy(max_age=timedelta(days=90)))
    assert heard == [
        (key, first.session_id, "idle", None, first.session_id),
        (key, second.session_id, "session_reset", None, second.session_id),
        (key, third.session_id, "compression", None, third.session_id),
        (key, compressed.id, "retention", None, compressed.id),
    ]


def test_the_hook_can_read_the_ending_transcript(store, clock):
    """A host flushes memory from the conversation: its messages are there to read."""
    flushed: list[list[str]] = []

    @store.before_rotate
    def flush(ending: EndingSession) -> None:
        flushed.append([str(m.content) for m in store.transcript(ending.session_id)])

    lookup = store.get_or_create(DM)
    store.append(lookup.session_id, user("my name is Ada"))
    store.reset(lookup.entry.session_key)
    assert flushed == [["my name is Ada"]]


def test_a_failing_hook_is_logged_and_the_rotation_goes_ahead(store, caplog):
    """An exception does not abort the rotation, nor stop the other callbacks."""
    later: list[str] = []

    @store.before_rotate
    def broken(ending: EndingSession) -> None:
        raise RuntimeError("flush failed")

    store.before_rotate(lambda ending: later.append(ending.session_id))
    first = store.get_or_create(DM)
    with caplog.at_level(logging.ERROR):
        second = store.reset(first.entry.session_key)
    assert second.session_id != first.session_id
    assert store.session(first.session_id).end_reason == "session_reset"
    assert later == [first.session_id]
    assert "before_rotate callback" in caplog.text
    assert "flush failed" in caplog.text


def run(coroutine):
    """Run ``coroutine`` on a fresh event loop."""
    return asyncio.run(coroutine)


def test_async_hooks_are_awaited_before_the_rotation(store, caplog):
    """A coroutine hook runs on the loop and finishes before the session ends; errors logged."""
    astore = AsyncSessionStore(store)
    heard: list[tuple[str, str | None, int]] = []

    async def scenario() -> tuple[int, str, str]:
        @astore.before_rotate
        async def flush(ending: EndingSession) -> None:
            await asyncio.sleep(0)
            record = await astore.session(ending.session_id)
            heard.append((ending.session_id, record.end_reason, threading.get_ident()))

        @astore.before_rotate
        async def broken(ending: EndingSession) -> None:
            raise RuntimeError("async flush failed")

        plain: list[str] = []
        astore.before_rotate(lambda ending: plain.append(ending.session_id))
        first = await astore.get_or_create(DM)
        await astore.append(first.session_id, Message(role="user", content="hi"))
        second = await astore.reset(first.entry.session_key)
        assert plain == [first.session_id]
        return threading.get_ident(), first.session_id, second.session_id

    with caplog.at_level(logging.ERROR):
        loop_thread, first, second = run(scenario())
    assert first != second
    assert heard == [(first, None, loop_thread)]
    assert "async flush failed" in caplog.text


def test_before_rotate_is_not_called_for_first_contact_or_a_resume_of_nothing(store):
    """Only rotations that end a session call it."""
    heard = recorder(store)
    store.get_or_create(DM)
    store.get_or_create(DM)
    assert heard == []


def test_ending_session_is_a_frozen_value():
    """The event is an attrs value: equal by fields, immutable."""
    one = EndingSession(session_key="k", session_id="s", reason="session_reset")
    assert one == EndingSession(session_key="k", session_id="s", reason="session_reset")
    with pytest.raises(AttributeError):
        one.reason = "idle"  # type: ignore[misc]
