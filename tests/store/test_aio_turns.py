"""Re-entrant async turns and async parity (issue 11): no deadlock inside ``async with turn()``."""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading

import pytest
from store_scenarios import with_policy

from hermes_sessions import (
    LeaseHeldError,
    Message,
    ResetPolicy,
    SessionSource,
    SessionStore,
    TurnDeadlockError,
)
from hermes_sessions.aio import (
    AsyncMemoryStore,
    AsyncSessionStore,
    handle_memory_async,
    handle_session_search_async,
)
from hermes_sessions.memory import MemoryContext, MemoryStore, ScopedMemory
from hermes_sessions.tools import SearchToolContext

LIN = SessionSource(platform="telegram", chat_id="7", user_id="7")
EVE = SessionSource(platform="telegram", chat_id="8", user_id="8")
# A guard against a hang (the bug being fixed), not a performance limit.
HANG = 60


def run(coroutine):
    """Run a coroutine on a fresh event loop, failing instead of hanging forever."""

    async def guarded():
        return await asyncio.wait_for(coroutine, HANG)

    return asyncio.run(guarded())


@pytest.fixture
def astore(store):
    """The async facade over each backend's store."""
    return AsyncSessionStore(store)


def test_commands_inside_a_turn_do_not_deadlock(astore):
    """/new, resume, branch, get_or_create, touch and append on the turn's own key."""

    async def scenario():
        async with astore.turn(LIN) as turn:
            first = turn.session_id
            await astore.append(first, Message(role="user", content="/new"))
            await astore.reset(turn.key, title="fresh")
            fresh = turn.session_id
            assert fresh != first
            await astore.append(fresh, Message(role="assistant", content="new one"))
            assert (await astore.get_or_create(LIN)).session_id == turn.session_id
            await astore.touch(turn.key)
            await astore.resume(turn.key, first)
            assert turn.session_id == first
            await astore.branch(turn.key, title="side")
            branched = turn.session_id
        assert (await astore.session(branched)).title == "side"
        assert (await astore.session(fresh)).title == "fresh"
        assert [m.content for m in await astore.transcript(fresh)] == ["new one"]
        assert [m.content for m in await astore.transcript(branched)] == ["/new"]

    run(scenario())


def test_the_reply_after_new_lands_in_the_new_session(astore):
    """turn.session_id follows the rotation, so the reply is not written to the ended session."""

    async def scenario():
        async with astore.turn(LIN) as turn:
            before = turn.session_id
            await astore.reset(turn.key)
            await astore.append(turn.session_id, Message(role="assistant", content="hi again"))
        assert await astore.transcript(before) == []
        assert [m.content for m in await astore.transcript(turn.session_id)] == ["hi again"]
        assert turn.lookup.session_id == before
        assert turn.entry.session_id != before

    run(scenario())


def test_tasks_started_inside_the_turn_share_it(astore):
    """Tasks from gather and create_task inherit the turn: their calls do not wait for it."""

    async def scenario():
        async with astore.turn(LIN) as turn:
            entries = await asyncio.gather(
                astore.touch(turn.key), astore.get_or_create(LIN), astore.touch(turn.key)
            )
            assert {e.session_id for e in (entries[0], entries[1].entry, entries[2])} == {
                turn.session_id
            }
            task = asyncio.create_task(astore.reset(turn.key))
            rotated = await task
            assert turn.session_id == rotated.session_id

    run(scenario())


def test_the_same_chat_is_still_serialised_for_other_tasks(astore):
    """A task that does not own the turn waits until the turn's block ends."""
    order: list[str] = []

    async def scenario():
        inside = asyncio.Event()

        async def holder():
            async with astore.turn(LIN):
                inside.set()
                await asyncio.sleep(0.05)
                order.append("turn done")

        async def outsider():
            await inside.wait()
            await astore.touch(astore.key_for(LIN))
            order.append("outsider")

        await asyncio.gather(holder(), outsider())

    run(scenario())
    assert order == ["turn done", "outsider"]


def test_other_chats_run_during_a_turn(astore):
    """A turn on one chat does not hold up another chat's turn."""

    async def scenario():
        release = asyncio.Event()

        async def slow():
            async with astore.turn(LIN):
                await release.wait()

        async def other():
            async with astore.turn(EVE) as turn:
                release.set()
                return turn.session_id

        _, eve = await asyncio.gather(slow(), other())
        return eve

    assert run(scenario())


