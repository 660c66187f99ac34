"""The session_search tool: schema, the four shapes, argument handling and the access rule."""

from __future__ import annotations

import json

import jsonschema
import pytest

from hermes_sessions import Message, SessionSource
from hermes_sessions.tools import (
    SESSION_SEARCH_TOOL_SCHEMA,
    SearchToolContext,
    handle_session_search,
)

LIN = SessionSource(platform="feishu", chat_id="ou_lin", user_id="ou_lin", user_name="林晓")
EVE = SessionSource(platform="feishu", chat_id="ou_eve", user_id="ou_eve")


def user(text: str) -> Message:
    """A user message."""
    return Message(role="user", content=text, sender_id="ou_lin", sender_name="林晓")


def reply(text: str) -> Message:
    """An assistant message."""
    return Message(role="assistant", content=text)


@pytest.fixture
def lin_history(store, clock):
    """Lin has three earlier conversations and a current one; Eve has her own."""
    key = store.get_or_create(LIN).entry.session_key
    ids = []
    for topic in ("部署 youer 服务端到 staging", "周报模板", "kubernetes 升级计划"):
        entry = store.reset(key)
        store.append(entry.session_id, user(topic), reply(f"好的，关于{topic}"))
        ids.append(entry.session_id)
        clock.advance(minutes=10)
    current = store.reset(key)
    store.append(current.session_id, user("现在我们聊聊部署"))
    eve = store.get_or_create(EVE)
    store.append(eve.session_id, user("eve 的部署笔记"))
    return ids, current.session_id, eve.session_id


def call(store, arguments, requester=LIN):
    """Call the tool as ``requester`` from their own key."""
    context = SearchToolContext(
        store=store, requester=requester, current_key=store.key_for(requester)
    )
    result = handle_session_search(context, arguments)
    json.dumps(result)  # every result is JSON-serialisable
    return result


def test_schema_is_valid_json_schema():
    """The tool's parameters are a valid JSON Schema without top-level anyOf/oneOf."""
    function = SESSION_SEARCH_TOOL_SCHEMA["function"]
    assert SESSION_SEARCH_TOOL_SCHEMA["type"] == "function"
    assert function["name"] == "session_search"
    jsonschema.Draft202012Validator.check_schema(function["parameters"])
    assert not {"anyOf", "oneOf", "allOf"} & set(function["parameters"])
    validator = jsonschema.Draft202012Validator(function["parameters"])
    validator.validate({"query": "docker", "limit": 3})
    validator.validate({"session_id": "x", "message_id": 4, "window": 2})
    validator.validate({"limit": 99})  # more than 10 is read as 10 (the description says so)
    for limit in (0, "many", 2.5):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate({"limit": limit})


def test_browse_lists_recent_conversations(store, lin_history):
    """No arguments: recent visible conversations, the current one left out."""
    ids, current, eve = lin_history
    result = call(store, {})
    assert result["success"]
    assert result["mode"] == "browse"
    listed = [s["session_id"] for s in result["sessions"]]
    assert listed == list(reversed(ids))
    assert current not in listed
    assert eve not in listed
    assert result["sessions"][0]["preview"] == "kubernetes 升级计划"


def test_discover_finds_the_best_hit_per_conversation(store, lin_history):
    """A query returns matching conversations with context, never the current one."""
    ids, current, eve = lin_history
    result = call(store, {"query": "部署"})
    assert result["mode"] == "discover"
    found = [r["session_id"] for r in result["results"]]
    assert found == [ids[0]]
    hit = result["results"][0]
    assert ">>>部署<<<" in hit["snippet"]
    assert hit["context"][0]["content"].startswith("部署")
    assert hit["context"][0]["sender"] == "林晓"
    assert current not in found
    assert eve not in found


def test_discover_limit_is_defaulted_clamped_and_checked(store, lin_history):
    """The limit defaults to 3, reads "1" as 1 and 500 as 10; what the schema forbids is refused."""
    for value in ("many", 2.5, True, -4):
        assert call(store, {"query": "好的", "limit": value})["code"] == "invalid_arguments"
    assert len(call(store, {"query": "好的"})["results"]) == 3
    assert len(call(store, {"query": "好的", "limit": None})["results"]) == 3
    assert len(call(store, {"query": "好的", "limit": "1"})["results"]) == 1
    assert len(call(store, {"query": "好的", "limit": 500})["results"]) == 3


