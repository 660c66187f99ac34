"""Tools for testing code built on hermes-sessions, and backends written for it.

* :class:`BackendContract` — the conformance suite. Subclass it in a pytest module and implement
  ``make_backend(directory)``; every guarantee of the backend protocols runs as a test against
  your backend (tests that need a capability your backend does not declare are skipped)::

      from hermes_sessions.testing import BackendContract


      class TestMyBackend(BackendContract):
          def make_backend(self, directory):
              return MyBackend(directory)

* :class:`FrozenClock` — a clock that moves only when told to, for the store's ``clock=``.

This module needs pytest, which ``pip install 'hermes-sessions[testing]'`` brings; without it,
importing this module raises :class:`~hermes_sessions.exceptions.MissingDependencyError` (an
``ImportError``) naming that extra. Importing ``hermes_sessions`` never imports pytest.
"""

from __future__ import annotations

from hermes_sessions.exceptions import MissingDependencyError

try:
    import pytest
except ImportError as error:
    raise MissingDependencyError(
        "pytest", extra="testing", feature="hermes_sessions.testing"
    ) from error

from hermes_sessions.clock import FrozenClock
from hermes_sessions.testing._check import CheckContract
from hermes_sessions.testing._contention import ContentionContract
from hermes_sessions.testing._durability import DurabilityContract
from hermes_sessions.testing._ledger import LedgerContract
from hermes_sessions.testing._messages import AppendContract, ReadContract, RewriteContract
from hermes_sessions.testing._natural import NaturalSearchContract
from hermes_sessions.testing._plans import PlanContract
from hermes_sessions.testing._redelivery import (
    AfterResetContract,
    RedeliveryContract,
    UsageContract,
)
from hermes_sessions.testing._rekeying import KeyRewriteContract
from hermes_sessions.testing._routing import RoutingContract
from hermes_sessions.testing._search import SearchContract
from hermes_sessions.testing._sessions import ListingContract, SessionContract
from hermes_sessions.testing._state import StateContract
from hermes_sessions.testing._titles import TitleContract
from hermes_sessions.testing._values import ValueContract
from hermes_sessions.testing._width import WidthContract

__all__ = ["BackendContract", "FrozenClock"]

del pytest  # imported above only to check that it is installed


class BackendContract(
    RoutingContract,
    SessionContract,
    ListingContract,
    AppendContract,
    RedeliveryContract,
    AfterResetContract,
    UsageContract,
    StateContract,
    ReadContract,
    RewriteContract,
    PlanContract,
    KeyRewriteContract,
    SearchContract,
    NaturalSearchContract,
    ValueContract,
    WidthContract,
    DurabilityContract,
    CheckContract,
    ContentionContract,
    TitleContract,
    LedgerContract,
):
    """The conformance suite for storage backends; subclass it and implement ``make_backend``.

    .. versionadded:: 0.1.0
    """
