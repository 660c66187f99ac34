"""The async store's writer thread: queued writes committed as one batch, outcomes per caller.

Each test forms a batch deterministically: it holds the backend's write lock, so the writer takes
the first call and waits for the lock with a batch of one; the calls queued meanwhile are the
next batch, in arrival order.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import pytest

from hermes_sessions import (
    Message,
    ResetPolicies,
    ResetPolicy,
    SessionSource,
    SessionStore,
    StateScope,
    Usage,
)
from hermes_sessions.aio import AsyncSessionStore
from hermes_sessions.aio._batcher import WriteBatcher, _deliver, _deliver_all, _Write
from hermes_sessions.backends import InMemoryBackend, SQLiteBackend
from hermes_sessions.backends.sqlite import _connections as connections
from hermes_sessions.exceptions import ConflictError, SessionNotFoundError, StorageError

WAIT = 30.0
"""Seconds to wait for the writer before failing (never reached when it works)."""
NEVER = ResetPolicies(ResetPolicy(mode="none"))


def _chat(number: int) -> SessionSource:
    return SessionSource(platform="telegram", chat_id=str(number), user_id=str(number))


def _say(text: str, tag: str | None = None) -> Message:
    return Message(role="user", content=text, platform_message_id=tag)


async def _in_one_batch(astore: AsyncSessionStore, first, calls):
    """Await ``first`` alone, then the coroutines ``calls`` as one batch; their outcomes."""
    batcher = astore._writes._batcher
    assert batcher is not None
    with astore.store.backend._connections._write_lock:
        leader = asyncio.ensure_future(first)
        await asyncio.sleep(0)  # the task queues its call
        assert await asyncio.to_thread(batcher.wait_taken, WAIT)
        tasks = [asyncio.ensure_future(call) for call in calls]
        await asyncio.sleep(0)  # every task queues its call
        assert batcher.queued() == len(calls)
    await leader
    return await asyncio.gather(*tasks, return_exceptions=True)


def _run(tmp_path, scenario):
    store = SessionStore(SQLiteBackend(tmp_path / "state.db"), resets=NEVER)

    async def main():
        async with AsyncSessionStore(store) as astore:
            return await scenario(astore)

    return asyncio.run(main())


def test_a_batch_keeps_arrival_order_and_stores_a_redelivery_once(tmp_path, commits):
    """Calls of one batch apply in order; a second delivery of a turn in it is a duplicate."""

    async def scenario(astore):
        sid = (await astore.get_or_create(_chat(1))).session_id
        other = (await astore.get_or_create(_chat(2))).session_id
        commits.clear()
        outcomes = await _in_one_batch(
            astore,
            astore.append(other, _say("alone")),
            [
                astore.append(sid, _say("one", "m1")),
                astore.append(sid, _say("one again", "m1")),
                astore.append(sid, _say("two", "m2"), usage=Usage(input=3, output=4)),
            ],
        )
        texts = [str(m.content) for m in await astore.transcript(sid)]
        return outcomes, texts, await astore.session(sid)

    outcomes, texts, record = _run(tmp_path, scenario)
    assert [o.duplicate for o in outcomes] == [False, True, False]
    assert texts == ["one", "two"]
    assert record.input_tokens == 3
    assert len(commits) == 2  # the lone first call, then the three at once


def test_a_calls_own_error_fails_only_that_call(tmp_path, commits):
    """A conflict and a missing session in a batch are raised to their callers alone."""

    async def scenario(astore):
        sid = (await astore.get_or_create(_chat(1))).session_id
        revision = (await astore.session(sid)).revision
        commits.clear()
        outcomes = await _in_one_batch(
            astore,
            astore.record_usage(sid, Usage(input=1)),
            [
                astore.append(sid, _say("kept")),
                astore.append(sid, _say("stale"), if_revision=revision),
                astore.append("20990101_000000_abcdef01", _say("nowhere")),
                astore.update_state({StateScope.session(sid): {"step": 2}}, session_id=sid),
            ],
        )
        return outcomes, [str(m.content) for m in await astore.transcript(sid)]

    outcomes, texts = _run(tmp_path, scenario)
    assert not outcomes[0].duplicate
    assert isinstance(outcomes[1], ConflictError)
    assert isinstance(outcomes[2], SessionNotFoundError)
    assert outcomes[3] is not None
    assert texts == ["kept"]
    assert len(commits) == 2


def _io_error() -> sqlite3.OperationalError:
    error = sqlite3.OperationalError("disk I/O error")
    error.sqlite_errorcode = sqlite3.SQLITE_IOERR_WRITE  # type: ignore[attr-defined]
    return error


def test_an_io_error_fails_every_call_of_its_batch(tmp_path, commits, monkeypatch):
    """An I/O error in one call fails the whole batch through the async path; nothing is stored."""
    from hermes_sessions.backends.sqlite import _messages  # noqa: PLC0415

    original = _messages.append
    calls = 0

    def broken_second(*args, **kwargs):
        nonlocal calls
        calls += 1
        if calls == 2:
            raise _io_error()
        return original(*args, **kwargs)

    async def scenario(astore):
        sid = (await astore.get_or_create(_chat(1))).session_id
        other = (await astore.get_or_create(_chat(2))).session_id
        commits.clear()
        first = astore.record_usage(other, Usage(input=1))
        monkeypatch.setattr(_messages, "append", broken_second)
        outcomes = await _in_one_batch(
            astore,
            first,
            [astore.append(sid, _say(f"m{n}")) for n in range(3)],
        )
        monkeypatch.setattr(_messages, "append", original)
        before = await astore.transcript(sid)
        await astore.append(sid, _say("later"))  # the next batch works again
        return outcomes, before, [str(m.content) for m in await astore.transcript(sid)]

    outcomes, before, after = _run(tmp_path, scenario)
    assert all(isinstance(outcome, StorageError) for outcome in outcomes)
    assert len({id(outcome) for outcome in outcomes}) == 3  # a copy for each caller
    assert before == []
    assert after == ["later"]
    assert len(commits) == 2  # the lone first call and the later append


def test_a_failed_commit_fails_every_call_of_its_batch(tmp_path, monkeypatch):
    """When the ``COMMIT`` of a batch fails, every caller of the batch gets a ``StorageError``."""
    original = connections.crashpoints.reached
    armed = threading.Event()

    def fail_before_commit(point: str) -> None:
        if point == "sqlite.before_commit" and armed.is_set():
            raise _io_error()
        original(point)

    monkeypatch.setattr(connections.crashpoints, "reached", fail_before_commit)

    async def scenario(astore):
        sid = (await astore.get_or_create(_chat(1))).session_id
        armed.set()
        outcomes = await asyncio.gather(
            *(astore.append(sid, _say(f"m{n}")) for n in range(4)), return_exceptions=True
        )
        armed.clear()
        return outcomes, await astore.transcript(sid)

    outcomes, stored = _run(tmp_path, scenario)
    assert all(isinstance(outcome, StorageError) for outcome in outcomes)
    assert stored == []


def _count_deliveries(monkeypatch, wakes: list[object]) -> None:
    """Record in ``wakes`` every hand-over of outcomes to the running loop."""
    loop = asyncio.get_running_loop()
    original = loop.call_soon_threadsafe

    def counting(callback, *args, **kwargs):
        if callback is _deliver:
            wakes.append(callback)
        return original(callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counting)


def test_outcomes_of_a_batch_reach_the_loop_in_one_wake_up(tmp_path, monkeypatch):
    """The writer hands a batch's outcomes to the event loop with one ``call_soon_threadsafe``."""
    wakes: list[object] = []

    async def scenario(astore):
        sids = [(await astore.get_or_create(_chat(n))).session_id for n in range(8)]
        _count_deliveries(monkeypatch, wakes)
        await _in_one_batch(
            astore,
            astore.append(sids[0], _say("first")),
            [astore.append(sid, _say("hi")) for sid in sids[1:]],
        )

    _run(tmp_path, scenario)
    assert len(wakes) == 2  # the first call's batch, then the seven at once