def test_read_a_whole_conversation(store, lin_history):
    """A session id alone returns the conversation's messages."""
    ids, _, _ = lin_history
    result = call(store, {"session_id": ids[1]})
    assert result["mode"] == "read"
    assert [m["content"] for m in result["messages"]] == ["周报模板", "好的，关于周报模板"]
    assert result["omitted_messages"] == 0
    assert result["session"]["message_count"] == 2


def test_read_a_long_conversation_shows_its_ends(store, lin_history):
    """Long conversations come back as their first 20 and last 10 messages."""
    ids, _, _ = lin_history
    store.append(ids[2], *(user(f"line {n}") for n in range(60)))
    result = call(store, {"session_id": ids[2]})
    contents = [m["content"] for m in result["messages"]]
    assert len(contents) == 30
    assert contents[-1] == "line 59"
    assert result["omitted_messages"] == 62 - 30


def test_scroll_around_a_message(store, lin_history):
    """A session id with a message id returns a window around that message."""
    ids, _, _ = lin_history
    stored = store.append(ids[2], *(user(f"line {n}") for n in range(30)))
    result = call(store, {"session_id": ids[2], "message_id": stored[10].id, "window": 2})
    assert result["mode"] == "scroll"
    assert [m["content"] for m in result["messages"]] == [f"line {n}" for n in range(8, 13)]
    assert result["more_before"]
    assert result["more_after"]
    edge = call(store, {"session_id": ids[2], "message_id": stored[29].id})
    assert not edge["more_after"]


def test_scroll_to_a_missing_message(store, lin_history):
    """Scrolling to a message that does not exist is an argument error."""
    ids, _, _ = lin_history
    result = call(store, {"session_id": ids[0], "message_id": 99_999})
    assert not result["success"]
    assert result["argument"] == "message_id"


def test_other_users_see_nothing_in_any_shape(store, lin_history):
    """Eve cannot browse, discover, read or scroll Lin's conversations, even by id."""
    ids, _, eve = lin_history
    browse = call(store, {}, requester=EVE)
    assert [s["session_id"] for s in browse["sessions"]] == []
    discover = call(store, {"query": "好的 OR 部署 OR 周报"}, requester=EVE)
    assert discover["results"] == []
    for arguments in ({"session_id": ids[0]}, {"session_id": ids[0], "message_id": 1}):
        result = call(store, arguments, requester=EVE)
        assert not result["success"]
        assert result["code"] == "invalid_arguments"
    unknown = call(store, {"session_id": "20990101_000000_deadbeef"}, requester=EVE)
    assert (
        unknown["error"].replace("20990101_000000_deadbeef", ids[0])
        == call(store, {"session_id": ids[0]}, requester=EVE)["error"]
    )
    assert eve not in [r["session_id"] for r in discover["results"]]


def test_crafted_ids_are_just_not_found(store, lin_history):
    """Path-like or odd ids are reported as unknown conversations."""
    for crafted in ("../../etc/passwd", "", "x" * 500):
        result = call(store, {"session_id": crafted})
        assert not result["success"]
        assert "no conversation" in result["error"]


@pytest.mark.parametrize(
    "arguments",
    ["not json", "[1, 2]", {"query": 5}, {"session_id": ["a"]}],
)
def test_bad_arguments_become_error_dicts(store, arguments):
    """Malformed arguments give an error dict, never an exception."""
    result = call(store, arguments)
    assert result["success"] is False
    assert result["code"] == "invalid_arguments"


def test_arguments_as_json_text(store, lin_history):
    """The raw JSON text of a tool call works like a mapping."""
    assert call(store, '{"query": "周报"}')["results"][0]["title"] is None


def test_blank_query_browses(store, lin_history):
    """A query of only spaces is treated as no query."""
    assert call(store, {"query": "   "})["mode"] == "browse"


