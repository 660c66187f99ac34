"""SIGKILL during writes, at named steps and at random moments: nothing acknowledged is lost.

A worker is forked from this process (already past its imports, so a kill costs milliseconds),
opens the store, arms a crash point of :mod:`hermes_sessions.crashpoints` (or none, for a kill
at a random moment) and runs turns and resets on three keys, writing each turn's tag to a
pipe once the store acknowledged it. After the kill the store is opened again and checked:
every acknowledged turn is there exactly once, no turn is half-stored, each key has one live
session and the counters match the transcripts.
"""

from __future__ import annotations

import random

import pytest
from reliability_support import KINDS, check_store, open_store, run_round

KILLS = 10
"""Kills per backend and crash point (and at random moments) in CI; ``--stress`` × 20."""

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
