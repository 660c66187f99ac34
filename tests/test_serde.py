"""The converter: lossless JSON round trips and CorruptRecordError for bad input."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_sessions import (
    CorruptRecordError,
    Message,
    SessionEntry,
    SessionRecord,
    SessionSource,
)
from hermes_sessions.models import MESSAGE_FIELDS
from hermes_sessions.serde import (
    compact_json,
    converter,
    make_converter,
    message_dict,
    stored_message,
    stored_messages,
    structure,
    unstructure,
)

NOW = datetime(2026, 5, 12, 1, 20, 0, 124181, tzinfo=UTC)
RECORD = {"id": "s", "source": "cli", "started_at": NOW.isoformat()}


def test_datetimes_are_iso_utc():
    """Datetimes become ISO 8601 strings in UTC with a Z suffix."""
    shanghai = timezone(timedelta(hours=8))
    message = Message(role="user", content="x", timestamp=NOW.astimezone(shanghai))
    assert unstructure(message)["timestamp"] == "2026-05-12T01:20:00.124181Z"


def test_message_dict_is_flat_with_extra_fields():
    """Extra fields sit beside known ones; None fields and default flags are left out."""
    message = Message(
        role="assistant",
        content="ok",
        extra={"reasoning_details": [{"type": "summary"}], "provider": "x"},
    )
    assert unstructure(message) == {
        "role": "assistant",
        "content": "ok",
        "reasoning_details": [{"type": "summary"}],
        "provider": "x",
    }


def test_unknown_message_fields_land_in_extra():
    """Fields we do not know are kept in ``extra`` and written back out."""
    data = {"role": "user", "content": "hi", "codex_reasoning_items": [1, 2], "active": False}
    message = structure(data, Message)
    assert message.extra == {"codex_reasoning_items": [1, 2]}
    assert not message.active
    assert unstructure(message) == data


def test_entry_round_trip_with_origin():
    """A routing entry with its origin survives a JSON round trip."""
    entry = SessionEntry(
        session_key="agent:main:feishu:dm:ou_1",
        session_id="20260512_012000_abcdef12",
        created_at=NOW,
        updated_at=NOW + timedelta(minutes=5),
        origin=SessionSource(platform="feishu", chat_id="ou_1", user_name="Lin"),
        suspended=True,
        revision=4,
    )
    data = json.loads(json.dumps(unstructure(entry)))
    assert structure(data, SessionEntry) == entry
    assert "display_name" not in data


def test_record_round_trip():
    """A session record with JSON fields survives a JSON round trip."""
    record = SessionRecord(
        id="20260509_211000_1fc499",
        source="cli",
        started_at=NOW,
        title="项目规划 #2",
        ended_at=NOW + timedelta(hours=1),
        end_reason="compression",
        message_count=3,
        estimated_cost_usd=0.029828,
        model_config={"max_tokens": None, "reasoning": {"effort": "medium"}},
        metadata={"cwd": "/home/x"},
        archived=True,
    )
    data = json.loads(json.dumps(unstructure(record)))
    assert structure(data, SessionRecord) == record


@pytest.mark.parametrize(
    ("data", "cls"),
    [
        ("not an object", Message),
        ({"content": "no role"}, Message),
        ({"role": "user", "timestamp": "2026-01-01T00:00:00"}, Message),
        ({"role": "user", "timestamp": "yesterday"}, Message),
        ({"role": "user", "timestamp": 1700000000}, Message),
        ({"role": "user", "id": "7"}, Message),
        ({"role": "user", "session_id": "../../etc"}, Message),
        ({"id": "s", "source": "cli"}, SessionRecord),
        ({**RECORD, "zzz": 1}, SessionRecord),
        ({**RECORD, "archived": "no"}, SessionRecord),
        ({**RECORD, "title": 5}, SessionRecord),
        ({**RECORD, "message_count": 1.5}, SessionRecord),
        ({**RECORD, "estimated_cost_usd": "1"}, SessionRecord),
        ([], SessionEntry),
        ({"session_key": "k", "session_id": "s", "created_at": NOW.isoformat()}, SessionEntry),
    ],
)
def test_malformed_input_is_a_corrupt_record(data, cls):
    """Malformed data raises CorruptRecordError, never a bare KeyError or cattrs error."""
    with pytest.raises(CorruptRecordError):
        structure(data, cls)


def test_corrupt_record_carries_the_location():
    """The caller's path and line are attached to the error."""
    with pytest.raises(CorruptRecordError) as info:
        structure({"role": 5}, Message, path="/data/x.jsonl", line=3)
    assert info.value.path == "/data/x.jsonl"
    assert info.value.line == 3


def test_one_converter_instance():
    """The library uses one converter, built once; make_converter builds fresh copies."""
    assert converter() is converter()
    assert make_converter() is not converter()


# -- round-trip properties -------------------------------------------------------------------------

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=10,
)
aware = st.datetimes(
    min_value=datetime(1990, 1, 1),  # noqa: DTZ001
    max_value=datetime(2100, 1, 1),  # noqa: DTZ001
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=8)), timezone(timedelta(hours=-5))]),
)
texts = st.none() | st.text(max_size=30)
ids = st.none() | st.text(min_size=1, max_size=10)
safe_ids = st.from_regex(r"[A-Za-z0-9_-][A-Za-z0-9_-]{0,20}", fullmatch=True)
parts = st.lists(st.dictionaries(st.text(max_size=6), json_values, max_size=3), max_size=3)
extra_keys = st.text(max_size=12).filter(lambda key: key not in MESSAGE_FIELDS)