def test_ownership_ends_with_the_block(astore):
    """A task started in a turn that outlives it waits like everyone else afterwards."""
    order: list[str] = []

    async def scenario():
        gate = asyncio.Event()

        async def late():
            await gate.wait()
            await astore.touch(astore.key_for(LIN))
            order.append("late task")

        async with astore.turn(LIN):
            task = asyncio.create_task(late())
        async with astore.turn(LIN):
            gate.set()
            await asyncio.sleep(0.05)
            order.append("second turn")
        await task

    run(scenario())
    assert order == ["second turn", "late task"]


def test_turns_that_reach_into_each_others_keys_both_finish(astore):
    """Chat A's turn posts to chat B while B's turn posts to A: both finish (issue 33).

    An operation on another key from inside a turn does not wait for that key's turn: each
    operation is atomic on its own.
    """

    async def scenario():
        entered = {"a": asyncio.Event(), "b": asyncio.Event()}

        async def agent(mine, other, me, them):
            async with astore.turn(mine) as turn:
                entered[me].set()
                await entered[them].wait()  # both turns are held now
                lookup = await astore.get_or_create(other)
                await astore.append(lookup.session_id, Message(role="user", content=f"from {me}"))
                await astore.touch(astore.key_for(other))
                await astore.append(turn.session_id, Message(role="assistant", content="sent"))
                return lookup.session_id

        return await asyncio.gather(agent(LIN, EVE, "a", "b"), agent(EVE, LIN, "b", "a"))

    to_eve, to_lin = run(scenario())
    assert sorted(m.content for m in astore.store.transcript(to_eve)) == ["from a", "sent"]
    assert sorted(m.content for m in astore.store.transcript(to_lin)) == ["from b", "sent"]


def test_nested_turns_in_a_cycle_raise_at_once_naming_both_keys(astore):
    """A turn on A opening a turn on B while B's opens one on A: one fails fast, one finishes."""
    outcomes: dict[str, object] = {}

    async def scenario():
        entered = {"a": asyncio.Event(), "b": asyncio.Event()}

        async def agent(mine, other, me, them):
            try:
                async with astore.turn(mine):
                    entered[me].set()
                    await entered[them].wait()
                    async with astore.turn(other) as nested:
                        outcomes[me] = nested.session_id
            except TurnDeadlockError as error:
                outcomes[me] = error

        await asyncio.gather(agent(LIN, EVE, "a", "b"), agent(EVE, LIN, "b", "a"))

    run(scenario())
    errors = [o for o in outcomes.values() if isinstance(o, TurnDeadlockError)]
    assert len(errors) == 1
    (error,) = errors
    keys = {astore.key_for(LIN), astore.key_for(EVE)}
    assert {error.key, *error.held} == keys
    assert all(key in str(error) for key in keys)
    assert len(outcomes) == 2


def test_a_nested_turn_without_a_cycle_still_waits_its_turn(astore):
    """A nested turn on a busy key waits for it (no cycle, no error)."""
    order: list[str] = []

    async def scenario():
        inside = asyncio.Event()

        async def eve_turn():
            async with astore.turn(EVE):
                inside.set()
                await asyncio.sleep(0.05)
                order.append("eve done")

        async def lin_turn():
            await inside.wait()
            async with astore.turn(LIN), astore.turn(EVE):
                order.append("lin holds eve")

        await asyncio.gather(eve_turn(), lin_turn())

    run(scenario())
    assert order == ["eve done", "lin holds eve"]


def test_every_public_store_method_has_an_async_twin():
    """The two method sets are the same (``close`` is ``aclose``, plus the async-only ones)."""
    sync = {n for n, v in inspect.getmembers(SessionStore) if callable(v) and n[0] != "_"}
    async_ = {n for n, v in inspect.getmembers(AsyncSessionStore) if callable(v) and n[0] != "_"}
    assert (sync - {"close"}) - async_ == set()
    assert async_ - sync == {"aclose", "lock", "start_maintenance", "turn"}
    plain = {
        "key_for",
        "is_incognito",
        "on_rotate",
        "before_rotate",
        "open",
        "compression_lease",
        "lock",
        "start_maintenance",
        "turn",
    }
    for name in async_ - plain:
        assert inspect.iscoroutinefunction(getattr(AsyncSessionStore, name)), name
    assert inspect.iscoroutinefunction(AsyncSessionStore.open.__func__)


def test_coroutine_rotation_callbacks_run_on_the_loop(astore, caplog):
    """on_rotate accepts a coroutine function; it runs on the loop's thread; errors are logged."""
    heard: list[tuple[str, int]] = []

    async def scenario():
        done = asyncio.Event()

        @astore.on_rotate
        async def remember(event):
            heard.append((event.reason, threading.get_ident()))
            done.set()

        @astore.on_rotate
        async def broken(event):
            raise RuntimeError("callback bug")

        async with astore.turn(LIN):
            pass
        await done.wait()
        await asyncio.sleep(0)
        return threading.get_ident()

    with caplog.at_level(logging.ERROR):
        loop_thread = run(scenario())
    assert heard == [("created", loop_thread)]
    assert "callback bug" in caplog.text


