"""Responses input items convert to Messages and back exactly, and emit only schema keys."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions.formats import from_openai_responses, to_openai_chat, to_openai_responses
from hermes_sessions.formats.openai_responses import MESSAGE_KEYS, OUTPUT_KEYS, unexpressed
from hermes_sessions.models import Message

# Shapes of Responses input items, written from the documented schema.
texts = st.text(max_size=20)
ids = st.text(alphabet="abc123_", min_size=1, max_size=8)
statuses = st.sampled_from(["in_progress", "completed", "incomplete"])
input_text = st.fixed_dictionaries({"type": st.just("input_text"), "text": texts})
input_image = st.fixed_dictionaries(
    {
        "type": st.just("input_image"),
        "image_url": st.just("https://example.com/a.png"),
        "detail": st.sampled_from(["auto", "low", "high"]),
    }
)
output_text = st.fixed_dictionaries(
    {"type": st.just("output_text"), "text": texts, "annotations": st.just([])}
)
easy_message = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "system", "developer", "assistant"]),
        "content": texts,
    },
    optional={"type": st.just("message")},
)
input_message = st.fixed_dictionaries(
    {
        "type": st.just("message"),
        "role": st.sampled_from(["user", "system", "developer"]),
        "content": st.lists(input_text | input_image, max_size=3),
    },
    optional={"status": statuses},
)
output_message = st.fixed_dictionaries(
    {
        "type": st.just("message"),
        "role": st.just("assistant"),
        "id": ids,
        "status": statuses,
        "content": st.lists(output_text, max_size=2),
    }
)
function_call = st.fixed_dictionaries(
    {
        "type": st.just("function_call"),
        "call_id": ids,
        "name": ids,
        "arguments": st.just('{"city": "北京"}'),
    },
    optional={"id": ids, "status": statuses},
)
function_call_output = st.fixed_dictionaries(
    {"type": st.just("function_call_output"), "call_id": ids, "output": texts},
    optional={"id": ids, "status": statuses},
)
reasoning = st.fixed_dictionaries(
    {
        "type": st.just("reasoning"),
        "id": ids,
        "summary": st.lists(
            st.fixed_dictionaries({"type": st.just("summary_text"), "text": texts}), max_size=2
        ),
    },
    optional={"encrypted_content": ids},
)
item_reference = st.fixed_dictionaries({"type": st.just("item_reference"), "id": ids})
items = st.lists(
    easy_message
    | input_message
    | output_message
    | function_call
    | function_call_output
    | reasoning
    | item_reference,
    max_size=6,
)


@settings(deadline=None, max_examples=300)
@given(items)
def test_items_to_messages_to_items_is_exact(vendor):
    """Schema-valid input items come back equal after a trip through Messages."""
    assert to_openai_responses(from_openai_responses(vendor)) == vendor


def test_a_chat_shaped_turn_becomes_message_and_call_items():
    """Text with tool calls is a message item followed by one function_call per call."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    assistant = Message(role="assistant", content="checking", tool_calls=[call])
    result = Message(role="tool", tool_call_id="c1", content=None, sender_name="x")
    emitted = to_openai_responses([assistant, result])
    assert emitted == [
        {"role": "assistant", "content": "checking"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": ""},
    ]
    assert set(emitted[0]) <= MESSAGE_KEYS
    assert set(emitted[2]) <= OUTPUT_KEYS
    assert unexpressed(result) == ["sender_name"]


def test_reasoning_items_keep_their_summary_as_reasoning():
    """A reasoning item's summary is readable as ``reasoning`` and goes back as the same item."""
    item = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}],
    }
    (message,) = from_openai_responses([item])
    assert message.reasoning == "a\n\nb"
    assert unexpressed(message) == []
    assert to_openai_chat(message) == {"role": "assistant", "content": None}


def test_reasoning_from_elsewhere_is_reported():
    """Reasoning without a Responses item id cannot be sent back, and the converter says so."""
    message = Message(role="assistant", content="ok", reasoning="because")
    assert to_openai_responses([message]) == [{"role": "assistant", "content": "ok"}]
    assert unexpressed(message) == ["reasoning"]


def test_parts_get_the_input_or_output_shape_of_their_role():
    """Chat text parts become input_text for users and output_text for the assistant."""
    parts = [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "u"}}]
    user = to_openai_responses([Message(role="user", content=parts)])[0]
    assert user["content"] == [
        {"type": "input_text", "text": "hi"},
        {"type": "input_image", "image_url": "u", "detail": "auto"},
    ]
    assistant_message = Message(role="assistant", content=parts)
    assistant = to_openai_responses([assistant_message])[0]
    assert assistant["content"] == [{"type": "output_text", "text": "hi", "annotations": []}]
    assert unexpressed(assistant_message) == ["content[1]"]


def test_bad_items_and_roles_are_refused():
    """Items without a type or role, and roles Responses lacks, raise with a hint."""
    with pytest.raises(TypeError, match="needs a 'type'"):
        from_openai_responses([{"content": "hi"}])
    with pytest.raises(ValueError, match="needs a 'role'"):
        from_openai_responses([{"type": "message", "content": "hi"}])
    with pytest.raises(ValueError, match="map it to one of them"):
        to_openai_responses([Message(role="narrator", content="...")])
