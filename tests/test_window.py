"""The context window keeps whole turns that every vendor's ordering rules accept."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions.host import (
    ContextWindow,
    context_window,
    estimate_tokens,
    reactions_of,
    with_reactions,
)
from hermes_sessions.models import Message

# -- vendor ordering rules, stated in our own words ------------------------------------------------


def chat_completions_violations(messages):
    """OpenAI Chat Completions: tool results answer the calls just before them, all of them."""
    problems = []
    pending: set[str] = set()
    answerable: set[str] = set()
    for index, message in enumerate(messages):
        if message.role == "tool":
            if message.tool_call_id not in answerable:
                problems.append(f"tool result {index} answers no preceding call")
            pending.discard(message.tool_call_id)
            continue
        if pending:
            problems.append(f"message {index} arrives before calls {sorted(pending)} answered")
        pending = {call["id"] for call in message.tool_calls or ()}
        answerable = set(pending)
    if pending:
        problems.append(f"calls {sorted(pending)} are never answered")
    return problems


def anthropic_violations(messages):
    """Anthropic Messages: the first message is the user's; tool uses are answered next."""
    problems = chat_completions_violations(messages)
    body = [message for message in messages if message.role not in {"system", "developer"}]
    if body and body[0].role != "user":
        problems.append(f"the first message is {body[0].role!r}, not 'user'")
    return problems


def responses_violations(messages):
    """OpenAI Responses: a function_call_output names a function_call that came before it."""
    seen: set[str] = set()
    problems = []
    for index, message in enumerate(messages):
        seen.update(call["id"] for call in message.tool_calls or ())
        if message.role == "tool" and message.tool_call_id not in seen:
            problems.append(f"output {index} names no earlier call")
    return problems


VALIDATORS = (chat_completions_violations, anthropic_violations, responses_violations)

# -- transcripts -----------------------------------------------------------------------------------

texts = st.text(alphabet="ab 你好", max_size=30)