def test_async_compression_lease(astore):
    """The lease is held across awaits; another holder is refused while it is."""

    async def scenario():
        async with astore.turn(LIN) as turn:
            await astore.append(turn.session_id, Message(role="user", content="long talk"))
            async with astore.compression_lease(turn.session_id, "worker-1"):
                with pytest.raises(LeaseHeldError):
                    await astore.compress(turn.session_id, [], holder="worker-2")
                child = await astore.compress(
                    turn.session_id, [Message(role="user", content="summary")], holder="worker-1"
                )
            assert turn.session_id == child.id

    run(scenario())


def test_async_open_is_awaited(tmp_path):
    """``await AsyncSessionStore.open(...)`` opens without blocking; ``async with`` closes."""

    async def scenario():
        astore = await AsyncSessionStore.open(tmp_path, backend="memory")
        async with astore, astore.turn(LIN) as turn:
            return turn.key

    assert run(scenario()) == "agent:main:telegram:dm:7"


def test_memory_files_and_tools_as_coroutines(tmp_path, store):
    """AsyncMemoryStore and the async tool handlers give what the sync ones give."""

    async def scenario():
        memory = AsyncMemoryStore(MemoryStore(tmp_path / "memories"))
        assert (await memory.add("memory", "staging uses port 8443")).changed
        assert await memory.entries("memory") == ("staging uses port 8443",)
        assert (await memory.replace("memory", "8443", "staging uses port 9443")).changed
        assert (await memory.reload()).memory.entries == ("staging uses port 9443",)
        assert memory.snapshot() == memory.store.snapshot()
        assert memory.path("user").name == "USER.md"
        assert memory.limit("user") == memory.store.user_char_limit
        assert (await memory.remove("memory", "9443")).entries == ()
        assert (await memory.repair("memory")).action == "repair"
        result = await handle_memory_async(
            memory, {"action": "add", "target": "user", "content": "prefers 中文"}
        )
        assert result["success"] is True
        result = await handle_memory_async(
            memory.store, {"action": "remove", "target": "user", "old_text": "中文"}
        )
        assert result["success"] is True
        session_id = store.get_or_create(LIN).session_id
        store.append(session_id, Message(role="user", content="deploy staging tonight"))
        context = SearchToolContext(store=store, requester=LIN, current_key=store.key_for(LIN))
        found = await handle_session_search_async(context, {"query": "staging"})
        assert found["success"] is True
        with pytest.raises(TypeError):
            await handle_session_search_async(object(), {})  # type: ignore[arg-type]

    run(scenario())


def test_scoped_memory_through_the_async_tool_and_erasure(tmp_path, store):
    """The async handler takes a context; the async erase_user erases the user's memory too."""
    memory = ScopedMemory(tmp_path / "scoped")

    async def scenario():
        key = store.get_or_create(LIN).entry.session_key
        context = MemoryContext.of(LIN, key)
        call = {"action": "add", "target": "user", "content": "prefers 中文"}
        result = await handle_memory_async(memory, call, context=context)
        assert (result["success"], result["scope"]) == (True, "user")
        report = await AsyncSessionStore(store).erase_user("telegram", LIN.user_id, memory=memory)
        assert report.memory_profiles == (f"user:telegram:{LIN.user_id}",)
        assert memory.entries(context.user_scope) == ()

    run(scenario())


def test_an_async_turn_recognises_a_redelivery_across_a_reset(store, clock):
    """turn(source, platform_message_id=) past the idle window holds the old session, unrotated."""
    idle = AsyncSessionStore(with_policy(store, ResetPolicy(mode="idle", idle_minutes=60)))
    pid = "7:1"

    async def scenario():
        async with idle.turn(LIN, platform_message_id=pid) as turn:
            assert turn.redelivered is None
            (stored,) = await idle.append(
                turn.session_id, Message(role="user", content="hi", platform_message_id=pid)
            )
        clock.advance(hours=2)
        async with idle.turn(LIN, platform_message_id=pid) as again:
            assert (again.redelivered, again.reset) == (stored, None)
            assert again.session_id == turn.session_id
        lookup = await idle.get_or_create(LIN, platform_message_id=pid)
        assert (lookup.redelivered, lookup.session_id) == (stored, turn.session_id)
        edited = await idle.edit(turn.key, pid, "hello")
        assert edited.content == "hello"

    run(scenario())
