"""The one retry pause: jittered and doubling, for every writer that lost a race and tries again.

A writer that lost a compare-and-swap race (the store), found SQLite busy, or had PostgreSQL
abort its transaction (serialization failure, deadlock, lock timeout) waits a random while
before its next attempt, so that writers colliding on one key or row spread out instead of
colliding again at once. :func:`pause` is that while: uniform between 0 and a bound that starts
at :data:`BASE` and doubles with each attempt, up to :data:`CAP`.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import random
from typing import Final

__all__ = ["BASE", "CAP", "pause"]

BASE: Final = 0.005
"""Seconds: the longest pause after the first failed attempt; it doubles with each further one."""
CAP: Final = 0.25
"""Seconds: the longest pause between two attempts."""


def pause(attempt: int) -> float:
    """Seconds to wait after the ``attempt``-th failed attempt in a row (0-based), jittered.

    .. versionadded:: 0.1.0
    """
    return random.uniform(0, min(CAP, BASE * 2**attempt))  # noqa: S311  # spreading, not secrecy