@st.composite
def turns(draw, counter):
    """One user turn: a question, zero or more rounds of tool calls and results, a reply."""
    turn = [Message(role="user", content=draw(texts))]
    for _ in range(draw(st.integers(0, 3))):
        ids = [f"call_{next(counter)}" for _ in range(draw(st.integers(1, 3)))]
        calls = [
            {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
        ]
        turn.append(Message(role="assistant", content=draw(st.none() | texts), tool_calls=calls))
        turn.extend(
            Message(role="tool", tool_call_id=call_id, content=draw(texts))
            for call_id in draw(st.permutations(ids))
        )
    turn.append(Message(role="assistant", content=draw(texts)))
    return turn


@st.composite
def transcripts(draw):
    """A stored transcript: maybe a system prompt, then whole turns, with increasing ids."""
    counter = itertools.count()
    messages = [Message(role="system", content="be brief")] if draw(st.booleans()) else []
    for turn in draw(st.lists(turns(counter), max_size=6)):
        messages.extend(turn)
    return [Message(**{**_fields(m), "id": n + 1}) for n, m in enumerate(messages)]


def _fields(message):
    return {
        "role": message.role,
        "content": message.content,
        "tool_calls": message.tool_calls,
        "tool_call_id": message.tool_call_id,
    }


@settings(deadline=None, max_examples=300)
@given(
    transcripts(),
    st.none() | st.integers(1, 30),
    st.none() | st.integers(1, 400),
    st.booleans(),
)
def test_every_window_passes_every_vendor_rule(messages, max_messages, max_tokens, keep_system):
    """Whatever the budget, a window is a suffix of whole turns that every vendor accepts."""
    window = context_window(
        messages, max_messages=max_messages, max_tokens=max_tokens, keep_system=keep_system
    )
    for validator in VALIDATORS:
        assert validator(list(window.messages)) == [], validator.__name__
    if max_messages is not None:
        assert len(window.messages) <= max_messages or window.overflow
    if max_tokens is not None:
        assert window.tokens <= max_tokens or window.overflow
    pinned = 1 if keep_system and messages and messages[0].role == "system" else 0
    assert window.omitted + len(window.messages) == len(messages)
    assert (
        list(window.messages[pinned:]) == messages[len(messages) - len(window.messages) + pinned :]
    )


@settings(deadline=None)
@given(transcripts(), st.integers(1, 30))
def test_the_window_is_the_largest_that_fits(messages, max_messages):
    """No older turn start would also have fitted: the window keeps as much as it can."""
    window = context_window(messages, max_messages=max_messages, keep_system=False)
    older = [
        index
        for index, message in enumerate(messages)
        if message.role == "user" and index < window.omitted
    ]
    assert all(len(messages) - index > max_messages for index in older)


def test_a_tail_cut_after_a_tool_call_starts_at_the_user_message():
    """Two messages asked for after a tool round give the whole last turn's end, not an orphan."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        Message(role="user", content="weather?", id=1),
        Message(role="assistant", tool_calls=[call], id=2),
        Message(role="tool", tool_call_id="c1", content="sunny", id=3),
        Message(role="assistant", content="It is sunny.", id=4),
    ]
    window = context_window(messages, max_messages=2)
    assert window == ContextWindow(
        messages=(), omitted=4, first_kept_id=None, tokens=0, overflow=True
    )
    window = context_window(messages, max_messages=4)
    assert window.first_kept_id == 1
    assert not window.truncated


def test_system_messages_are_pinned_and_counted():
    """Leading system messages stay in the window and use up the budget."""
    messages = [
        Message(role="system", content="rules"),
        Message(role="user", content="one", id=1),
        Message(role="assistant", content="1", id=2),
        Message(role="user", content="two", id=3),
        Message(role="assistant", content="2", id=4),
    ]
    window = context_window(messages, max_messages=3)
    assert [m.content for m in window.messages] == ["rules", "two", "2"]
    assert (window.omitted, window.first_kept_id, window.truncated) == (2, 3, True)


def test_without_keep_system_the_system_message_is_an_ordinary_turn():
    """``keep_system=False`` lets the system prompt fall out with the oldest turn."""
    messages = [
        Message(role="system", content="rules"),
        Message(role="user", content="one"),
        Message(role="assistant", content="1"),
    ]
    window = context_window(messages, max_messages=2, keep_system=False)
    assert [m.content for m in window.messages] == ["one", "1"]


def test_a_greeting_before_the_first_user_message_is_a_turn_of_its_own():
    """Messages before the first user message can be kept or dropped as one unit."""
    messages = [Message(role="assistant", content="Welcome!"), Message(role="user", content="hi")]
    assert len(context_window(messages).messages) == 2
    assert len(context_window(messages, max_messages=1).messages) == 1


def test_a_leading_orphan_tool_result_is_never_a_start():
    """A transcript that begins with a tool result is cut at its first user message."""
    messages = [
        Message(role="tool", tool_call_id="x", content="?"),
        Message(role="user", content="hi"),
    ]
    window = context_window(messages)
    assert [m.role for m in window.messages] == ["user"]
    assert window.omitted == 1


def test_token_budget_uses_the_host_counter():
    """``count_tokens`` replaces the heuristic, and the window's tokens are its sum."""
    messages = [Message(role="user", content="x"), Message(role="assistant", content="y")] * 2
    window = context_window(messages, max_tokens=25, count_tokens=lambda _m: 10)
    assert (len(window.messages), window.tokens) == (2, 20)


def test_an_empty_transcript_gives_an_empty_window():
    """Nothing in, nothing out, and nothing overflows."""
    assert context_window([]) == ContextWindow(
        messages=(), omitted=0, first_kept_id=None, tokens=0, overflow=False
    )


@pytest.mark.parametrize("name", ["max_messages", "max_tokens"])
@pytest.mark.parametrize("value", [0, -1, True, 1.5])
def test_bad_limits_are_rejected(name, value):
    """A limit must be a positive int; the message says so."""
    with pytest.raises(ValueError, match=f"{name} must be a positive int"):
        context_window([], **{name: value})


def test_the_heuristic_counts_cjk_per_character_and_parts_by_kind():
    """CJK characters are a token each, Latin text a quarter, a picture a fixed cost."""
    assert estimate_tokens(Message(role="user", content="飞书机器人")) == 4 + 5
    assert estimate_tokens(Message(role="user", content="abcdefgh")) == 4 + 2
    parts = [{"type": "text", "text": "abcd"}, {"type": "image_url", "image_url": {"url": "u"}}]
    assert estimate_tokens(Message(role="user", content=parts)) == 4 + 1 + 256
    call = [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    assert estimate_tokens(Message(role="assistant", tool_calls=call)) > 4
    assert estimate_tokens(Message(role="assistant")) == 4


def test_with_reactions_counts_only_where_several_reacted():
    """Each reaction shows once, with a count when more than one person used it."""
    message = Message(
        role="assistant", content="ok", extra={"reactions": {"👍": ["1", "2", "3"], "🎉": ["2"]}}
    )
    assert with_reactions(message).content == "ok [reactions: 👍 3, 🎉]"
    assert with_reactions(message).extra == message.extra


def test_with_reactions_adds_a_text_part_to_multimodal_content():
    """A message of parts gets the reactions as one more text part; none leaves it as it is."""
    parts = [{"type": "image", "file_id": "f1"}]
    message = Message(role="user", content=parts, extra={"reactions": {"❤️": ["9"]}})
    assert with_reactions(message).content == [*parts, {"type": "text", "text": "[reactions: ❤️]"}]
    bare = Message(role="user", content="hi")
    assert with_reactions(bare) is bare


def test_reactions_of_ignores_what_is_not_a_reaction_map():
    """Anything but ``{reaction: [ids]}`` under the key reads as no reactions."""
    assert reactions_of(Message(role="user", content="x", extra={"reactions": "👍"})) == {}
    odd = Message(role="user", content="x", extra={"reactions": {"👍": [], "🎉": "2"}})
    assert reactions_of(odd) == {}
