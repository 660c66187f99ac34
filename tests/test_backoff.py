"""The one retry pause: jittered below a bound that doubles from BASE up to CAP."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions import backoff


@settings(deadline=None)
@given(attempt=st.integers(min_value=0, max_value=200), seed=st.integers())
def test_pause_stays_below_the_doubling_bound(attempt, seed):
    """Every pause lies between 0 and ``min(CAP, BASE * 2**attempt)``."""
    random.seed(seed)
    assert 0 <= backoff.pause(attempt) <= min(backoff.CAP, backoff.BASE * 2**attempt)


def test_pauses_spread_out_and_grow_with_attempts():
    """Pauses are random (writers spread out) and later attempts may wait longer."""
    random.seed(7)
    first = [backoff.pause(0) for _ in range(200)]
    later = [backoff.pause(10) for _ in range(200)]
    assert len(set(first)) > 100
    assert max(first) <= backoff.BASE < max(later) <= backoff.CAP
