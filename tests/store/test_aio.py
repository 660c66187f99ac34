"""AsyncSessionStore: the same API as coroutines, serialised per key."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from hermes_sessions import BackendClosedError, Message, SessionSource, SessionStore
from hermes_sessions.aio import AsyncSessionStore
from hermes_sessions.backends.inmemory import InMemoryBackend

LIN = SessionSource(platform="telegram", chat_id="7", user_id="7")
EVE = SessionSource(platform="telegram", chat_id="8", user_id="8")


def run(coroutine):
    """Run a coroutine on a fresh event loop."""
    return asyncio.run(coroutine)


@pytest.fixture
def astore(store):
    """The async facade over each backend's store."""
    return AsyncSessionStore(store)


def test_a_conversation_through_the_async_api(astore, clock):
    """Turns, appends, reads, titles, resets, search and housekeeping all work as coroutines."""

    async def scenario():
        async with astore.turn(LIN) as lookup:
            session_id = lookup.session_id
            await astore.append(session_id, Message(role="user", content="部署 staging"))
            await astore.append(session_id, Message(role="assistant", content="好的"))
        assert [m.content for m in await astore.tail(session_id, 1)] == ["好的"]
        assert len(await astore.messages(session_id)) == 2
        assert len(await astore.transcript(session_id)) == 2
        assert (await astore.set_title(session_id, "deploy")).title == "deploy"
        assert (await astore.session(session_id)).message_count == 2
        key = lookup.entry.session_key
        assert (await astore.touch(key)).session_key == key
        assert (await astore.mark_resume_pending(key, "restart")).resume_pending
        assert not (await astore.clear_resume_pending(key)).resume_pending
        new = await astore.reset(key)
        assert (await astore.resume(key, "deploy")).session_id == session_id
        assert (await astore.entry(key)).session_id == session_id
        hits = await astore.search("部署")
        assert [h.session.id for h in hits] == [session_id]
        assert len(await astore.search("部署", group="lineage")) == 1
        first = (await astore.messages(session_id))[0]
        assert len(await astore.messages_around(session_id, first.id or 0)) == 2
        view = await astore.anchored_view(session_id, first.id or 0)
        assert view.anchor == first
        assert len((await astore.list_sessions()).items) == 2
        assert (await astore.lineage(session_id)).root.id == session_id
        undone = await astore.undo(session_id)
        assert await astore.restore(session_id, undone) == 2
        await astore.append(session_id, Message(role="user", content="x", platform_message_id="p"))
        assert await astore.edit(session_id, "p", "y")
        assert await astore.retract(session_id, "p")
        assert (await astore.retry(session_id)).content == "部署 staging"
        branched = await astore.branch(key)
        child = await astore.compress(branched.session_id, [], holder="w")
        assert child.parent_session_id == branched.session_id
        await astore.suspend(key)
        assert (await astore.get_or_create(LIN)).reset.reason == "suspended"
        clock.advance(days=90)
        assert (await astore.prune(timedelta(days=30))).dry_run
        assert (await astore.erase_user("telegram", "someone-else")).sessions == ()
        assert await astore.rebuild_routing() == 0
        assert new.session_id != session_id

    run(scenario())


def test_turns_on_one_key_run_one_after_another(astore):
    """A second turn on the same key starts only after the first one ends."""
    order: list[str] = []

    async def turn(name: str, entered: asyncio.Event, release: asyncio.Event) -> None:
        async with astore.turn(LIN):
            order.append(f"{name} in")
            entered.set()
            await release.wait()
            order.append(f"{name} out")

    async def scenario():
        first_in, second_in = asyncio.Event(), asyncio.Event()
        release = asyncio.Event()
        first = asyncio.create_task(turn("first", first_in, release))
        await first_in.wait()
        second = asyncio.create_task(turn("second", second_in, release))
        await asyncio.sleep(0)
        for _ in range(20):
            await asyncio.sleep(0)
        assert not second_in.is_set()
        release.set()
        await asyncio.gather(first, second)

    run(scenario())
    assert order == ["first in", "first out", "second in", "second out"]


def test_other_keys_are_not_blocked(astore):
    """A turn held on one key does not delay another key's turn."""

    async def scenario():
        release = asyncio.Event()
        entered = asyncio.Event()

        async def hold() -> None:
            async with astore.turn(LIN):
                entered.set()
                await release.wait()

        holder = asyncio.create_task(hold())
        await entered.wait()
        lookup = await astore.get_or_create(EVE)
        release.set()
        await holder
        return lookup

    assert run(scenario()).created


def test_concurrent_first_messages_make_one_session(astore):
    """Many concurrent first messages of one chat end up in a single session."""

    async def scenario():
        lookups = await asyncio.gather(*(astore.get_or_create(LIN) for _ in range(10)))
        return {lookup.session_id for lookup in lookups}, sum(lookup.created for lookup in lookups)

    sessions, created = run(scenario())
    assert len(sessions) == 1
    assert created == 1
    assert len(astore._keys) == 0


def test_open_close_and_repr(tmp_path):
    """Opening builds a store without blocking; leaving the context closes it."""

    async def scenario():
        async with await AsyncSessionStore.open(tmp_path, backend="memory") as astore:
            assert "InMemoryBackend" in repr(astore)
            events = []
            astore.on_rotate(events.append)
            await astore.get_or_create(LIN)
            assert [e.reason for e in events] == ["created"]
            return astore

    astore = run(scenario())
    with pytest.raises(BackendClosedError):
        astore.store.backend.get_entry("k")


def test_custom_executor():
    """Blocking calls run on the executor the host provides."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sessions") as pool:
        astore = AsyncSessionStore(SessionStore(InMemoryBackend()), executor=pool)
        assert run(astore.get_or_create(LIN)).created


def test_async_store_wraps_only_a_session_store():
    """AsyncSessionStore rejects anything but a SessionStore, naming the expected type."""
    with pytest.raises(TypeError, match="SessionStore"):
        AsyncSessionStore(InMemoryBackend())  # type: ignore[arg-type]


def test_async_store_rejects_a_non_executor(store):
    """The executor, if given, must be a concurrent.futures.Executor."""
    with pytest.raises(TypeError, match="Executor"):
        AsyncSessionStore(store, executor="threads")  # type: ignore[arg-type]
