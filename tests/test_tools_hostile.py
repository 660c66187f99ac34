"""The tool handlers return an error dict for any argument whatever, never raise (issue 18)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_sessions import SessionSource, SessionStore
from hermes_sessions.backends import InMemoryBackend
from hermes_sessions.memory import MemoryStore
from hermes_sessions.tools import SearchToolContext, handle_memory, handle_session_search

LIN = SessionSource(platform="feishu", chat_id="ou_lin", user_id="ou_lin")
NESTED = "[" * 1000 + "]" * 1000
NAMES = ["action", "target", "content", "old_text", "query", "session_id", "message_id", "limit",
         "role_filter", "around", "window"]  # fmt: skip

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**5000), max_value=10**5000)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(NAMES) | st.text(max_size=5), inner, max_size=5)
    ),
    max_leaves=12,
)
hostile = (
    json_values
    | st.dictionaries(st.sampled_from(NAMES), json_values, max_size=6)
    | st.binary(max_size=40)
    | st.text(max_size=40)
    | st.sampled_from([NESTED, NESTED.encode(), "9" * 5000, "NaN", "-Infinity", '{"a": NaN}'])
    | st.builds(lambda n: {"action": "add", "target": "memory", "limit": "9" * n}, st.just(5000))
)


@pytest.fixture(scope="module")
def handlers(tmp_path_factory):
    """A memory handler and a search handler on small stores."""
    memory = MemoryStore(tmp_path_factory.mktemp("memories"))
    store = SessionStore(InMemoryBackend())
    session_id = store.get_or_create(LIN).session_id
    context = SearchToolContext(store=store, requester=LIN, current_key=store.key_for(LIN))
    return memory, context, session_id


def _check(result):
    assert isinstance(result, dict)
    json.dumps(result, allow_nan=False)  # JSON-serialisable, without NaN
    assert isinstance(result["success"], bool)
    if not result["success"]:
        assert isinstance(result["error"], str)
        assert result["error"]


@pytest.mark.parametrize(
    "arguments",
    [
        NESTED,
        NESTED.encode(),
        json.loads("[" * 500 + "]" * 500),
        {"query": json.loads("[" * 500 + "]" * 500)},
        "9" * 5000,
        {"limit": "9" * 5000, "query": "x"},
        {"message_id": "9" * 5000, "session_id": "s"},
        {"limit": math.nan, "query": "x"},
        {"limit": math.inf, "query": "x"},
        b"\xff\xfe",
        42,
        ["action", "add"],
    ],
    ids=lambda value: type(value).__name__,
)
def test_known_hostile_arguments_give_error_dicts(handlers, arguments):
    """Deep nesting, huge integers, NaN, bytes and non-objects give an error dict, not a raise."""
    memory, context, _ = handlers
    _check(handle_memory(memory, arguments))
    _check(handle_session_search(context, arguments))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(arguments=hostile)
def test_any_json_like_value_gives_a_result_dict(handlers, arguments):
    """Whatever the arguments (JSON text, bytes, any JSON-like value), both return a dict."""
    memory, context, session_id = handlers
    _check(handle_memory(memory, arguments))
    _check(handle_session_search(context, arguments))
    if isinstance(arguments, dict):
        _check(handle_session_search(context, {**arguments, "session_id": session_id}))


class Exploding(Mapping):
    """A mapping whose every read raises, as a stand-in for any object a host might pass."""

    def __getitem__(self, key):
        """Refuse."""
        raise ValueError(f"cannot read {key!r}")

    def __iter__(self):
        """Nothing to iterate."""
        return iter(())

    def __len__(self):
        """Empty."""
        return 0


def test_an_object_that_raises_on_reading_gives_an_error_dict(handlers):
    """Even a mapping that raises when read gives an invalid_arguments dict."""
    memory, context, _ = handlers
    for result in (handle_memory(memory, Exploding()), handle_session_search(context, Exploding())):
        _check(result)
        assert result["code"] == "invalid_arguments"