def test_a_call_cancelled_before_the_writer_takes_it_is_never_run(tmp_path):
    """Cancelling a queued write drops it; the rest of its batch is committed."""

    async def scenario(astore):
        sid = (await astore.get_or_create(_chat(1))).session_id
        batcher = astore._writes._batcher
        with astore.store.backend._connections._write_lock:
            first = asyncio.ensure_future(astore.append(sid, _say("first")))
            await asyncio.sleep(0)
            assert await asyncio.to_thread(batcher.wait_taken, WAIT)
            dropped = asyncio.ensure_future(astore.append(sid, _say("dropped")))
            kept = asyncio.ensure_future(astore.append(sid, _say("kept")))
            await asyncio.sleep(0)
            dropped.cancel()
            await asyncio.sleep(0)
        await asyncio.gather(first, kept)
        assert dropped.cancelled()
        return [str(m.content) for m in await astore.transcript(sid)]

    assert _run(tmp_path, scenario) == ["first", "kept"]


def test_a_call_cancelled_while_it_commits_is_still_stored_whole(tmp_path):
    """A write cancelled once the writer took it runs to its commit; its caller sees the cancel."""

    async def scenario(astore):
        sid = (await astore.get_or_create(_chat(1))).session_id
        batcher = astore._writes._batcher
        with astore.store.backend._connections._write_lock:
            taken = asyncio.ensure_future(
                astore.append(sid, _say("q", "t1"), Message(role="assistant", content="a"))
            )
            await asyncio.sleep(0)
            assert await asyncio.to_thread(batcher.wait_taken, WAIT)
            taken.cancel()
            with pytest.raises(asyncio.CancelledError):
                await taken
        await astore.append(sid, _say("after"))  # queued behind it: runs once it committed
        return [str(m.content) for m in await astore.transcript(sid)]

    assert _run(tmp_path, scenario) == ["q", "a", "after"]


