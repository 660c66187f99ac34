"""SIGKILL during group commits on SQLite: no acknowledged turn is lost, none is half-stored.

A worker is forked that runs turns from four threads on one store (so the writes that queue
during a commit share the next one), writing each turn's tag to a pipe once its append
returned, and the size of every batch it committed. It is killed 20 times in all: just before a
batch's ``COMMIT``, just after it (before the batch's callers hear of it), and at random moments.
After each kill the store is opened again and checked with the suite's invariants.
"""

from __future__ import annotations

import os
import random
import threading

from reliability_support import TURNS, check_store, fork_and_kill, open_store, turn

from hermes_sessions.backends.sqlite import _connections as connections

THREADS = 4
KILLS = {"sqlite.before_commit": 7, "sqlite.after_commit": 7, None: 6}
"""Kills per crash point (``None``: at a random moment); 20 in all, × 20 with ``--stress``."""


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


def _round(home, round_, point, delay) -> tuple[set[str], int]:
    """Fork a worker and let it die; return the tags it acknowledged and its largest batch."""
    lines = fork_and_kill(
        lambda ack: _work(home, round_, ack),
        point=point,
        arm_after=2 + (round_ * 5) % 17,
        kill_after=delay,
    )
    sizes = [int(line.split()[1]) for line in lines if line.startswith("batch ")]
    return {line for line in lines if not line.startswith("batch ")}, max(sizes, default=0)


def test_kills_during_group_commits_lose_nothing_acknowledged(tmp_path, scale):
    """20 kills during batched commits of four threads: every acknowledged turn survives, once."""
    chance = random.Random("group-commit-kills")  # noqa: S311  # test data, not secrets
    acknowledged: set[str] = set()
    largest = 0
    round_ = 0
    for point, kills in KILLS.items():
        for _ in range(kills * scale):
            delay = chance.uniform(0.05, 0.4)
            tags, biggest = _round(tmp_path, round_, point, delay)
            acknowledged |= tags
            largest = max(largest, biggest)
            round_ += 1
            with open_store("sqlite", tmp_path) as store:
                check_store(store, acknowledged)
    assert acknowledged, "no turn was ever acknowledged: the kills came too early to test"
    assert largest > 1, "no batch ever held two writers: the test did not exercise group commit"
