"""Clocks: the real one, and a frozen one for tests and simulations.

Everything that needs the time takes a clock (anything with ``now()``; see
:class:`hermes_sessions.protocols.Clock`), so tests and demos can inject :class:`FrozenClock`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs

__all__ = ["FrozenClock", "SystemClock"]


class SystemClock:
    """The real clock, in UTC.

    .. versionadded:: 0.1.0
    """

    def now(self) -> datetime:
        """The current time, aware, in UTC."""
        return datetime.now(UTC)

    def __repr__(self) -> str:
        return "SystemClock()"


def _aware(_instance: object, _attribute: object, value: datetime) -> None:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("FrozenClock needs an aware datetime")


@attrs.define
class FrozenClock:
    """A clock for tests: it returns the same instant until moved.

    >>> clock = FrozenClock(datetime(2026, 5, 1, tzinfo=UTC))
    >>> clock.advance(minutes=90).isoformat()
    '2026-05-01T01:30:00+00:00'

    .. versionadded:: 0.1.0
    """

    current: datetime = attrs.field(
        factory=lambda: datetime(2026, 1, 1, tzinfo=UTC), validator=_aware
    )

    def now(self) -> datetime:
        """The frozen instant."""
        return self.current

    def advance(self, delta: timedelta | None = None, **kwargs: float) -> datetime:
        """Move forward by ``delta`` or by ``timedelta(**kwargs)``; return the new time."""
        step = delta if delta is not None else timedelta(**kwargs)
        if step < timedelta(0):
            raise ValueError("a clock only moves forward; use set() to jump")
        self.current += step
        return self.current

    def set(self, moment: datetime) -> datetime:
        """Jump to ``moment`` (an aware datetime); return it."""
        _aware(self, None, moment)
        self.current = moment
        return self.current
