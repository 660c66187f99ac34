"""Session ids: generation and the validator that keeps ids inside the data directory."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_sessions import InvalidIdError, new_session_id, validate_session_id


def test_new_ids_follow_the_hermes_shape_in_utc():
    """New ids are YYYYMMDD_HHMMSS_ + 8 hex characters, in UTC."""
    shanghai = timezone(timedelta(hours=8))
    session_id = new_session_id(datetime(2026, 5, 1, 10, 49, 22, tzinfo=shanghai))
    assert re.fullmatch(r"20260501_024922_[0-9a-f]{8}", session_id)
    assert validate_session_id(session_id) == session_id


def test_new_ids_are_unique():
    """Two ids made in the same second differ."""
    now = datetime.now(UTC)
    assert len({new_session_id(now) for _ in range(1000)}) == 1000


def test_new_id_needs_an_aware_datetime():
    """A naive datetime is refused."""
    with pytest.raises(ValueError, match="aware"):
        new_session_id(datetime(2026, 1, 1))  # noqa: DTZ001


@pytest.mark.parametrize(
    "session_id",
    ["20260509_211000_1fc499", "a", "A-b_c.d", "x" * 128, "cron_job.v2", "-starts-dash"],
)
def test_valid_ids(session_id):
    """Letters, digits, ``_ . -`` up to 128 characters are valid, imported ids included."""
    assert validate_session_id(session_id) == session_id


@pytest.mark.parametrize(
    "session_id",
    [
        "",
        "x" * 129,
        "../etc/passwd",
        "..",
        ".",
        ".hidden",
        "a..b",
        "a/b",
        "a\\b",
        "a b",
        "a\x00b",
        "a\n",
        "café",
        "C:",
        "\uff5e",  # fullwidth tilde
    ],
)
def test_invalid_ids(session_id):
    """Anything that could name another path (or is not plain ASCII) is an InvalidIdError."""
    with pytest.raises(InvalidIdError) as info:
        validate_session_id(session_id)
    assert isinstance(info.value, ValueError)
    assert info.value.session_id == session_id


def test_non_string_ids_are_invalid():
    """Ids are strings; anything else is an InvalidIdError."""
    with pytest.raises(InvalidIdError, match="expected a string"):
        validate_session_id(12345)


def test_long_ids_are_truncated_in_the_message():
    """The error message stays readable for huge inputs."""
    with pytest.raises(InvalidIdError) as info:
        validate_session_id("/" * 10_000)
    assert len(str(info.value)) < 300


@given(st.text(max_size=200))
def test_a_valid_id_never_escapes_a_directory(candidate):
    """Any id that validates is a single plain file-name component."""
    try:
        validate_session_id(candidate)
    except InvalidIdError:
        return
    assert "/" not in candidate
    assert "\\" not in candidate
    assert ".." not in candidate
    assert not candidate.startswith(".")
    assert candidate.isascii()
