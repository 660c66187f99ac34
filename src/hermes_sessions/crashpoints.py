"""Named steps inside the backends' writes where a test can kill the process (test-only).

A persistent backend marks the steps of a write between which a crash leaves the data in a
different state (before its commit, after it, between the journal record and the files it
announces). :func:`reached` does nothing unless a test armed that point with :func:`arm` in
the process (or through :data:`ENVIRONMENT` before the process started); then the process
kills itself with ``SIGKILL`` at the chosen arrival, as a power cut or the OOM killer would: no
``finally`` block, no ``atexit`` handler and no buffered write runs. The reliability suite
(``tests/reliability/``) forks a worker, arms a point, and checks after the kill that nothing
the worker saw acknowledged is lost and that nothing is half-stored.

When no point is armed, :func:`reached` is one comparison, so the marks stay in production
code at no measurable cost (one call per commit, next to an ``fsync``).

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import os
import signal
from typing import Final

import attrs

from hermes_sessions.exceptions import InvalidArgumentError

__all__ = ["ENVIRONMENT", "POINTS", "arm", "armed", "disarm", "reached"]

POINTS: Final = (
    "sqlite.before_commit",
    "sqlite.after_commit",
    "jsonl.after_journal",
    "jsonl.after_files",
    "postgres.before_commit",
    "postgres.after_commit",
)
"""Every point a backend marks, as ``<backend>.<step>``."""

ENVIRONMENT: Final = "HERMES_SESSIONS_CRASH_AT"
"""``point`` or ``point:n`` arms the point for a process started with it (for spawned workers)."""


@attrs.define
class _Switch:
    """The armed point of this process and how many arrivals remain before the kill."""

    point: str | None = None
    countdown: int = 0


_SWITCH: Final = _Switch()


def arm(point: str, *, after: int = 1) -> None:
    """Kill this process the ``after``-th time ``point`` is reached (from now on)."""
    if point not in POINTS:
        known = ", ".join(POINTS)
        raise InvalidArgumentError(f"unknown crash point {point!r}; use one of: {known}")
    if after < 1:
        raise InvalidArgumentError(f"after must be at least 1, not {after}")
    _SWITCH.point, _SWITCH.countdown = point, after


def disarm() -> None:
    """Forget the armed point: :func:`reached` does nothing again."""
    _SWITCH.point = None


def armed() -> str | None:
    """The armed point, if any."""
    return _SWITCH.point


def reached(point: str) -> None:
    """Mark that a write reached ``point``; kills the process if that point is armed and due."""
    if _SWITCH.point != point:
        return
    _SWITCH.countdown -= 1
    if _SWITCH.countdown <= 0:
        os.kill(os.getpid(), signal.SIGKILL)


def _from_environment() -> None:
    value = os.environ.get(ENVIRONMENT)
    if value:
        point, _, count = value.partition(":")
        arm(point, after=int(count) if count else 1)


_from_environment()
