"""The first turn of a process loads only what a turn needs (issue 39, item 5).

Structural checks in a fresh interpreter, no timing: the figures come from
``benchmarks/import_time.py``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

FIRST_TURN = """
import sys, tempfile
from hermes_sessions import Message, SessionSource, SessionStore
with tempfile.TemporaryDirectory() as home:
    with SessionStore.open(home) as store:
        source = SessionSource(platform="telegram", chat_id="1", user_id="1")
        lookup = store.get_or_create(source)
        store.append(
            lookup.session_id,
            Message(role="user", content="hello", platform_message_id="1"),
            Message(role="assistant", content="hi"),
        )
        assert store.seen(lookup.session_id, "1") is not None
        assert [m.content for m in store.tail(lookup.session_id, 40)] == ["hello", "hi"]
        again = store.get_or_create(source)
        assert again.session_id == lookup.session_id
print(sorted(name for name in sys.modules if name.split(".")[0] == "cattrs"
             or name.startswith("hermes_sessions.text.")))
"""


def test_a_first_turn_loads_neither_cattrs_nor_the_search_engine():
    """Open, route, append, check a redelivery, read the window: no cattrs, no query parser."""
    out = subprocess.run(
        [sys.executable, "-c", FIRST_TURN], check=True, capture_output=True, text=True
    ).stdout.strip()
    loaded = ["hermes_sessions.text._searchable", "hermes_sessions.text._tokens"]
    assert out == repr([*loaded, "hermes_sessions.text._width"])


def test_the_search_side_of_text_loads_on_first_access():
    """A search name of ``text`` is there when asked for, and stays loaded."""
    code = (
        "import sys; from hermes_sessions import text; "
        "assert 'hermes_sessions.text._query' not in sys.modules; "
        "q = text.parse_query('docker'); "
        "assert 'hermes_sessions.text._query' in sys.modules; "
        "assert text.parse_query is sys.modules['hermes_sessions.text._query'].parse_query; "
        "assert 'parse_query' in dir(text)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unknown_text_names_raise_attribute_error():
    """``text`` has no names beyond its own."""
    from hermes_sessions import text  # noqa: PLC0415

    with pytest.raises(AttributeError, match="nothing_here"):
        _ = text.nothing_here
