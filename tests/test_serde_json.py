"""The library's one compact JSON encoder."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions.serde import compact_json

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)


def test_output_has_no_spaces_and_keeps_non_ascii_text():
    """Separators carry no spaces and CJK text is written as itself, not as escapes."""
    assert compact_json({"a": [1, "飞书"], "b": None}) == '{"a":[1,"飞书"],"b":null}'


@settings(deadline=None)
@given(JSON_VALUES)
def test_output_reads_back_as_the_same_value(value):
    """Whatever JSON-able value is encoded, json.loads gives it back."""
    assert json.loads(compact_json(value)) == value


def test_ascii_only_escapes_what_utf8_cannot_carry():
    """With ascii_only, CJK text and lone surrogates become escapes that read back the same."""
    value = {"text": "飞书\ud800"}
    encoded = compact_json(value, ascii_only=True)
    assert encoded.isascii()
    assert json.loads(encoded) == value


def test_finite_refuses_nan_and_infinity():
    """With finite, NaN and infinities raise ValueError; by default they are written."""
    for number in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(ValueError, match="JSON compliant"):
            compact_json([number], finite=True)
    assert compact_json([float("inf")]) == "[Infinity]"
