"""ForwardingBackend: every protocol method written out, abilities only where the inner has them."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

import attrs
import pytest

from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.backends.sqlite import SQLiteBackend
from hermes_sessions.forwarding import ForwardingBackend
from hermes_sessions.models import SessionRecord
from hermes_sessions.protocols import (
    Backend,
    RoutingIndex,
    StateStore,
    SupportsCheck,
    SupportsReindex,
    SupportsScrub,
    SupportsSearch,
    SupportsStateScopes,
    SupportsWriteBatches,
    TranscriptStore,
)
from hermes_sessions.testing import BackendContract

if TYPE_CHECKING:
    from pathlib import Path

    from hermes_sessions.checks import CheckReport

ABILITIES = [
    SupportsCheck,
    SupportsReindex,
    SupportsScrub,
    SupportsSearch,
    SupportsStateScopes,
    SupportsWriteBatches,
]
NOW = datetime(2026, 1, 2, tzinfo=UTC)


def _protocol_methods() -> set[str]:
    names: set[str] = set()
    for protocol in (RoutingIndex, TranscriptStore, StateStore, Backend):
        names |= {
            name
            for name, value in vars(protocol).items()
            if inspect.isfunction(value) and (not name.startswith("_") or name == "__exit__")
        }
    return names


def test_every_protocol_method_is_written_out():
    """The base defines each method of ``Backend`` itself: none is found by ``__getattr__``."""
    defined = {name for klass in ForwardingBackend.__mro__ for name in vars(klass)}
    assert _protocol_methods() <= defined
    assert "__getattr__" not in defined


def test_a_bare_wrapper_is_a_backend():
    """The base alone satisfies the protocol (runtime check; mypy checks the signatures)."""
    assert isinstance(ForwardingBackend(InMemoryBackend()), Backend)


@pytest.mark.parametrize("ability", ABILITIES, ids=lambda a: a.__name__)
def test_abilities_are_those_of_inner(ability, tmp_path):
    """Over SQLite (every ability) and in-memory (few), ``isinstance`` tells the inner's truth."""
    for inner in (InMemoryBackend(), SQLiteBackend(tmp_path / "state.db")):
        with ForwardingBackend(inner) as wrapper:
            assert isinstance(wrapper, ability) == isinstance(inner, ability), inner


def test_the_class_keeps_the_wrappers_name_and_is_cached(tmp_path):
    """One class per combination of abilities, a subclass of the wrapper with its name."""

    class Audited(ForwardingBackend[Backend]):
        pass

    with (
        Audited(SQLiteBackend(tmp_path / "a.db")) as first,
        Audited(SQLiteBackend(tmp_path / "b.db")) as second,
    ):
        assert type(first) is type(second)
        assert type(first).__name__ == "Audited"
        assert isinstance(first, Audited)
        assert type(first) is not Audited  # Audited plus the mixins of SQLite's abilities
    assert type(Audited(InMemoryBackend())) is not Audited  # in-memory searches and checks


def test_calls_reach_inner():
    """A call on the wrapper is the same call on ``inner``."""
    inner = InMemoryBackend()
    wrapper = ForwardingBackend(inner)
    record = SessionRecord(id="s1", source="cli", started_at=NOW)

    wrapper.create_session(record)
    assert inner.get_session("s1") is not None
    assert wrapper.get_session("s1") == inner.get_session("s1")
    assert wrapper.capabilities() == inner.capabilities()
    wrapper.close()
    assert wrapper.inner is inner


def test_a_wrapper_replaces_or_drops_an_ability(tmp_path):
    """``forwarded`` decides: a replaced mixin runs instead, a left-out ability is not claimed."""

    class Flagged:
        __slots__ = ()
        inner: Backend

        def check(self) -> CheckReport:
            report = cast("SupportsCheck", self.inner).check()
            return attrs.evolve(report, problems=(*report.problems, "flagged"))

    class Narrow(ForwardingBackend[Backend]):
        forwarded = ((SupportsCheck, Flagged),)

    with Narrow(SQLiteBackend(tmp_path / "state.db")) as narrow:
        assert isinstance(narrow, SupportsCheck)
        assert isinstance(narrow, Flagged)
        assert narrow.check().problems[-1] == "flagged"
        assert not isinstance(narrow, SupportsScrub)
        assert not isinstance(narrow, SupportsSearch)


class TestForwardingBackend(BackendContract):
    """A bare wrapper is transparent: it passes the whole suite over the in-memory backend."""

    def make_backend(self, directory: Path) -> ForwardingBackend[Backend]:
        """A wrapper that overrides nothing."""
        del directory
        return ForwardingBackend(InMemoryBackend())
