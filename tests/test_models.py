"""Model validation: slugs, aware datetimes, id charsets, JSON-shaped fields."""

from __future__ import annotations

from datetime import UTC, datetime

import attrs
import pytest

from hermes_sessions import (
    InvalidIdError,
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
