"""SIGKILL during writes, at named steps and at random moments: nothing acknowledged is lost.

A worker is forked from this process (already past its imports, so a kill costs milliseconds),
opens the store, arms a crash point of :mod:`hermes_sessions.crashpoints` (or none, for a kill
at a random moment) and runs turns and resets on three keys, writing each turn's tag to a
pipe once the store acknowledged it. After the kill the store is opened again and checked:
every acknowledged turn is there exactly once, no turn is half-stored, each key has one live
session and the counters match the transcripts.
"""

from __future__ import annotations

import os
import random
import signal
import time
from typing import TYPE_CHECKING

import pytest
from reliability_support import KINDS, check_store, open_store, source, turn

from hermes_sessions import crashpoints

if TYPE_CHECKING:
    from pathlib import Path

KILLS = 10
"""Kills per backend and crash point (and at random moments) in CI; ``--stress`` × 20."""
TURNS = 40

POINTS = {
    "sqlite": ("sqlite.before_commit", "sqlite.after_commit"),
    "jsonl": ("jsonl.after_journal", "jsonl.after_files"),
    "postgres": ("postgres.before_commit", "postgres.after_commit"),
}
CASES = [
    pytest.param(kind, point, id=point, marks=getattr(kind, "marks", ()))
    for kind in KINDS
    for point in POINTS[getattr(kind, "values", (kind,))[0]]
]


def work(kind: str, home: Path, round_: int, ack: int) -> None:
    """The forked worker: turns (and a reset every fifth turn), each acknowledged on ``ack``."""
    with open_store(kind, home) as store:
        for n in range(TURNS):
            tag = f"{round_}:{n}"
            if n % 5 == 4:
                store.reset(store.key_for(source(n)), source=source(n))
            turn(store, n, tag)
            os.write(ack, f"{tag}\n".encode())


def run_round(
    kind: str, home: Path, round_: int, *, point: str | None, kill_after: float
) -> set[str]:
    """Fork a worker, let it die (at ``point``, or by our SIGKILL); return what it acknowledged."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: never returns into pytest
        os.close(read_end)
        code = 3
        try:
            if point is not None:
                crashpoints.arm(point, after=1 + (round_ * 7) % 23)
            work(kind, home, round_, write_end)
            code = 4  # ran to the end: the point was never reached often enough
        finally:
            os._exit(code)
    os.close(write_end)
    if point is None:
        time.sleep(kill_after)
        os.kill(pid, signal.SIGKILL)
    with os.fdopen(read_end, "rb") as pipe:
        acknowledged = {line.decode() for line in pipe.read().splitlines()}
    _, status = os.waitpid(pid, 0)
    if point is not None or os.WIFSIGNALED(status):
        assert os.WIFSIGNALED(status), f"the worker exited with {os.waitstatus_to_exitcode(status)}"
        assert os.WTERMSIG(status) == signal.SIGKILL
    return acknowledged


@pytest.mark.parametrize(("kind", "point"), CASES)
def test_kill_at_a_crash_point_loses_nothing_acknowledged(kind, point, tmp_path, scale):
    """At each named step of a write, 10 kills: every acknowledged turn survives, once."""
    acknowledged: set[str] = set()
    for round_ in range(KILLS * scale):
        acknowledged |= run_round(kind, tmp_path, round_, point=point, kill_after=0)
        with open_store(kind, tmp_path) as store:
            check_store(store, acknowledged)
    assert acknowledged, "no turn was ever acknowledged: the kills came too early to test"


@pytest.mark.parametrize("kind", KINDS)
def test_kill_at_random_moments_loses_nothing_acknowledged(kind, tmp_path, scale):
    """10 kills at random moments of a run of turns and resets: the same invariants hold."""
    chance = random.Random(f"{kind}-random-kills")  # noqa: S311  # test data, not secrets
    acknowledged: set[str] = set()
    for round_ in range(KILLS * scale):
        delay = chance.uniform(0.02, 0.25)
        acknowledged |= run_round(kind, tmp_path, round_, point=None, kill_after=delay)
        with open_store(kind, tmp_path) as store:
            check_store(store, acknowledged)
    assert acknowledged, "no turn was ever acknowledged: the kills came too early to test"
