"""/new, /resume and /branch as the very first message of a chat (issue 11): no empty session."""

from __future__ import annotations

import pytest
from store_scenarios import DM, user

from hermes_sessions import SessionNotFoundError, SessionSource


def _sessions(store):
    return [item.record for item in store.list_sessions(limit=None).items]


def test_new_on_first_contact_creates_one_titled_session(store):
    """/new before any message: one session, titled; no empty session ended beside it."""
    key = store.key_for(DM)
    entry = store.reset(key, source=DM, title="deploy plan")
    (record,) = _sessions(store)
    assert record.id == entry.session_id
    assert record.title == "deploy plan"
    assert not record.is_ended
    assert entry.origin == DM
    assert store.get_or_create(DM).session_id == entry.session_id


def test_branch_on_first_contact_creates_an_empty_titled_session(store):
    """/branch with nothing to copy: an empty session titled like a branch."""
    key = store.key_for(DM)
    entry = store.branch(key, source=DM)
    (record,) = _sessions(store)
    assert (record.id, record.title, record.message_count) == (entry.session_id, "branch", 0)
    assert store.branch(store.key_for(DM)).session_id != entry.session_id


def test_resume_on_first_contact_points_the_key_at_the_target(store):
    """/resume before any message: the key goes straight to the old session, nothing else."""
    key = store.key_for(DM)
    old = store.reset(key, source=DM, title="notes")
    store.append(old.session_id, user("remember the staging port"))
    store.backend.delete_entry(key, expected_revision=store.entry(key).revision)  # a new host
    entry = store.resume(key, "notes", source=DM)
    assert entry.session_id == old.session_id
    assert [r.id for r in _sessions(store)] == [old.session_id]


def test_resume_on_first_contact_still_applies_the_access_rule(store):
    """Another user's first message cannot resume Lin's session."""
    key = store.key_for(DM)
    store.reset(key, source=DM, title="notes")
    eve = SessionSource(platform="feishu", chat_id="ou_eve", user_id="ou_eve")
    with pytest.raises(SessionNotFoundError):
        store.resume(store.key_for(eve), "notes", source=eve)
    assert store.backend.get_entry(store.key_for(eve)) is None


def test_commands_without_source_on_a_new_key_say_what_to_pass(store):
    """Without ``source=`` there is nothing to create the key from; the error says so."""
    key = store.key_for(DM)
    for command in (store.reset, store.branch):
        with pytest.raises(SessionNotFoundError, match="source="):
            command(key)
    with pytest.raises(SessionNotFoundError, match="source="):
        store.resume(key, "anything")


def test_a_source_of_another_key_is_refused(store):
    """``source=`` must be the message that carried the command to this key."""
    other = SessionSource(platform="telegram", chat_id="9", user_id="9")
    with pytest.raises(ValueError, match="builds the key"):
        store.reset(store.key_for(DM), source=other)
