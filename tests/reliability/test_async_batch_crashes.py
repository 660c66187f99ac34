"""SIGKILL during the async store's write batches on SQLite: nothing acknowledged is lost.

A worker is forked that runs turns from eight chats (asyncio tasks) on one ``AsyncSessionStore``,
so their appends queue for the writer thread and are committed as batches
(``SQLiteBackend.write_batch``), writing each turn's tag to a pipe once its append returned, and
the size of every batch. It is killed 20 times in all: just before a batch's ``COMMIT``, just
after it (before the batch's callers hear of it), and at random moments. After each kill the
store is opened again and checked with the suite's invariants: every acknowledged turn is
stored once, and no turn is half-stored.
"""

from __future__ import annotations

import asyncio
import os

from reliability_support import TURNS, kill_batched_writers, open_store, source

from hermes_sessions import Message
from hermes_sessions.aio import AsyncSessionStore
from hermes_sessions.backends.sqlite import _batches

CHATS = 8


def _work(home, round_, ack: int) -> None:
    """The forked worker: eight chats of turns; acknowledgements and batch sizes on ``ack``."""
    run_calls = _batches._run_calls

    def reporting(calls, outcomes, connection):
        os.write(ack, f"batch {len(calls)}\n".encode())
        run_calls(calls, outcomes, connection)

    _batches._run_calls = reporting

    async def chat(astore: AsyncSessionStore, number: int) -> None:
        for n in range(TURNS):
            tag = f"{round_}:{number}:{n}"
            async with astore.turn(source(number + n)) as turn:
                await astore.append(
                    turn.session_id,
                    Message(role="user", content=f"q {tag}", platform_message_id=tag),
                    Message(role="assistant", content=f"a {tag}"),
                )
            os.write(ack, f"{tag}\n".encode())

    async def main() -> None:
        async with AsyncSessionStore(open_store("sqlite", home)) as astore:
            await asyncio.gather(*(chat(astore, c) for c in range(CHATS)))

    asyncio.run(main())


def test_kills_during_async_write_batches_lose_nothing_acknowledged(tmp_path, scale):
    """20 kills during the writer's batched commits: every acknowledged turn survives, once."""
    acknowledged, largest = kill_batched_writers(
        tmp_path, _work, seed="async-batch-kills", scale=scale
    )
    assert acknowledged, "no turn was ever acknowledged: the kills came too early to test"
    assert largest > 1, "no batch ever held two writes: the test did not exercise the writer"
