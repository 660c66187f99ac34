"""Chat Completions messages convert to Messages and back exactly, and emit only schema keys."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions.formats import from_openai_chat, to_openai_chat
from hermes_sessions.formats.openai_chat import ROLE_KEYS, unexpressed
from hermes_sessions.models import Message

# Shapes of the Chat Completions request messages, written from the documented schema.
texts = st.text(max_size=20)
names = st.text(alphabet="abcxyz_-", min_size=1, max_size=8)
text_part = st.fixed_dictionaries({"type": st.just("text"), "text": texts})
image_part = st.fixed_dictionaries(
    {
        "type": st.just("image_url"),
        "image_url": st.fixed_dictionaries(
            {"url": st.just("https://example.com/a.png")},
            optional={"detail": st.sampled_from(["auto", "low", "high"])},
        ),
    }
)
audio_part = st.fixed_dictionaries(
    {
        "type": st.just("input_audio"),
        "input_audio": st.fixed_dictionaries(
            {"data": st.just("UklGRg=="), "format": st.sampled_from(["wav", "mp3"])}
        ),
    }
)
tool_call = st.fixed_dictionaries(
    {
        "id": names,
        "type": st.just("function"),
        "function": st.fixed_dictionaries({"name": names, "arguments": st.just('{"q": 1}')}),
    }
)


def _message(role, content, optional):
    return st.fixed_dictionaries({"role": st.just(role), "content": content}, optional=optional)


chat_messages = st.one_of(
    _message("system", texts | st.lists(text_part, max_size=2), {"name": names}),
    _message("developer", texts | st.lists(text_part, max_size=2), {"name": names}),
    _message(
        "user",
        texts | st.lists(text_part | image_part | audio_part, max_size=3),
        {"name": names},
    ),
    st.fixed_dictionaries(
        {"role": st.just("assistant")},
        optional={
            "content": st.none() | texts | st.lists(text_part, max_size=2),
            "name": names,
            "refusal": st.none() | texts,
            "tool_calls": st.lists(tool_call, min_size=1, max_size=3),
            "audio": st.fixed_dictionaries({"id": names}),
        },
    ),
    st.fixed_dictionaries(
        {"role": st.just("tool"), "content": texts, "tool_call_id": names},
    ),
    _message("function", texts | st.none(), {"name": names}),
)


@settings(deadline=None, max_examples=300)
@given(chat_messages)
def test_vendor_to_message_to_vendor_is_exact(vendor):
    """A schema-valid Chat Completions message comes back equal after a trip through Message."""
    assert to_openai_chat(from_openai_chat(vendor)) == vendor


@settings(deadline=None)
@given(chat_messages)
def test_emitted_keys_are_the_roles_schema(vendor):
    """What ``to_openai_chat`` emits uses only keys the role's schema has."""
    emitted = to_openai_chat(from_openai_chat(vendor))
    assert set(emitted) - {"role"} <= ROLE_KEYS[emitted["role"]]


def test_keys_outside_the_schema_are_kept_but_not_sent():
    """A provider's extra key survives in ``extra`` and stays out of the request."""
    vendor = {"role": "assistant", "content": "ok", "reasoning_content": "hmm", "reasoning": "r"}
    message = from_openai_chat(vendor)
    assert message.extra["reasoning_content"] == "hmm"
    assert message.extra["openai_chat"] == {"fields": {"reasoning": "r"}}
    assert to_openai_chat(message) == {"role": "assistant", "content": "ok"}
    assert unexpressed(message) == ["extra.reasoning_content"]


def test_names_map_to_the_sender_or_the_function():
    """``name`` is the sender for people and the function for a function message."""
    assert from_openai_chat({"role": "user", "content": "hi", "name": "bo"}).sender_name == "bo"
    legacy = from_openai_chat({"role": "function", "content": "1", "name": "add"})
    assert (legacy.tool_name, legacy.sender_name) == ("add", None)


def test_a_message_built_here_is_sent_with_the_fields_chat_accepts():
    """Reasoning, a tool's sender and foreign call keys are left out; empty content is text."""
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "f", "arguments": "{}", "strict": True},
        "anthropic": {"cache_control": {"type": "ephemeral"}},
    }
    assistant = Message(role="assistant", tool_calls=[call], reasoning="why")
    assert to_openai_chat(assistant) == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    assert unexpressed(assistant) == ["reasoning"]
    tool = Message(role="tool", tool_call_id="c1", sender_name="bot")
    assert to_openai_chat(tool) == {"role": "tool", "content": "", "tool_call_id": "c1"}
    assert unexpressed(tool) == ["sender_name"]


def test_parts_of_other_formats_are_translated_or_reported():
    """Anthropic images become data URLs; a thinking block has no Chat shape and is reported."""
    parts = [
        {"type": "text", "text": "look", "cache_control": {"type": "ephemeral"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}},
        {"type": "input_image", "image_url": "https://example.com/b.png", "detail": "low"},
        {"type": "thinking", "thinking": "...", "signature": "s"},
    ]
    message = Message(role="user", content=parts)
    assert to_openai_chat(message)["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/b.png", "detail": "low"}},
    ]
    assert unexpressed(message) == ["content[3]"]


def test_roles_without_a_chat_place_are_refused():
    """A host-defined role must be mapped first; the error says so."""
    with pytest.raises(ValueError, match="map it to one of them"):
        to_openai_chat(Message(role="narrator", content="..."))
    with pytest.raises(ValueError, match="map it to one of them"):
        unexpressed(Message(role="narrator", content="..."))


def test_a_message_without_a_role_is_refused():
    """The role is required on the way in."""
    with pytest.raises(ValueError, match="needs a 'role'"):
        from_openai_chat({"content": "hi"})
