"""The shared option words and validators: one way to refuse a bad timeout, count or size."""

from __future__ import annotations

import math

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions import options


@attrs.define(kw_only=True)
class Configured:
    """A class using every shared validator, as backends and stores do."""

    durability: options.Durability = attrs.field(default="full", validator=options.durability)
    limit: int = attrs.field(default=1, validator=options.positive_int)
    retries: int = attrs.field(default=0, validator=options.non_negative_int)
    wait: float = attrs.field(default=0, validator=options.seconds)
    timeout: float = attrs.field(default=1.0, validator=options.positive_seconds)
    size: int | None = attrs.field(default=None, validator=options.optional_size)


def test_defaults_and_edges_are_accepted():
    """The smallest accepted value of each option, and None for a size, pass."""
    configured = Configured(
        durability="normal", limit=1, retries=0, wait=0, timeout=0.001, size=None
    )
    assert configured.size is None
    assert Configured(size=1).size == 1


def test_durabilities_are_the_literal_values():
    """DURABILITIES lists exactly the words of the Durability type."""
    assert options.DURABILITIES == ("full", "normal")


@pytest.mark.parametrize(
    ("name", "value", "error", "words"),
    [
        ("durability", "fast", ValueError, "'full' or 'normal'"),
        ("limit", 0, ValueError, "at least 1"),
        ("limit", 2.0, TypeError, "must be an int"),
        ("limit", True, TypeError, "must be an int"),
        ("retries", -1, ValueError, "0 or more"),
        ("retries", False, TypeError, "must be an int"),
        ("wait", -0.5, ValueError, "0 or more seconds"),
        ("wait", math.nan, ValueError, "0 or more seconds"),
        ("wait", "5", TypeError, "number of seconds"),
        ("wait", True, TypeError, "number of seconds"),
        ("timeout", 0, ValueError, "more than 0 seconds"),
        ("timeout", math.nan, ValueError, "more than 0 seconds"),
        ("timeout", None, TypeError, "number of seconds"),
        ("size", 0, ValueError, "at least 1 byte or None"),
        ("size", 1.5, TypeError, "number of bytes or None"),
        ("size", True, TypeError, "number of bytes or None"),
    ],
)
def test_bad_values_are_refused_with_the_option_named(name, value, error, words):
    """A wrong type is a TypeError, a value out of range a ValueError; both name the option."""
    with pytest.raises(error, match=name) as info:
        Configured(**{name: value})
    assert words in str(info.value)


@settings(deadline=None)
@given(st.integers() | st.floats(allow_nan=True))
def test_seconds_accept_exactly_the_non_negative_numbers(value):
    """``seconds`` accepts a number if and only if it is 0 or more (NaN is refused)."""
    try:
        Configured(wait=value)
    except ValueError:
        assert not value >= 0
    else:
        assert value >= 0


@settings(deadline=None)
@given(st.integers())
def test_counts_split_at_their_lower_bound(value):
    """``positive_int`` starts at 1 and ``non_negative_int`` at 0, for every int."""
    for name, lowest in (("limit", 1), ("retries", 0)):
        try:
            Configured(**{name: value})
        except ValueError:
            assert value < lowest
        else:
            assert value >= lowest
