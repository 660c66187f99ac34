"""Clocks: the real one, and a frozen one for tests and simulations.

Everything that needs the time takes a clock (anything with ``now()``; see
:class:`hermes_sessions.protocols.Clock`), so tests and demos can inject :class:`FrozenClock`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs

from hermes_sessions.exceptions import InvalidArgumentError, NaiveDatetimeError

__all__ = ["FrozenClock", "SystemClock", "require_aware"]


def require_aware(value: object, name: str) -> datetime:
    """Return ``value`` if it is an aware datetime; else ``TypeError`` or ``NaiveDatetimeError``.

    .. versionadded:: 0.1.0
    """
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise NaiveDatetimeError(name)
    return value


class SystemClock:
    """The real clock, in UTC.

    .. versionadded:: 0.1.0
    """

    def now(self) -> datetime:
        """The current time, aware, in UTC."""
        return datetime.now(UTC)

    def __repr__(self) -> str:
        return "SystemClock()"


def _aware(_instance: object, attribute: attrs.Attribute[datetime], value: datetime) -> None:
    require_aware(value, f"FrozenClock {attribute.name}")


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
            raise InvalidArgumentError("a clock only moves forward; use set() to jump")
        self.current += step
        return self.current

    def set(self, moment: datetime) -> datetime:
        """Jump to ``moment`` (an aware datetime); return it."""
        require_aware(moment, "FrozenClock.set(moment)")
        self.current = moment
        return self.current