def test_hostile_query_returns_nothing(store, lin_history):
    """A query reduced to nothing by the sanitiser finds nothing, without an error."""
    result = call(store, {"query": '*** "" -- ^'})
    assert result == {
        "success": True,
        "mode": "discover",
        "search": "exact",
        "query": '*** "" -- ^',
        "results": [],
    }


def test_tool_calls_and_multimodal_render_as_text(store, clock):
    """Messages show tool-call names and placeholders for non-text parts."""
    session_id = store.get_or_create(EVE).session_id
    store.append(
        session_id,
        Message(
            role="user",
            content=[{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {}}],
        ),
        Message(
            role="assistant",
            content=None,
            tool_calls=[{"id": "1", "function": {"name": "shell", "arguments": "{}"}}],
        ),
        Message(role="tool", content="x" * 5000, tool_name="shell"),
    )
    store.reset(store.key_for(EVE))
    messages = call(store, {"session_id": session_id}, requester=EVE)["messages"]
    assert messages[0]["content"] == "see [image_url]"
    assert messages[1]["tool_calls"] == ["shell"]
    assert messages[2]["tool_name"] == "shell"
    assert len(messages[2]["content"]) == 2000


def test_context_without_a_key(store, lin_history):
    """Without a current key, the requester sees their own sessions by platform and user."""
    context = SearchToolContext(store=store, requester=LIN)
    result = handle_session_search(context, {})
    assert len(result["sessions"]) == 4


@pytest.fixture
def ops_history(store, clock):
    """Lin's earlier conversation about a container; Eve's own about the same thing."""
    key = store.get_or_create(LIN).entry.session_key
    entry = store.reset(key)
    store.append(
        entry.session_id,
        user("The api container keeps restarting on staging"),
        reply("It was OOM killed; raise the memory limit in compose"),
    )
    clock.advance(minutes=10)
    store.reset(key)
    eve = store.get_or_create(EVE)
    store.append(eve.session_id, user("my api container was OOM killed, memory limit too low"))
    return entry.session_id, eve.session_id


def test_discover_reads_a_question_naturally_by_default(store, ops_history):
    """A plain question finds the conversation by its terms, spread over messages."""
    lin, _eve = ops_history
    result = call(store, {"query": "why were the containers restarted? memory?"})
    assert result["search"] == "natural"
    (hit,) = result["results"]
    assert hit["session_id"] == lin
    assert hit["confident"]
    assert hit["matched"] == "all words"
    assert hit["terms"] == ["containers", "restarted", "memory"]
    assert hit["missing"] == []
    assert {s["message_id"] for s in hit["snippets"]} == {1, 2}
    assert hit["message_id"] == hit["snippets"][0]["message_id"]
    assert "note" not in result


def test_natural_discover_keeps_the_access_rule(store, ops_history):
    """Eve's conversation, holding every term, is never shown to Lin, nor Lin's to Eve."""
    lin, _eve = ops_history
    question = {"query": "api container oom killed memory limit"}
    assert [r["session_id"] for r in call(store, question)["results"]] == [lin]
    assert call(store, question, requester=EVE)["results"] == []  # hers is the current one


def test_a_question_without_an_answer_says_so(store, ops_history):
    """Nothing confident: no result, or weak candidates marked so, and a note either way."""
    result = call(store, {"query": "how did we configure kafka consumer lag alerts"})
    assert result["results"] == []
    assert "no conversation holds enough" in result["note"]
    weak = call(store, {"query": "kafka container restarting"})
    assert weak["results"]
    assert not any(r["confident"] for r in weak["results"])
    assert "weak candidates" in weak["note"]


def test_exact_mode_and_operators_read_the_query_exactly(store, ops_history):
    """mode='exact', or the query language's operators, keep the exact reading."""
    assert call(store, {"query": "containers restarted", "mode": "exact"})["results"] == []
    quoted = call(store, {"query": '"api container"'})
    assert quoted["search"] == "exact"
    assert len(quoted["results"]) == 1
    assert call(store, {"query": "contain*"})["search"] == "exact"
    assert call(store, {"query": "container -staging"})["results"] == []
    assert call(store, {"query": "x", "mode": "fuzzy"})["code"] == "invalid_arguments"
