"""Hermes import against small profiles built from the schema facts in DESIGN §9."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from hermes_sessions import InvalidSourceError, SessionStore
from hermes_sessions.backends import InMemoryBackend
from hermes_sessions.interop import import_hermes
from hermes_sessions.memory import MemoryStore
from hermes_sessions.models import Message, SessionEntry, SessionRecord

ZONE = "Asia/Shanghai"


def _store():
    return SessionStore(InMemoryBackend())


def test_columns_and_messages_are_kept(profile):
    """Ids, titles, lineage, end reasons, counters, multimodal content, tool calls, reasoning."""
    profile.session(
        "20260512_092000_aaaa",
        user_id="55",
        title="部署 docker",
        input_tokens=10,
        output_tokens=5,
        ended_at=1_778_549_000.0,
        end_reason="session_reset",
        estimated_cost_usd=0.5,
        cwd="/srv",
        model_config='{"max_tokens": null}',
        archived=1,
    )
    profile.session("20260512_100000_bbbb", parent_session_id="20260512_092000_aaaa")
    parts = [{"type": "text", "text": "看图"}, {"type": "image_url", "image_url": {"url": "x"}}]
    profile.message("20260512_092000_aaaa", "user", "\x00json:" + json.dumps(parts))
    calls = [{"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]
    profile.message(
        "20260512_092000_aaaa",
        "assistant",
        "",
        tool_calls=json.dumps(calls),
        reasoning="think",
        reasoning_content="",
        reasoning_details='[{"type": "reasoning.text"}]',
    )
    profile.message("20260512_092000_aaaa", "tool", "ok", tool_call_id="c1", tool_name="terminal")
    profile.message("20260512_092000_aaaa", "user", "undone", active=0, platform_message_id="p9")
    store = _store()
    report = import_hermes(profile.root, store, timezone=ZONE)
    assert report.sessions == ("20260512_092000_aaaa", "20260512_100000_bbbb")
    record = store.session("20260512_092000_aaaa")
    assert (record.title, record.user_id, record.end_reason, record.archived) == (
        "部署 docker",
        "55",
        "session_reset",
        True,
    )
    assert (record.input_tokens, record.output_tokens, record.estimated_cost_usd) == (10, 5, 0.5)
    assert record.ended_at == datetime.fromtimestamp(1_778_549_000.0, UTC)
    assert record.metadata["hermes"]["cwd"] == "/srv"
    assert record.model_config == {"max_tokens": None}
    assert store.session("20260512_100000_bbbb").parent_session_id == "20260512_092000_aaaa"
    messages = store.transcript("20260512_092000_aaaa", include_inactive=True)
    assert messages[0].content == parts
    assert messages[1].tool_calls == calls
    assert messages[1].reasoning == "think"
    assert messages[1].extra["reasoning_content"] == ""
    assert messages[1].extra["reasoning_details"] == [{"type": "reasoning.text"}]
    assert (messages[2].tool_name, messages[2].tool_call_id) == ("terminal", "c1")
    assert (messages[3].active, messages[3].platform_message_id) == (False, "p9")
    assert record.message_count == 3


def test_routing_times_are_local_to_the_profile_zone(profile):
    """Naive sessions.json datetimes are read in the profile's zone and the origin is kept."""
    profile.session("s1")
    profile.routing(
        {
            "agent:main:telegram:dm:55": {
                "session_id": "s1",
                "created_at": "2026-05-12T09:20:00",
                "updated_at": "2026-05-12T09:30:00",
                "platform": "telegram",
                "chat_type": "dm",
                "last_prompt_tokens": 7,
                "origin": {"platform": "telegram", "chat_id": "55", "user_id": "55"},
            }
        }
    )
    store = _store()
    import_hermes(profile.root, store, timezone=ZONE)
    entry = store.entry("agent:main:telegram:dm:55")
    assert entry.created_at == datetime(2026, 5, 12, 1, 20, tzinfo=UTC)
    assert entry.origin is not None
    assert (entry.origin.user_id, entry.last_prompt_tokens) == ("55", 7)
    assert store.session("s1").session_key == "agent:main:telegram:dm:55"


def test_longer_jsonl_wins_and_a_torn_line_is_reported(profile):
    """A legacy transcript with more messages adds them; a truncated last line is skipped."""
    profile.session("s1")
    profile.message("s1", "user", "一")
    lines = [
        {"role": "session_meta", "platform": "telegram"},
        {"role": "user", "content": "一", "timestamp": "2026-05-12T09:20:01"},
        {"role": "assistant", "content": "二", "timestamp": "2026-05-12T09:20:02"},
    ]
    profile.jsonl("s1", lines, tail=b'{"role": "user", "cont')
    store = _store()
    report = import_hermes(profile.root, store, timezone=ZONE)
    assert report.jsonl_preferred == ("s1",)
    assert [m.content for m in store.transcript("s1")] == ["一", "二"]
    assert store.transcript("s1")[1].timestamp == datetime(2026, 5, 12, 1, 20, 2, tzinfo=UTC)
    kinds = [p.kind for p in report.problems]
    assert "truncated_line" in kinds
    assert "jsonl_preferred" in kinds


