"""The searchable text of a message: content, parts, tool calls and the tool name."""

from __future__ import annotations

import json

from hermes_sessions.models import Message
from hermes_sessions.text import searchable_text


def test_searchable_text_of_string_content():
    """String content is the searchable text."""
    assert searchable_text(Message(role="user", content="hello")) == "hello"


def test_searchable_text_of_no_content():
    """A message without content or tools has empty searchable text."""
    assert searchable_text(Message(role="assistant")) == ""


def test_searchable_text_of_multimodal_parts():
    """Multimodal content is searched by the text of its parts."""
    content = [
        {"type": "text", "text": "look at this"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "input_text", "text": "and this"},
        {"type": "text", "text": 42},
    ]
    assert searchable_text(Message(role="user", content=content)) == "look at this\nand this"


def test_searchable_text_of_tool_result_parts():
    """Tool-result parts contribute their string or text-part content."""
    content = [
        {"type": "tool_result", "content": "exit 0"},
        {"type": "tool_result", "content": [{"type": "text", "text": "ok"}, "junk", {"x": 1}]},
    ]
    assert searchable_text(Message(role="user", content=content)) == "exit 0\nok"


def test_searchable_text_of_openai_tool_calls():
    """OpenAI tool calls contribute their name and the values of their JSON arguments."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {
            "name": "web_search",
            "arguments": json.dumps({"query": "飞书 bot", "limit": 3, "safe": True, "x": None}),
        },
    }
    message = Message(role="assistant", tool_calls=[call])
    assert searchable_text(message) == "web_search\n飞书 bot\n3"


def test_searchable_text_decodes_escaped_json_arguments():
    """Arguments written with Unicode escapes are searchable by their characters."""
    call = {"function": {"name": "f", "arguments": json.dumps({"q": "飞书"}, ensure_ascii=True)}}
    assert "飞书" in searchable_text(Message(role="assistant", tool_calls=[call]))


def test_searchable_text_keeps_arguments_that_are_not_json():
    """Arguments that are not valid JSON are indexed as they are."""
    call = {"function": {"name": "shell", "arguments": "ls -la {"}}
    assert searchable_text(Message(role="assistant", tool_calls=[call])) == "shell\nls -la {"


def test_searchable_text_of_plain_tool_calls():
    """A plain ``{"name", "input"}`` or ``{"name", "arguments"}`` call is read too."""
    calls = [
        {"name": "read_file", "input": {"path": "/etc/hosts", "lines": [1, 2.5]}},
        {"name": "grep", "arguments": {"pattern": "TODO"}},
    ]
    text = searchable_text(Message(role="assistant", tool_calls=calls))
    assert text == "read_file\n/etc/hosts\n1\n2.5\ngrep\nTODO"


def test_searchable_text_of_odd_tool_calls():
    """Odd shapes are skipped without raising."""
    calls = [
        {"function": "not a dict", "name": 5},
        {"function": {"name": None, "arguments": 7}},
        {"type": "function"},
        {"name": "deep", "arguments": "[" * 100_000 + "]" * 100_000},
    ]
    text = searchable_text(Message(role="assistant", tool_calls=calls))
    assert text.startswith("7\ndeep\n[[[")


def test_searchable_text_skips_values_that_are_not_json():
    """Objects a host put into a call's ``input`` after building the message are skipped."""
    call: dict[str, object] = {"name": "f", "input": {}}
    message = Message(role="assistant", tool_calls=[call])  # the model refuses them up front
    call["input"] = {"when": object(), "tags": ("a", {"b"})}
    assert searchable_text(message) == "f\na"


def test_searchable_text_caps_huge_arguments():
    """At most 10,000 values are read from one call's arguments."""
    call = {"name": "f", "input": {"values": [str(i) for i in range(20_000)]}}
    text = searchable_text(Message(role="assistant", tool_calls=[call]))
    assert len(text.split("\n")) < 10_002


def test_searchable_text_includes_tool_name():
    """A tool message's ``tool_name`` is searchable, after its content."""
    message = Message(role="tool", content="result", tool_name="terminal")
    assert searchable_text(message) == "result\nterminal"
