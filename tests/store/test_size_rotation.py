"""Rotation by size: a live session that reached max_messages or max_tokens continues in a child."""

from __future__ import annotations

from store_scenarios import DM, reply, user, with_policy

from hermes_sessions import ResetPolicy, RotateEvent, StateScope


def test_a_full_session_continues_in_a_child_on_the_next_lookup(store):
    """At max_messages the next lookup rotates with reason size; the child keeps the lineage."""
    capped = with_policy(store, ResetPolicy(mode="none", max_messages=4))
    rotations: list[RotateEvent] = []
    capped.on_rotate(rotations.append)
    first = capped.get_or_create(DM)
    capped.append(first.session_id, user("one"), reply("two"))
    capped.update_state({StateScope.session(first.session_id): {"topic": "tea"}})
    assert capped.get_or_create(DM).session_id == first.session_id  # 2 of 4: still room
    capped.append(first.session_id, user("three"), reply("four"))
    second = capped.get_or_create(DM)
    assert second.created
    assert second.reset is not None
    assert (second.reset.reason, second.reset.previous_session_id) == ("size", first.session_id)
    child = capped.session(second.session_id)
    assert child.parent_session_id == first.session_id
    assert child.message_count == 0
    assert second.state.session == {"topic": "tea"}
    assert capped.session(first.session_id).end_reason == "size"
    assert rotations[-1].reason == "size"
    assert capped.get_or_create(DM).session_id == second.session_id  # the child is empty


def test_max_tokens_counts_the_estimated_transcript(store):
    """A token cap rotates once the transcript's estimate reaches it."""
    capped = with_policy(store, ResetPolicy(mode="none", max_tokens=60))
    first = capped.get_or_create(DM)
    capped.append(first.session_id, user("x" * 100))  # 25 + 4 tokens
    assert capped.get_or_create(DM).session_id == first.session_id
    capped.append(first.session_id, reply("y" * 124))  # 31 + 4 tokens: 64 in all
    second = capped.get_or_create(DM)
    assert second.reset is not None
    assert second.reset.reason == "size"


def test_titles_number_on_like_compression(store):
    """A titled session's child takes the lineage's next title."""
    capped = with_policy(store, ResetPolicy(mode="none", max_messages=1))
    first = capped.get_or_create(DM)
    capped.set_title(first.session_id, "Trip")
    capped.append(first.session_id, user("hi"))
    second = capped.get_or_create(DM)
    assert capped.session(second.session_id).title == "Trip #2"


def test_before_rotate_hears_a_size_rotation(store):
    """The hook is called with reason size while the full session is still open."""
    capped = with_policy(store, ResetPolicy(mode="none", max_messages=1))
    heard = []
    capped.before_rotate(
        lambda ending: heard.append((ending.reason, capped.session(ending.session_id).end_reason))
    )
    first = capped.get_or_create(DM)
    capped.append(first.session_id, user("hi"))
    capped.get_or_create(DM)
    assert heard == [("size", None)]


def test_force_new_is_a_reset_not_a_size_rotation(store):
    """/new on a full session ends it session_reset, without a parent link."""
    capped = with_policy(store, ResetPolicy(mode="none", max_messages=1))
    first = capped.get_or_create(DM)
    capped.append(first.session_id, user("hi"))
    fresh = capped.get_or_create(DM, force_new=True)
    assert fresh.reset is None
    assert capped.session(first.session_id).end_reason == "session_reset"
