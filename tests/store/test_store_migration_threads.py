"""Key migration carries Hermes's thread keys (``<chat>:<thread>``) over to the marked form."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_sessions import KeyPolicy, SessionEntry, SessionRecord, SessionSource
from hermes_sessions.legacy_keys import build_hermes_key

if TYPE_CHECKING:
    from hermes_sessions import SessionStore
    from hermes_sessions.clock import FrozenClock

TOPIC = SessionSource(
    platform="telegram", chat_type="supergroup", chat_id="-100", thread_id="42", user_id="42"
)


def old_entry(
    store: SessionStore,
    clock: FrozenClock,
    key: str,
    session_id: str,
    origin: SessionSource | None,
) -> None:
    """A session and its entry as a store built before the thread marker holds them."""
    now = clock.now()
    record = SessionRecord(id=session_id, source="telegram", started_at=now, session_key=key)
    store.backend.create_session(record)
    entry = SessionEntry(
        session_key=key, session_id=session_id, created_at=now, updated_at=now, origin=origin
    )
    store.backend.put_entry(entry, expected_revision=None)


def test_an_old_thread_key_with_its_origin_moves_to_the_marked_key(store, clock):
    """Under the same policy, a topic entry keyed the Hermes way moves to ``<chat>:thread:<id>``."""
    old_key = build_hermes_key(TOPIC, store.keys)
    assert old_key == "agent:main:telegram:group:-100:42"
    old_entry(store, clock, old_key, "s1", TOPIC)
    report = store.migrate_keys(store.keys, store.keys, dry_run=False)
    new_key = "agent:main:telegram:group:-100:thread:42"
    assert [(m.old_key, m.new_key, m.via) for m in report.moved] == [(old_key, new_key, "origin")]
    assert store.entry(new_key).session_id == "s1"
    assert store.session("s1").session_key == new_key
    assert store.get_or_create(TOPIC).session_id == "s1"
    assert not store.migrate_keys(store.keys, store.keys, dry_run=False).changed


def test_an_old_per_member_thread_key_moves_too(store, clock):
    """With both isolation flags, ``<chat>:<thread>:<member>`` moves to the marked form."""
    both = KeyPolicy(thread_sessions_per_user=True)
    old_entry(store, clock, build_hermes_key(TOPIC, both), "s1", TOPIC)
    report = store.migrate_keys(both, both, dry_run=False)
    assert [m.new_key for m in report.moved] == ["agent:main:telegram:group:-100:thread:42:42"]


def test_a_member_lane_next_to_an_old_topic_stays_where_it_is(store, clock):
    """The member whose user id equals the topic id keeps their own lane; only the topic moves."""
    member = SessionSource(platform="telegram", chat_type="group", chat_id="-100", user_id="42")
    lane = store.get_or_create(member).session_id
    old_key = build_hermes_key(TOPIC, store.keys)
    assert old_key == store.key_for(member)  # the collision the marker removes
    report = store.migrate_keys(store.keys, store.keys, dry_run=False)
    assert not report.changed
    assert store.entry(old_key).session_id == lane


def test_an_old_thread_key_without_origin_moves_when_members_were_shared(store, clock):
    """Without member isolation ``<chat>:<x>`` can only be a Hermes thread: it moves by its key."""
    shared = KeyPolicy(group_sessions_per_user=False)
    old_entry(store, clock, "agent:main:feishu:group:oc_1:omt_1", "s1", None)
    report = store.migrate_keys(shared, shared, dry_run=False)
    assert [(m.new_key, m.via) for m in report.moved] == [
        ("agent:main:feishu:group:oc_1:thread:omt_1", "key")
    ]


def test_an_old_thread_key_without_origin_under_isolation_is_reported(store, clock):
    """Under member isolation ``<chat>:<x>`` is a member or a Hermes thread: reported, not moved."""
    key = "agent:main:feishu:group:oc_1:omt_1"
    old_entry(store, clock, key, "s1", None)
    report = store.migrate_keys(store.keys, store.keys, dry_run=False)
    assert [(s.key, s.reason) for s in report.skipped] == [(key, "no_origin")]
    assert store.entry(key).session_id == "s1"
