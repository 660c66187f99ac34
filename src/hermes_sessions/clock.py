"""The real clock.

Everything that needs the time takes a clock, so tests can inject a fake one
(:class:`hermes_sessions.testing.FrozenClock`); see :class:`hermes_sessions.protocols.Clock`.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["SystemClock"]


class SystemClock:
    """The real clock, in UTC.

    .. versionadded:: 0.1.0
    """

    def now(self) -> datetime:
        """The current time, aware, in UTC."""
        return datetime.now(UTC)

    def __repr__(self) -> str:
        return "SystemClock()"
