"""SessionStore transcript edits on every backend: /retry, /undo, restore, recalls and edits."""

from __future__ import annotations

import attrs
import pytest
from store_scenarios import DM, reply, user, with_policy

from hermes_sessions import ResetPolicy, SessionNotFoundError

# -- rewinds and platform edits --------------------------------------------------------------------


def test_retry_keeps_the_question_and_parks_the_answers(store):
    """Retry keeps the last user message, soft-deletes what followed, returns it (issue 11)."""
    session_id = store.get_or_create(DM).session_id
    store.append(
        session_id, user("q1"), reply("a1"), user("q2", platform_message_id="m2"), reply("a2")
    )
    store.append(session_id, reply("a2b"))
    last = store.retry(session_id)
    assert last is not None
    assert (last.content, last.active) == ("q2", True)
    assert [m.content for m in store.transcript(session_id)] == ["q1", "a1", "q2"]
    parked = [m for m in store.transcript(session_id, include_inactive=True) if not m.active]
    assert [m.content for m in parked] == ["a2", "a2b"]
    assert store.session(session_id).message_count == 3
    # The question is still known, so its redelivery is recognised; the new reply goes alone.
    assert store.seen(session_id, "m2") == last
    store.append(session_id, reply("a2 again"))
    assert [m.content for m in store.transcript(session_id)] == ["q1", "a1", "q2", "a2 again"]
    assert store.restore(session_id, parked) == 2


def test_retry_without_a_user_message(store):
    """Retry on a session with no user message returns None and changes nothing."""
    session_id = store.get_or_create(DM).session_id
    store.append(session_id, reply("hello"))
    assert store.retry(session_id) is None
    assert len(store.transcript(session_id)) == 1


def test_undo_and_restore(store):
    """Undo soft-deletes back to the n-th last user message; restore brings it back."""
    session_id = store.get_or_create(DM).session_id
    store.append(session_id, user("q1"), reply("a1"), user("q2"), reply("a2"), user("q3"))
    removed = store.undo(session_id, 2)
    assert [m.content for m in removed] == ["q2", "a2", "q3"]
    assert all(not m.active for m in removed)
    assert [m.content for m in store.transcript(session_id)] == ["q1", "a1"]
    assert store.session(session_id).message_count == 2
    assert store.restore(session_id, removed) == 3
    assert len(store.transcript(session_id)) == 5
    with pytest.raises(ValueError, match="n >= 1"):
        store.undo(session_id, 0)


def test_undo_pages_through_long_transcripts(store):
    """Undo finds user messages far back in a long transcript."""
    session_id = store.get_or_create(DM).session_id
    store.append(session_id, user("start"), *(reply(f"r{n}") for n in range(150)))
    removed = store.undo(session_id)
    assert len(removed) == 151
    assert store.undo(session_id) == []


def test_retract_and_edit_by_platform_id(store):
    """A recalled message is soft-deleted; an edited one is replaced and re-indexed."""
    session_id = store.get_or_create(DM).session_id
    store.append(
        session_id,
        user("typo teh", platform_message_id="om_1"),
        user("oops", platform_message_id="om_2"),
    )
    edited = store.edit(session_id, "om_1", "typo the")
    assert edited.content == "typo the"
    assert store.search("teh") == []
    assert len(store.search("typo")) == 1
    retracted = store.retract(session_id, "om_2")
    assert retracted is not None
    assert not retracted.active
    assert [m.content for m in store.transcript(session_id)] == ["typo the"]
    assert store.retract(session_id, "om_404") is None
    with pytest.raises(SessionNotFoundError):
        store.edit(session_id, "om_404", "x")


# -- edits and recalls after a reset (issue 34, item 8) --------------------------------------------


def idle_reset_after(store, clock, *messages):
    """Store ``messages`` in DM's session, then let the idle policy reset the key."""
    idle = with_policy(store, ResetPolicy(mode="idle", idle_minutes=60))
    lookup = idle.get_or_create(DM)
    stored = idle.append(lookup.session_id, *messages)
    clock.advance(hours=2)
    assert idle.get_or_create(DM).reset is not None
    return idle, lookup, stored


def test_an_edit_by_key_reaches_the_session_the_key_left(store, clock):
    """After an idle reset, editing by key updates the message where it is; search follows."""
    idle, lookup, (old,) = idle_reset_after(
        store, clock, user("typo teh", platform_message_id="o1")
    )
    edited = idle.edit(lookup.entry.session_key, "o1", "typo the")
    assert (edited.id, edited.session_id, edited.content) == (old.id, lookup.session_id, "typo the")
    assert idle.search("teh") == []
    assert [hit.message.id for hit in idle.search("typo")] == [old.id]


def test_a_recall_by_key_reaches_the_session_the_key_left(store, clock):
    """After an idle reset, recalling by key soft-deletes the message; search drops it."""
    idle, lookup, (old,) = idle_reset_after(
        store, clock, user("secret plan", platform_message_id="o1")
    )
    retracted = idle.retract(lookup.entry.session_key, "o1")
    assert retracted is not None
    assert (retracted.id, retracted.session_id, retracted.active) == (
        old.id,
        lookup.session_id,
        False,
    )
    assert idle.search("secret") == []


def test_by_key_an_unknown_message_is_not_found(store):
    """By key, an unknown message is SessionNotFoundError to edit and None to recall."""
    key = store.get_or_create(DM).entry.session_key
    with pytest.raises(SessionNotFoundError, match="o404"):
        store.edit(key, "o404", "x")
    assert store.retract(key, "o404") is None
    unknown = store.key_for(attrs.evolve(DM, chat_id="ou_nobody", user_id="ou_nobody"))
    with pytest.raises(SessionNotFoundError):
        store.edit(unknown, "o1", "x")
    assert store.retract(unknown, "o1") is None
