"""Tools for testing code built on hermes-sessions, and backends written for it.

* :class:`BackendContract` — the conformance suite. Subclass it in a pytest module and implement
  ``make_backend(directory)``; every guarantee of the backend protocols runs as a test against
  your backend (tests that need a capability your backend does not declare are skipped)::

      from hermes_sessions.testing import BackendContract


      class TestMyBackend(BackendContract):
          def make_backend(self, directory):
              return MyBackend(directory)

* :class:`FrozenClock` — a clock that moves only when told to, for the store's ``clock=``.

This module needs pytest; importing ``hermes_sessions`` never imports it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs

from hermes_sessions.testing._durability import DurabilityContract
from hermes_sessions.testing._index import IndexContract
from hermes_sessions.testing._messages import AppendContract, ReadContract, RewriteContract
from hermes_sessions.testing._plans import PlanContract
from hermes_sessions.testing._search import SearchContract
from hermes_sessions.testing._sessions import ListingContract, SessionContract

__all__ = ["BackendContract", "FrozenClock"]


class BackendContract(
    IndexContract,
    SessionContract,
    ListingContract,
    AppendContract,
    ReadContract,
    RewriteContract,
    PlanContract,
    SearchContract,
    DurabilityContract,
):
    """The conformance suite for storage backends; subclass it and implement ``make_backend``.

    .. versionadded:: 0.1.0
    """


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
