"""Rules every backend applies the same way: the size of a message and ``max_message_bytes``."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_sessions.backends import InMemoryBackend, JSONLBackend, SQLiteBackend
from hermes_sessions.backends.rules import check_message_sizes, message_size
from hermes_sessions.exceptions import MessageTooLargeError
from hermes_sessions.models import Message
from hermes_sessions.testing._support import T0, say, seed
from pg_support import open_pg, requires_pg

BACKENDS = {
    "memory": lambda directory, **options: InMemoryBackend(**options),
    "sqlite": lambda directory, **options: SQLiteBackend(directory / "state.db", **options),
    "jsonl": JSONLBackend,
    "postgres": pytest.param(open_pg, marks=requires_pg),
}


def test_the_size_is_the_stored_json_in_utf8_bytes():
    """A message's size is its JSON form without id, session and active flag, UTF-8 encoded."""
    message = Message(role="user", content="飞书 ok", id=7, session_id="s1", active=False)
    assert message_size(message) == len(b'{"role":"user","content":"\xe9\xa3\x9e\xe4\xb9\xa6 ok"}')


@given(
    st.text(max_size=60),
    st.dictionaries(st.text(max_size=5), st.text(max_size=20), max_size=3),
)
def test_the_limit_refuses_exactly_what_is_over_it(content, extra):
    """A message of n bytes passes a limit of n and is refused by a limit of n - 1."""
    extra = {f"x_{key}": value for key, value in extra.items()}
    message = Message(role="user", content=content, timestamp=T0, extra=extra)
    size = len(
        json.dumps(message_dict_for(message), ensure_ascii=False, separators=(",", ":")).encode()
    )
    assert message_size(message) == size
    check_message_sizes([message], size)
    with pytest.raises(MessageTooLargeError) as info:
        check_message_sizes([message], size - 1)
    assert (info.value.size, info.value.limit) == (size, size - 1)


def message_dict_for(message):
    """The documented JSON form of a new message, built by hand."""
    out = {"role": message.role}
    if message.content is not None:
        out["content"] = message.content
    if message.timestamp is not None:
        out["timestamp"] = "2026-05-01T09:00:00Z"
    out.update(message.extra)
    return out


def test_no_limit_checks_nothing():
    """``None`` turns the check off."""
    check_message_sizes([say("x" * 100)], None)


@pytest.mark.parametrize("make", BACKENDS.values(), ids=BACKENDS.keys())
def test_every_backend_takes_the_option(tmp_path, make):
    """max_message_bytes is an option of every backend: a limit, or None for none."""
    with make(tmp_path / "small", max_message_bytes=100) as small:
        seed(small, "s1")
        small.append_messages("s1", [say("short")])
        with pytest.raises(MessageTooLargeError, match="max_message_bytes"):
            small.append_messages("s1", [say("long " * 20)])
        assert [m.content for m in small.get_messages("s1")] == ["short"]
    with make(tmp_path / "unlimited", max_message_bytes=None) as unlimited:
        seed(unlimited, "s1")
        unlimited.append_messages("s1", [say("long " * 20)])


@pytest.mark.parametrize("make", BACKENDS.values(), ids=BACKENDS.keys())
@pytest.mark.parametrize(
    ("value", "error"), [(0, ValueError), ("16M", TypeError), (True, TypeError)]
)
def test_a_bad_limit_is_refused(tmp_path, make, value, error):
    """A limit must be a number of bytes of at least 1, or None."""
    with pytest.raises(error, match="max_message_bytes"):
        make(tmp_path, max_message_bytes=value)
