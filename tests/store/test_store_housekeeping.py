"""SessionStore housekeeping: pruning, erasing a user, rebuilding routing entries."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hermes_sessions import Message, SessionNotFoundError, SessionSource

LIN = SessionSource(platform="feishu", chat_id="ou_lin", user_id="ou_lin")
EVE = SessionSource(platform="feishu", chat_id="ou_eve", user_id="ou_eve")
THREAD = SessionSource(
    platform="feishu", chat_type="thread", chat_id="oc_team", thread_id="t1", user_id="ou_lin"
)


def user(text: str, **fields: object) -> Message:
    """A user message."""
    return Message(role="user", content=text, **fields)  # type: ignore[arg-type]


def test_prune_dry_run_then_real(store, clock):
    """Prune reports without deleting by default, spares chats still talking, then deletes."""
    old = store.get_or_create(LIN)
    store.append(old.session_id, user("ancient history"))
    key = old.entry.session_key
    store.reset(key)
    clock.advance(days=40)
    store.touch(key)  # the chat is talking again: its live session is recent
    live = store.get_or_create(EVE).session_id
    report = store.prune(timedelta(days=30))
    assert report.dry_run
    assert report.session_ids == (old.session_id,)
    assert report.messages == 1
    assert report.bytes > 0
    assert store.session(old.session_id).id == old.session_id
    done = store.prune(timedelta(days=30), dry_run=False)
    assert done.session_ids == (old.session_id,)
    with pytest.raises(SessionNotFoundError):
        store.session(old.session_id)
    assert store.session(live).id == live
    assert store.search("ancient") == []
    assert store.prune(clock.now(), dry_run=False, sources=["telegram"]).session_ids == ()


def test_prune_orphans_children(store, clock):
    """Pruning a compressed parent keeps its child, which loses its parent link."""
    first = store.get_or_create(LIN)
    tip = store.compress(first.session_id, [user("summary")], holder="w")
    clock.advance(days=10)
    store.touch(first.entry.session_key)
    store.prune(timedelta(days=1), dry_run=False)
    assert store.session(tip.id).parent_session_id is None


def test_erase_user_leaves_no_trace(store):
    """erase_user deletes the user's sessions, keys, messages in shared sessions, and hits."""
    lin = store.get_or_create(LIN)
    store.append(lin.session_id, user("my secret plan", sender_id="ou_lin"))
    shared = store.get_or_create(THREAD).session_id
    store.append(
        shared,
        user("lin says pineapple", sender_id="ou_lin"),
        user("eve says mango", sender_id="ou_eve"),
    )
    eve = store.get_or_create(EVE)
    store.append(eve.session_id, user("eve alone"))
    report = store.erase_user(LIN.platform, "ou_lin")
    assert report.sessions == (lin.session_id,)
    assert report.messages == 1
    assert report.entries == (lin.entry.session_key,)
    with pytest.raises(SessionNotFoundError):
        store.session(lin.session_id)
    assert store.backend.get_entry(lin.entry.session_key) is None
    assert [m.content for m in store.transcript(shared)] == ["eve says mango"]
    assert store.session(shared).user_id is None
    assert store.search("secret") == []
    assert store.search("pineapple") == []
    assert len(store.search("mango")) == 1
    assert store.session(eve.session_id).message_count == 1


def test_rebuild_routing_from_records(store, clock):
    """Lost routing entries are recreated from the session keys kept on records."""
    lin = store.get_or_create(LIN)
    thread = store.get_or_create(THREAD)
    clock.advance(minutes=1)
    newer = store.reset(lin.entry.session_key)
    for entry in store.backend.entries():
        store.backend.delete_entry(entry.session_key, expected_revision=entry.revision)
    assert store.rebuild_routing() == 2
    assert store.entry(lin.entry.session_key).session_id == newer.session_id
    assert store.entry(thread.entry.session_key).session_id == thread.session_id
    assert store.rebuild_routing() == 0
    assert not store.get_or_create(LIN).created
