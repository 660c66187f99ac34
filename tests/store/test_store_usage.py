"""Usage in the same commit as the turn, and later usage (issue 12, item 4)."""

from __future__ import annotations

import pytest
from store_scenarios import DM, reply, user

from hermes_sessions import Usage


def test_a_turn_with_usage_is_one_append(store):
    """append(..., usage=) adds the model call's tokens and cost with the messages."""
    session_id = store.get_or_create(DM).session_id
    store.append(
        session_id,
        user("q", platform_message_id="c:1"),
        reply("a"),
        usage=Usage(input=120, output=30, cost_usd=0.01, model="gpt-x"),
    )
    record = store.session(session_id)
    assert (record.input_tokens, record.output_tokens, record.model) == (120, 30, "gpt-x")


def test_usage_that_arrives_later(store):
    """record_usage adds to the same counters."""
    session_id = store.get_or_create(DM).session_id
    store.append(session_id, user("q"), usage=Usage(input=1))
    record = store.record_usage(session_id, Usage(output=5, reasoning=2))
    assert (record.input_tokens, record.output_tokens, record.reasoning_tokens) == (1, 5, 2)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"input": -1}, ValueError),
        ({"output": 1.5}, TypeError),
        ({"cost_usd": float("nan")}, ValueError),
    ],
)
def test_usage_refuses_odd_values(fields, error):
    """Counters are non-negative ints; the cost is a finite non-negative number."""
    with pytest.raises(error):
        Usage(**fields)
