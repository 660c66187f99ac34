"""Model validation: slugs, aware datetimes, id charsets, JSON-shaped fields."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions import (
    InvalidIdError,
    InvalidValueError,
    Message,
    ResetDecision,
    SessionEntry,
    SessionRecord,
    SessionSource,
)
from hermes_sessions.models import stamped

NOW = datetime(2026, 5, 1, tzinfo=UTC)


def test_source_converts_ids_and_empty_strings():
    """Numeric ids become strings and empty strings mean absent."""
    source = SessionSource(platform="telegram", chat_id=-100, user_id="", thread_id=0)
    assert source.chat_id == "-100"
    assert source.user_id is None
    assert source.thread_id == "0"


def test_source_participant_prefers_the_alternate_id():
    """The participant is user_id_alt when present, else user_id."""
    assert SessionSource(platform="feishu", user_id="ou_1", user_id_alt="on_1").participant == (
        "on_1"
    )
    assert SessionSource(platform="feishu", user_id="ou_1").participant == "ou_1"
    assert SessionSource(platform="feishu").participant is None


@pytest.mark.parametrize("platform", ["Telegram", "", "tele gram", "-x", "飞书", "a:b"])
def test_source_platform_must_be_a_slug(platform):
    """Platforms are lowercase slugs; anything else is a ValueError."""
    with pytest.raises(ValueError, match="slug"):
        SessionSource(platform=platform)


def test_source_rejects_odd_id_types():
    """Ids must be strings or integers (booleans and floats are mistakes)."""
    with pytest.raises(TypeError):
        SessionSource(platform="x", chat_id=True)
    with pytest.raises(TypeError):
        SessionSource(platform="x", chat_id=1.5)  # type: ignore[arg-type]


def test_message_needs_only_role_and_content():
    """A new message is built from role and content; the rest is filled later."""
    message = Message(role="user", content="hi", sender_id=7, sender_name="Alice")
    assert message.id is None
    assert message.session_id is None
    assert message.timestamp is None
    assert message.active
    assert message.sender_id == "7"
    assert message.extra == {}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"role": ""},
        {"role": "user", "timestamp": datetime(2026, 1, 1)},  # noqa: DTZ001
        {"role": "user", "session_id": "../x"},
        {"role": "user", "id": -1},
        {"role": "user", "extra": {"content": "dup"}},
    ],
)
def test_message_rejects_invalid_values(kwargs):
    """Empty roles, naive times, unsafe ids, negative ids and shadowing extras are ValueErrors."""
    with pytest.raises(ValueError):
        Message(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"role": "user", "content": 5},
        {"role": "user", "content": ["text"]},
        {"role": "user", "tool_calls": {"name": "x"}},
        {"role": "user", "extra": {1: "x"}},
        {"role": "user", "active": 1},
        {"role": "user", "reasoning": 5},
        {"role": "user", "timestamp": "2026-01-01"},
        {"role": "user", "token_count": True},
    ],
)
def test_message_rejects_wrong_types(kwargs):
    """Wrongly typed fields are TypeErrors."""
    with pytest.raises(TypeError):
        Message(**kwargs)


def test_message_extra_may_hold_a_key_named_extra():
    """Only real field names are reserved; a provider field called "extra" is allowed."""
    assert Message(role="user", extra={"extra": 1}).extra == {"extra": 1}


def test_message_multimodal_content():
    """Content may be a list of parts (JSON objects)."""
    parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}}]
    assert Message(role="user", content=parts).content == parts


def test_entry_validates_ids_and_times():
    """Routing entries need a safe session id, aware times and a non-negative revision."""
    entry = SessionEntry(session_key="k", session_id="s1", created_at=NOW, updated_at=NOW)
    assert entry.revision == 0
    with pytest.raises(InvalidIdError):
        attrs.evolve(entry, session_id="../../x")
    with pytest.raises(ValueError):
        attrs.evolve(entry, revision=-1)
    with pytest.raises(ValueError):
        attrs.evolve(entry, updated_at=datetime(2026, 1, 1))  # noqa: DTZ001
    with pytest.raises(TypeError):
        attrs.evolve(entry, origin="telegram")


def test_record_defaults_and_validation():
    """A record needs id, source and start; counters start at zero."""
    record = SessionRecord(id="s1", source="cli", started_at=NOW)
    assert record.message_count == 0
    assert record.model_config == {}
    assert not record.is_ended
    assert attrs.evolve(record, end_reason="idle").is_ended
    with pytest.raises(ValueError):
        attrs.evolve(record, message_count=-1)
    with pytest.raises(TypeError):
        attrs.evolve(record, metadata=[])
    with pytest.raises(TypeError):
        attrs.evolve(record, estimated_cost_usd="0.1")
    with pytest.raises(InvalidIdError):
        attrs.evolve(record, parent_session_id="a/b")


def test_reset_decision_reasons():
    """A reset decision names one of the automatic reasons."""
    decision = ResetDecision(reason="idle", previous_session_id="s1", notify=True)
    assert decision.reason == "idle"
    with pytest.raises(ValueError):
        ResetDecision(reason="session_reset", previous_session_id="s1", notify=True)  # type: ignore[arg-type]


def test_models_are_frozen():
    """Models cannot be mutated in place."""
    message = Message(role="user", content="hi")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        message.content = "changed"  # type: ignore[misc]


def test_stamped_fills_library_fields_and_keeps_the_rest():
    """The internal stamping copy sets id, session id and time and keeps every other field."""
    message = Message(role="user", content="hi", sender_id="u", extra={"k": [1]})
    copy = stamped(message, message_id=7, session_id="s1", timestamp=NOW)
    assert copy == attrs.evolve(message, id=7, session_id="s1", timestamp=NOW)
    assert stamped(message) == message
    assert stamped(message) is not message


# -- one rule for odd values -----------------------------------------------------------------------

LONE = "broken \ud800 text"


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Message(role="user", content=LONE), "Message.content"),
        (lambda: Message(role="user", content=[{"type": "text", "text": LONE}]), "content[0]"),
        (lambda: Message(role="user", extra={"note": LONE}), "Message.extra['note']"),
        (lambda: Message(role="user", extra={LONE: 1}), "Message.extra"),
        (lambda: Message(role="tool", tool_calls=[{"args": [LONE]}]), "tool_calls[0]['args'][0]"),
        (lambda: Message(role="user", reasoning=LONE), "Message.reasoning"),
        (lambda: Message(role="user", sender_name=LONE), "Message.sender_name"),
        (lambda: Message(role="user", platform_message_id=LONE), "Message.platform_message_id"),
        (lambda: SessionRecord(id="s", source="x", started_at=NOW, title=LONE), "title"),
        (
            lambda: SessionRecord(id="s", source="x", started_at=NOW, metadata={"a": LONE}),
            "metadata",
        ),
        (lambda: SessionSource(platform="x", chat_name=LONE), "SessionSource.chat_name"),
        (
            lambda: SessionEntry(
                session_key="k", session_id="s", created_at=NOW, updated_at=NOW, display_name=LONE
            ),
            "SessionEntry.display_name",
        ),
    ],
)
def test_lone_surrogates_are_refused_naming_the_field(build, field):
    """Text no UTF-8 file or database can hold is refused when the model is built."""
    with pytest.raises(InvalidValueError, match="surrogate") as info:
        build()
    assert isinstance(info.value, ValueError)
    assert field in info.value.field


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_nan_and_infinity_are_refused(number):
    """JSON has no NaN or infinity: no JSON-shaped field and no cost may hold them."""
    with pytest.raises(InvalidValueError, match="NaN or infinity") as info:
        Message(role="user", extra={"score": [1, number]})
    assert info.value.field == "Message.extra['score'][1]"
    with pytest.raises(InvalidValueError, match="NaN or infinity"):
        SessionRecord(id="s", source="x", started_at=NOW, model_config={"t": number})
    with pytest.raises(InvalidValueError, match="NaN or infinity") as cost:
        SessionRecord(id="s", source="x", started_at=NOW, estimated_cost_usd=number)
    assert cost.value.field == "SessionRecord.estimated_cost_usd"


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ({1, 2}, "set"),
        ((1, 2), "tuple"),
        (b"raw", "bytes"),
        (NOW, "datetime"),
        (object(), "object"),
    ],
)
def test_values_that_are_not_json_are_refused(value, kind):
    """A set, tuple, bytes or any other object is refused, with what to use instead."""
    with pytest.raises(InvalidValueError, match=kind) as info:
        Message(role="user", extra={"x": {"y": value}})
    assert info.value.field == "Message.extra['x']['y']"
    assert "list" in str(info.value)


def test_json_keys_must_be_strings_at_every_depth():
    """A nested object with a non-string key is not JSON either."""
    with pytest.raises(InvalidValueError, match="keys") as info:
        Message(role="user", content=[{"type": "x", "data": {1: "one"}}])
    assert info.value.field == "Message.content[0]['data']"


def test_nul_characters_are_allowed_in_content():
    """U+0000 is a character like any other: every backend stores it."""
    message = Message(role="user", content="a\x00b", extra={"raw": "\x00"})
    assert message.content == "a\x00b"


@settings(max_examples=200)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    )
)
def test_every_json_value_is_accepted(value):
    """Whatever strict JSON can hold (text without lone surrogates) is a valid extra field."""
    assert Message(role="user", extra={"v": value}).extra == {"v": value}
