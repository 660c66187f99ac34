"""The library's one compact JSON encoder."""

from __future__ import annotations

import json

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