messages = st.builds(
    Message,
    role=st.sampled_from(["user", "assistant", "tool", "system", "critic"]),
    content=st.none() | st.text(max_size=50) | parts,
    id=st.none() | st.integers(0, 2**40),
    session_id=st.none() | safe_ids,
    tool_calls=st.none() | parts,
    tool_call_id=texts,
    tool_name=texts,
    timestamp=st.none() | aware,
    token_count=st.none() | st.integers(0, 10**6),
    finish_reason=texts,
    reasoning=texts,
    platform_message_id=ids,
    sender_id=ids,
    sender_name=texts,
    active=st.booleans(),
    extra=st.dictionaries(extra_keys, json_values, max_size=4),
)


@given(messages, st.integers(0, 2**40), safe_ids)
def test_stored_messages_equal_the_validated_decoding(message, message_id, session_id):
    """The unvalidated read of a stored body builds exactly what the converter builds."""
    body = compact_json(message_dict(message, skip=frozenset({"id", "session_id", "active"})))
    expected = structure(
        json.loads(body) | {"id": message_id, "session_id": session_id, "active": message.active},
        Message,
    )
    fast = stored_messages([(message_id, int(message.active), body)], session_id)
    assert fast == [expected]
    assert attrs.asdict(fast[0]) == attrs.asdict(expected)
    if expected.timestamp is not None:
        assert fast[0].timestamp.tzinfo is UTC


def test_stored_message_sets_every_field():
    """A field added to Message must be read back too (the fast read names them one by one)."""
    message = stored_message({"role": "user"}, 1, "s1")
    for field in attrs.fields(Message):
        assert hasattr(message, field.name), field.name


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("{bad", "property name"),
        ("nope", "not JSON"),
        ("[1, 2]", "JSON object"),
        ('{"role":"user"} x', "extra data"),
        ('{"role":5}', "role must be text"),
        ('{"role":"user","content":5}', "content"),
        ('{"role":"user","tool_calls":{}}', "tool_calls"),
        ('{"role":"user","timestamp":"2026-05-12T01:00:00"}', "UTC offset"),
        ('{"role":"user","timestamp":7}', "fromisoformat"),
    ],
)
def test_a_damaged_stored_body_is_refused(body, reason):
    """What decoding needs is still checked; the backends turn this into CorruptRecordError."""
    with pytest.raises((ValueError, TypeError), match=reason):
        stored_messages([(1, 1, body)], "s1")


@given(messages)
def test_message_round_trip(message):
    """Every message survives dict → JSON text → dict → Message unchanged (times as instants)."""
    data = json.loads(json.dumps(unstructure(message)))
    assert structure(data, Message) == message


sources = st.builds(
    SessionSource,
    platform=st.sampled_from(["telegram", "feishu", "x.y-z_1"]),
    chat_id=ids,
    chat_type=st.sampled_from(["dm", "group", "thread"]),
    user_id=ids,
    user_id_alt=ids,
    thread_id=ids,
    chat_name=texts,
    user_name=texts,
    chat_topic=texts,
    scope_id=ids,
    parent_chat_id=ids,
    message_id=ids,
)
entries = st.builds(
    SessionEntry,
    session_key=st.text(max_size=40),
    session_id=safe_ids,
    created_at=aware,
    updated_at=aware,
    origin=st.none() | sources,
    display_name=texts,
    platform=st.none() | st.just("feishu"),
    chat_type=st.none() | st.just("group"),
    suspended=st.booleans(),
    resume_pending=st.booleans(),
    resume_reason=texts,
    last_prompt_tokens=st.none() | st.integers(0, 10**6),
    revision=st.integers(0, 10**9),
)
records = st.builds(
    SessionRecord,
    id=safe_ids,
    source=st.sampled_from(["cli", "telegram", "cron"]),
    started_at=aware,
    session_key=texts,
    user_id=ids,
    title=texts,
    parent_session_id=st.none() | safe_ids,
    ended_at=st.none() | aware,
    end_reason=texts,
    message_count=st.integers(0, 10**6),
    tool_call_count=st.integers(0, 10**6),
    input_tokens=st.integers(0, 10**9),
    estimated_cost_usd=st.none() | st.floats(0, 1e6, allow_nan=False) | st.integers(0, 100),
    model=texts,
    model_config=st.dictionaries(st.text(max_size=6), json_values, max_size=3),
    system_prompt=texts,
    archived=st.booleans(),
    metadata=st.dictionaries(st.text(max_size=6), json_values, max_size=3),
)


@given(st.one_of(entries, records))
def test_entry_and_record_round_trip(model):
    """Routing entries and session records survive a JSON round trip unchanged."""
    data = json.loads(json.dumps(unstructure(model)))
    assert structure(data, type(model)) == model


@given(st.one_of(sources, entries, records))
def test_models_unstructure_as_the_converter_does(model):
    """Sources, entries and records turned by hand equal what the converter makes."""
    assert unstructure(model) == converter().unstructure(model)