def test_a_cancelled_turn_releases_its_key_for_the_next(tmp_path):
    """A turn cancelled while its append waits for the writer lets the key's next turn run."""

    async def scenario(astore):
        source = _chat(1)
        sid = (await astore.get_or_create(source)).session_id
        batcher = astore._writes._batcher
        with astore.store.backend._connections._write_lock:
            looked_up = asyncio.Event()

            async def turn():
                async with astore.turn(source) as held:
                    looked_up.set()
                    await astore.append(held.session_id, _say("cancelled turn"))

            task = asyncio.ensure_future(turn())
            await looked_up.wait()
            await asyncio.sleep(0)  # the task queues its append
            assert await asyncio.to_thread(batcher.wait_taken, WAIT)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        async with astore.turn(source) as held:
            await astore.append(held.session_id, _say("next turn"))
        return [str(m.content) for m in await astore.transcript(sid)]

    assert _run(tmp_path, scenario) == ["cancelled turn", "next turn"]


def test_the_writer_thread_stops_with_the_store(tmp_path):
    """After ``aclose`` the batch writer's thread ends; a later write starts a new one."""

    async def scenario(astore):
        sid = (await astore.get_or_create(_chat(1))).session_id
        await astore.append(sid, _say("hi"))
        pool = astore._writes._batcher._thread
        assert pool is not None
        return set(pool._threads)

    threads = _run(tmp_path, scenario)
    assert threads
    for thread in threads:
        thread.join(WAIT)
    assert not any(thread.is_alive() for thread in threads)


def test_a_backend_without_write_batches_uses_the_write_pool():
    """On a backend without ``SupportsWriteBatches`` appends run in the write pool, as before."""

    async def scenario():
        async with AsyncSessionStore(SessionStore(InMemoryBackend(), resets=NEVER)) as astore:
            assert astore._writes._batcher is None
            sid = (await astore.get_or_create(_chat(1))).session_id
            result = await astore.append(sid, _say("hi"))
            return result, astore._writes._pool is not None

    result, pooled = asyncio.run(scenario())
    assert not result.duplicate
    assert pooled


