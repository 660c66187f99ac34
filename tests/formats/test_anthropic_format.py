"""Anthropic requests convert to Messages and back exactly, and emit only schema keys."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions.formats import (
    from_anthropic,
    to_anthropic,
    to_openai_chat,
    to_openai_responses,
)
from hermes_sessions.formats.anthropic import unexpressed
from hermes_sessions.models import Message

# Shapes of Anthropic Messages request content, written from the documented schema.
texts = st.text(max_size=20)
ids = st.text(alphabet="abc123_", min_size=1, max_size=8)
cache = st.just({"type": "ephemeral"})
text_block = st.fixed_dictionaries(
    {"type": st.just("text"), "text": texts}, optional={"cache_control": cache}
)
image_block = st.fixed_dictionaries(
    {
        "type": st.just("image"),
        "source": st.just({"type": "base64", "media_type": "image/png", "data": "iVBORw=="})
        | st.just({"type": "url", "url": "https://example.com/a.png"}),
    }
)
tool_result = st.fixed_dictionaries(
    {"type": st.just("tool_result"), "tool_use_id": ids},
    optional={
        "content": texts | st.lists(text_block, max_size=2),
        "is_error": st.booleans(),
        "cache_control": cache,
    },
)
tool_use = st.fixed_dictionaries(
    {
        "type": st.just("tool_use"),
        "id": ids,
        "name": ids,
        "input": st.dictionaries(ids, st.integers() | texts, max_size=2),
    },
    optional={"cache_control": cache},
)
thinking = st.fixed_dictionaries({"type": st.just("thinking"), "thinking": texts, "signature": ids})
redacted = st.fixed_dictionaries({"type": st.just("redacted_thinking"), "data": ids})
user_content = (
    texts
    | st.lists(text_block | image_block, max_size=3)
    | st.tuples(
        st.lists(tool_result, min_size=1, max_size=3), st.lists(text_block, max_size=2)
    ).map(lambda pair: pair[0] + pair[1])
)
assistant_content = texts | st.tuples(
    st.lists(thinking | redacted, max_size=2),
    st.lists(text_block | tool_use, max_size=4),
).map(lambda pair: pair[0] + pair[1])
messages = st.lists(
    st.fixed_dictionaries({"role": st.just("user"), "content": user_content})
    | st.fixed_dictionaries({"role": st.just("assistant"), "content": assistant_content}),
    max_size=6,
)
systems = st.none() | texts | st.lists(text_block, min_size=1, max_size=2)


@settings(deadline=None, max_examples=400)
@given(messages, systems)
def test_vendor_to_messages_to_vendor_is_exact(vendor, system):
    """A schema-valid request comes back equal after a trip through Messages."""
    request = {"messages": vendor} if system is None else {"system": system, "messages": vendor}
    assert to_anthropic(from_anthropic(vendor, system=system)) == request


def test_tool_results_become_tool_messages_and_join_again():
    """Tool results split into tool messages, and rejoin the user message that carried them."""
    vendor = [
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "1", "is_error": True},
                {"type": "tool_result", "tool_use_id": "t2"},
                {"type": "text", "text": "and?"},
            ],
        }
    ]
    converted = from_anthropic(vendor)
    assert [(m.role, m.tool_call_id) for m in converted] == [
        ("tool", "t1"),
        ("tool", "t2"),
        ("user", None),
    ]
    assert converted[0].extra == {"is_error": True}
    assert to_anthropic(converted) == {"messages": vendor}


def test_tool_use_becomes_a_chat_shaped_call():
    """``input`` is carried as JSON ``arguments``; thinking becomes ``reasoning``."""
    vendor = [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "need weather", "signature": "sig"},
                {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "上海"}},
            ],
        }
    ]
    (message,) = from_anthropic(vendor)
    assert message.reasoning == "need weather"
    assert message.content is None
    (call,) = message.tool_calls
    assert json.loads(call["function"]["arguments"]) == {"city": "上海"}
    assert unexpressed(message) == []


def test_chat_shaped_messages_are_sent_as_blocks():
    """Text and calls become blocks, broken arguments are wrapped, results join one message."""
    calls = [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{oops"}},
        {"id": "b", "type": "function", "function": {"name": "g", "arguments": "[1]"}},
    ]
    request = to_anthropic(
        [
            Message(role="system", content="rules"),
            Message(role="developer", content=[{"type": "text", "text": "more"}]),
            Message(role="user", content=None),
            Message(role="assistant", content="let me see", tool_calls=calls, reasoning="x"),
            Message(role="tool", tool_call_id="a", content=[{"type": "text", "text": "1"}]),
            Message(role="tool", tool_call_id="b", content="2"),
            Message(role="user", content="thanks"),
            Message(role="assistant"),
        ]
    )
    assert request == {
        "system": [{"type": "text", "text": "rules"}, {"type": "text", "text": "more"}],
        "messages": [
            {"role": "user", "content": ""},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "let me see"},
                    {
                        "type": "tool_use",
                        "id": "a",
                        "name": "f",
                        "input": {"_raw_arguments": "{oops"},
                    },
                    {
                        "type": "tool_use",
                        "id": "b",
                        "name": "g",
                        "input": {"_raw_arguments": "[1]"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "a",
                        "content": [{"type": "text", "text": "1"}],
                    },
                    {"type": "tool_result", "tool_use_id": "b", "content": "2"},
                    {"type": "text", "text": "thanks"},
                ],
            },
            {"role": "assistant", "content": ""},
        ],
    }


def test_unsigned_reasoning_and_senders_are_reported():
    """What Anthropic cannot take is named by ``unexpressed``."""
    message = Message(role="user", content="hi", sender_name="alice", extra={"lang": "zh"})
    assert unexpressed(message) == ["sender_name", "extra.lang"]
    assert unexpressed(Message(role="assistant", reasoning="r")) == ["reasoning"]
    assert unexpressed(Message(role="tool", tool_call_id="t", extra={"is_error": True})) == []


def test_late_system_messages_and_unknown_roles_are_refused():
    """A system message after the conversation began, or an unknown role, raises with a hint."""
    with pytest.raises(ValueError, match="move this system message to the start"):
        to_anthropic([Message(role="user", content="hi"), Message(role="system", content="x")])
    with pytest.raises(ValueError, match="map it to one of them"):
        to_anthropic([Message(role="narrator", content="x")])
    with pytest.raises(ValueError, match="'user' and 'assistant'"):
        from_anthropic([{"role": "system", "content": "x"}])


def test_images_of_other_formats_become_image_blocks():
    """Data URLs become base64 sources, other URLs url sources; URL sources go to Chat as URLs."""
    parts = [
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j="}},
        {"type": "input_image", "image_url": "https://example.com/c.png", "detail": "auto"},
        {"type": "input_file", "file_id": "f1"},
    ]
    message = Message(role="user", content=parts)
    assert to_anthropic([message])["messages"][0]["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/c.png"}},
    ]
    assert unexpressed(message) == ["content[2]"]
    block = {"type": "image", "source": {"type": "url", "url": "https://example.com/d.png"}}
    chat = to_openai_chat(Message(role="user", content=[block]))
    assert chat["content"] == [
        {"type": "image_url", "image_url": {"url": "https://example.com/d.png"}}
    ]
    responses = to_openai_responses([Message(role="user", content=[block])])
    assert responses[0]["content"][0]["image_url"] == "https://example.com/d.png"


def test_a_tool_result_after_text_is_kept_as_one_user_message():
    """Blocks in an order the API would refuse are kept whole rather than reordered."""
    content = [
        {"type": "text", "text": "first"},
        {"type": "tool_result", "tool_use_id": "t1", "content": "1"},
    ]
    (message,) = from_anthropic([{"role": "user", "content": content}])
    assert (message.role, message.content) == ("user", content)


def test_arguments_given_as_objects_are_used_as_input():
    """A call whose arguments are already an object (or missing) still has an input."""
    calls = [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}},
        {"id": "b", "type": "function", "function": {"name": "g"}},
    ]
    blocks = to_anthropic([Message(role="assistant", tool_calls=calls)])["messages"][0]["content"]
    assert [block["input"] for block in blocks] == [{"x": 1}, {}]