def test_a_differing_jsonl_replaces_the_database_copy(profile):
    """When the longer JSONL does not start with the database's messages, it is taken whole."""
    profile.session("s1")
    profile.message("s1", "user", "db only")
    lines = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    profile.jsonl("s1", lines)
    store = _store()
    import_hermes(profile.root, store, timezone=ZONE)
    assert [m.content for m in store.transcript("s1")] == ["a", "b"]


def test_lone_surrogates_and_oversize_messages_are_reported(profile):
    """Lone surrogates become U+FFFD and long messages are imported whole but reported."""
    profile.session("s1")
    profile.message("s1", "user", "bad \ud800 text".encode("utf-8", "surrogatepass"))
    profile.message("s1", "assistant", "x" * 500)
    store = _store()
    report = import_hermes(profile.root, store, timezone=ZONE, max_message_chars=100)
    contents = [m.content for m in store.transcript("s1")]
    assert contents[0] == "bad \ufffd text"
    assert contents[1] == "x" * 500
    assert {p.kind for p in report.problems} >= {"surrogates", "oversize"}


def test_second_import_is_idempotent(profile):
    """Importing the same profile twice writes nothing the second time."""
    profile.session("s1")
    profile.message("s1", "user", "hi")
    profile.memory("MEMORY.md", ["note one", "note two"])
    profile.routing({"k": {"session_id": "s1", "created_at": "2026-05-12T09:20:00"}})
    store = _store()
    memory = MemoryStore(profile.root.parent / "target-memories")
    first = import_hermes(profile.root, store, timezone=ZONE, memory=memory)
    again = import_hermes(profile.root, store, timezone=ZONE, memory=memory)
    assert (first.sessions, first.entries, first.memory_entries) == (("s1",), ("k",), 2)
    assert (again.sessions, again.entries, again.memory_entries, again.messages) == ((), (), 0, 0)
    assert again.skipped_sessions == ("s1",)
    assert len(store.transcript("s1")) == 1


def test_conflicting_target_is_reported_not_overwritten(profile):
    """A different session or key already in the target is kept and listed as a conflict."""
    profile.session("s1", started=1_000.0)
    profile.message("s1", "user", "from hermes")
    profile.routing({"k": {"session_id": "s1", "created_at": "2026-05-12T09:20:00"}})
    store = _store()
    now = datetime(2026, 1, 1, tzinfo=UTC)
    store.backend.create_session(SessionRecord(id="s1", source="cli", started_at=now))
    store.backend.create_session(SessionRecord(id="s2", source="cli", started_at=now))
    store.backend.append_messages("s1", [Message(role="user", content="mine", timestamp=now)])
    store.backend.put_entry(
        SessionEntry(session_key="k", session_id="s2", created_at=now, updated_at=now),
        expected_revision=None,
    )
    report = import_hermes(profile.root, store, timezone=ZONE)
    assert [p.where for p in report.problems if p.kind == "conflict"] == ["s1", "k"]
    assert store.transcript("s1")[0].content == "mine"


def test_not_a_hermes_home_is_refused(tmp_path):
    """A directory without state.db or sessions.json is refused with a clear error."""
    with pytest.raises(InvalidSourceError, match="not a Hermes home"):
        import_hermes(tmp_path, _store(), timezone=ZONE)
    with pytest.raises(InvalidSourceError, match="not a directory"):
        import_hermes(tmp_path / "missing", _store(), timezone=ZONE)


def test_unknown_time_zone_is_refused(profile):
    """An unknown zone name is a clear error."""
    with pytest.raises(InvalidSourceError, match="unknown time zone"):
        import_hermes(profile.root, _store(), timezone="Mars/Olympus")


def test_a_broken_database_is_refused(tmp_path):
    """A state.db that is not a Hermes database is refused, naming the file."""
    home = tmp_path / "h"
    home.mkdir()
    (home / "state.db").write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(InvalidSourceError, match=r"state\.db"):
        import_hermes(home, _store(), timezone=ZONE)


def test_source_is_never_written(profile):
    """Importing leaves every file of the profile byte-identical."""
    profile.session("s1")
    profile.message("s1", "user", "hi")
    profile.close()
    before = {p: p.read_bytes() for p in profile.root.rglob("*") if p.is_file()}
    import_hermes(profile.root, _store(), timezone=ZONE)
    after = {p: p.read_bytes() for p in profile.root.rglob("*") if p.is_file()}
    assert before == after


def test_messages_over_the_backends_limit_are_skipped_and_reported(profile):
    """A message the target backend refuses as too large is left out; the others are imported."""
    profile.session("s1")
    profile.message("s1", "user", "short")
    profile.message("s1", "assistant", "y" * 500)
    profile.message("s1", "user", "after")
    store = SessionStore(InMemoryBackend(max_message_bytes=200))
    report = import_hermes(profile.root, store, timezone=ZONE)
    assert [m.content for m in store.transcript("s1")] == ["short", "after"]
    (problem,) = [p for p in report.problems if p.kind == "too_large"]
    assert problem.where == "s1"
    assert "200" in problem.detail
