"""SIGKILL during group commits on SQLite: no acknowledged turn is lost, none is half-stored.

A worker is forked that runs turns from four threads on one store (so the writes that queue
during a commit share the next one), writing each turn's tag to a pipe once its append
returned, and the size of every batch it committed. It is killed 20 times in all: just before a
batch's ``COMMIT``, just after it (before the batch's callers hear of it), and at random moments.
After each kill the store is opened again and checked with the suite's invariants.
"""

from __future__ import annotations

import os
import threading

from reliability_support import TURNS, kill_batched_writers, open_store, turn

from hermes_sessions.backends.sqlite import _connections as connections

THREADS = 4


def _work(home, round_, ack: int) -> None:
    """The forked worker: four threads of turns; acknowledgements and batch sizes on ``ack``."""
    batch = connections.run_batch

    def reporting(connection, members):
        os.write(ack, f"batch {len(members)}\n".encode())
        batch(connection, members)

    connections.run_batch = reporting
    with open_store("sqlite", home) as store:

        def thread(number: int) -> None:
            for n in range(TURNS):
                tag = f"{round_}:{number}:{n}"
                turn(store, number + n, tag)
                os.write(ack, f"{tag}\n".encode())

        workers = [threading.Thread(target=thread, args=(t,)) for t in range(THREADS)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()


def test_kills_during_group_commits_lose_nothing_acknowledged(tmp_path, scale):
    """20 kills during batched commits of four threads: every acknowledged turn survives, once."""
    acknowledged, largest = kill_batched_writers(
        tmp_path, _work, seed="group-commit-kills", scale=scale
    )
    assert acknowledged, "no turn was ever acknowledged: the kills came too early to test"
    assert largest > 1, "no batch ever held two writers: the test did not exercise group commit"
