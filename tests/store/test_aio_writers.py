"""The async store's write pool: many chats' writes wait for one commit together (issue 21)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from hermes_sessions import Message, ResetPolicies, ResetPolicy, SessionSource, SessionStore
from hermes_sessions.aio import AsyncSessionStore
from hermes_sessions.backends import SQLiteBackend
from hermes_sessions.backends.sqlite import _connections as connections

WAIT = 30.0
"""Seconds to wait for writers to queue before failing (never reached when it works)."""
CHATS = 20
"""More chats than asyncio's default pool has threads on a small machine."""


def _chat(number: int) -> SessionSource:
    return SessionSource(platform="telegram", chat_id=str(number), user_id=str(number))


def test_writes_of_many_chats_share_one_commit(tmp_path, monkeypatch):
    """Twenty chats appending while a commit is in flight are stored by one more commit."""
    commits: list[str] = []
    original = connections.crashpoints.reached

    def count(point: str) -> None:
        if point == "sqlite.after_commit":
            commits.append(point)
        original(point)

    never = ResetPolicies(ResetPolicy(mode="none"))
    store = SessionStore(SQLiteBackend(tmp_path / "state.db"), resets=never)

    async def scenario() -> list[int]:
        async with AsyncSessionStore(store) as astore:
            batcher = astore._writes._batcher
            lookups = [await astore.get_or_create(_chat(n)) for n in range(CHATS)]
            monkeypatch.setattr(connections.crashpoints, "reached", count)
            with store.backend._connections._write_lock:
                first = asyncio.ensure_future(
                    astore.append(lookups[0].session_id, Message(role="user", content="first"))
                )
                await asyncio.sleep(0)  # the task queues its call
                assert await asyncio.to_thread(batcher.wait_taken, WAIT)
                rest = [
                    asyncio.ensure_future(
                        astore.append(lookup.session_id, Message(role="user", content="hi"))
                    )
                    for lookup in lookups[1:]
                ]
                await asyncio.sleep(0)  # every task queues its call
                assert batcher.queued() == CHATS - 1
            await asyncio.gather(first, *rest)
            return [len(await astore.transcript(lookup.session_id)) for lookup in lookups]

    assert asyncio.run(scenario()) == [1] * CHATS
    assert len(commits) == 2  # the first append alone, then the other nineteen at once


class _Counting(ThreadPoolExecutor):
    """An executor that counts the calls handed to it."""

    calls = 0

    def submit(self, *args, **kwargs):
        type(self).calls += 1
        return super().submit(*args, **kwargs)


def test_a_given_executor_runs_the_writes_too(tmp_path):
    """A store given ``executor=`` runs its appends and reads there, in no thread of its own."""

    async def scenario() -> None:
        with _Counting(2) as pool:
            store = SessionStore(SQLiteBackend(tmp_path / "state.db"))
            async with AsyncSessionStore(store, executor=pool) as astore:
                lookup = await astore.get_or_create(_chat(1))
                before = _Counting.calls
                await astore.append(lookup.session_id, Message(role="user", content="hi"))
                assert _Counting.calls == before + 1
                assert await astore.seen(lookup.session_id, "nothing") is None
                assert _Counting.calls == before + 2  # the turn's reads too
                assert astore._writes._batcher is None

    asyncio.run(scenario())


def test_the_write_pool_stops_with_the_store(tmp_path):
    """After ``aclose`` the threads of the store's write pool end."""

    async def scenario() -> set:
        async with AsyncSessionStore(SessionStore(SQLiteBackend(tmp_path / "state.db"))) as astore:
            lookup = await astore.get_or_create(_chat(1))
            await astore.append(lookup.session_id, Message(role="user", content="hi"))
            pool = astore._writes._pool
            assert pool is not None
        assert astore._writes._pool is None
        return set(pool._threads)

    threads = asyncio.run(scenario())
    assert threads
    for thread in threads:
        thread.join(WAIT)
    assert not any(thread.is_alive() for thread in threads)