def test_writes_from_two_event_loops_reach_their_own_loops(tmp_path):
    """One store used from two threads' event loops: each caller's outcome reaches its loop."""
    store = SessionStore(SQLiteBackend(tmp_path / "state.db"), resets=NEVER)
    astore = AsyncSessionStore(store)
    sid = store.get_or_create(_chat(1)).session_id
    barrier = threading.Barrier(2)
    results: dict[int, list[bool]] = {}

    def in_thread(number: int) -> None:
        async def main() -> list[bool]:
            await asyncio.to_thread(barrier.wait, WAIT)
            outcomes = await asyncio.gather(
                *(astore.append(sid, _say(f"{number}-{n}", f"{number}-{n}")) for n in range(20))
            )
            return [o.duplicate for o in outcomes]

        results[number] = asyncio.run(main())

    threads = [threading.Thread(target=in_thread, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    astore._writes.shutdown()
    assert results == {0: [False] * 20, 1: [False] * 20}
    assert len(store.transcript(sid)) == 40
    store.close()


def test_the_reads_of_a_round_reach_the_loop_in_one_wake_up(tmp_path, monkeypatch):
    """Reads queued together run on the reader thread; their results come back at once."""
    wakes: list[object] = []
    threads: set[str] = set()

    async def scenario(astore):
        sids = [(await astore.get_or_create(_chat(n))).session_id for n in range(8)]
        await astore.append(sids[0], _say("hello", "p1"))
        original_seen = SessionStore.seen

        def seen(self, *args):
            threads.add(threading.current_thread().name)
            return original_seen(self, *args)

        monkeypatch.setattr(SessionStore, "seen", seen)
        _count_deliveries(monkeypatch, wakes)
        return await asyncio.gather(*(astore.seen(sid, "p1") for sid in sids))

    found = _run(tmp_path, scenario)
    assert [message is not None for message in found] == [True] + [False] * 7
    assert len(threads) == 1
    assert threads.pop().startswith("hermes-sessions-read")
    assert 1 <= len(wakes) <= 2  # the first read wakes the reader; the rest queue meanwhile


def test_a_reads_error_is_raised_to_it_alone(tmp_path):
    """A failing read among others of its round raises to its caller; the others get results."""

    async def scenario(astore):
        sid = (await astore.get_or_create(_chat(1))).session_id
        return await asyncio.gather(
            astore.session(sid),
            astore.session("20990101_000000_abcdef01"),
            astore.tail(sid, 5),
            return_exceptions=True,
        )

    record, missing, tail = _run(tmp_path, scenario)
    assert record.id is not None
    assert isinstance(missing, SessionNotFoundError)
    assert tail == []


def test_a_read_cancelled_before_the_reader_takes_it_is_never_run(tmp_path, monkeypatch):
    """Cancelling a queued read drops it: the reader never calls it."""
    calls: list[str] = []

    async def scenario(astore):
        sid = (await astore.get_or_create(_chat(1))).session_id
        original = SessionStore.seen

        def seen(self, key, tag):
            calls.append(tag)
            return original(self, key, tag)

        monkeypatch.setattr(SessionStore, "seen", seen)
        reader = astore._writes._reader
        with reader._lock:  # the reader cannot take anything while we hold its queue
            dropped = asyncio.ensure_future(astore.seen(sid, "dropped"))
            kept = asyncio.ensure_future(astore.seen(sid, "kept"))
            await asyncio.sleep(0)  # both queue (the lock is re-entrant for this thread)
            dropped.cancel()
            await asyncio.sleep(0)
        assert await kept is None
        assert dropped.cancelled()

    _run(tmp_path, scenario)
    assert calls == ["kept"]


def test_a_failing_execute_fails_every_call_it_was_given():
    """If running a batch raises (a broken backend), every caller of the batch gets the error."""

    def broken(calls):
        raise RuntimeError("backend broke")

    async def scenario():
        batcher = WriteBatcher(broken)
        try:
            return await asyncio.gather(
                *(batcher.run(lambda: None) for _ in range(3)), return_exceptions=True
            )
        finally:
            batcher.shutdown()

    outcomes = asyncio.run(scenario())
    assert all(isinstance(outcome, RuntimeError) for outcome in outcomes)


def test_outcomes_for_a_closed_loop_are_dropped():
    """Outcomes whose event loop has closed meanwhile are dropped without an error."""
    loop = asyncio.new_event_loop()
    future = loop.create_future()
    loop.close()
    _deliver_all([_Write(lambda: None, future, loop)], [(1, None)])
    assert not future.done()
