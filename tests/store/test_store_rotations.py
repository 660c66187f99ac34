"""SessionStore explicit rotations on every backend: /new, /resume, /branch, compression, titles."""

from __future__ import annotations

import pytest
from store_scenarios import DM, THREAD_ALICE, THREAD_BOB, reply, user

from hermes_sessions import (
    ConflictError,
    LeaseHeldError,
    Message,
    SessionNotFoundError,
    SessionSource,
    TitleConflictError,
)

# -- /new, /resume, /branch ------------------------------------------------------------------------


def test_new_keeps_the_old_transcript_searchable(store):
    """/new starts a fresh session; the old one ends session_reset and stays searchable."""
    first = store.get_or_create(DM)
    store.append(first.session_id, user("部署 youer 到 staging"))
    entry = store.reset(first.entry.session_key, title="新的开始")
    assert entry.session_id != first.session_id
    assert store.session(first.session_id).end_reason == "session_reset"
    assert store.session(entry.session_id).title == "新的开始"
    assert [h.session.id for h in store.search("部署")] == [first.session_id]
    assert store.get_or_create(DM).session_id == entry.session_id


def test_new_on_an_unknown_key(store):
    """/new before any message is an error that says what to do."""
    with pytest.raises(SessionNotFoundError, match="get_or_create"):
        store.reset("agent:main:feishu:dm:nobody")


@pytest.fixture
def history(store, clock):
    """Lin's DM with three earlier sessions: 'my project', 'my project #2' and 'notes'."""
    key = store.get_or_create(DM).entry.session_key
    ids = {}
    for title in ("my project", "my project #2", "notes"):
        clock.advance(minutes=10)
        entry = store.reset(key, title=title)
        store.append(entry.session_id, user(f"talking about {title}"))
        ids[title] = entry.session_id
    clock.advance(minutes=10)
    store.reset(key)
    return key, ids


def test_resume_by_exact_id(store, history):
    """Resuming by id re-points the key; the session left ends session_switch."""
    key, ids = history
    current = store.entry(key).session_id
    entry = store.resume(key, ids["notes"])
    assert entry.session_id == ids["notes"]
    assert not store.session(ids["notes"]).is_ended
    assert store.session(current).end_reason == "session_switch"


def test_resume_by_unique_prefix(store, history):
    """A unique id prefix resumes; an ambiguous one lists the candidates."""
    key, ids = history
    target = ids["notes"]
    assert store.resume(key, target[:-2]).session_id == target
    with pytest.raises(LookupError) as info:
        store.resume(key, "2026")
    assert target in str(info.value)


def test_resume_by_title_prefers_the_exact_title(store, history):
    """'my project' resumes 'my project' itself, not the separate 'my project #2' (issue 11)."""
    key, ids = history
    assert store.resume(key, "My Project").session_id == ids["my project"]
    store.reset(key)
    assert store.resume(key, "my project #2").session_id == ids["my project #2"]
    assert store.resume(key, "notes").session_id == ids["notes"]


def test_resume_by_title_follows_compression_not_branches(store, clock):
    """'plan' lands on plan's compression tip ('plan #2'), never on its branch (issue 11)."""
    key = store.get_or_create(DM).entry.session_key
    plan = store.reset(key, title="plan").session_id
    store.append(plan, user("the plan"))
    clock.advance(minutes=1)
    branched = store.branch(key)
    assert store.session(branched.session_id).title == "plan #2"
    store.reset(key)
    assert store.resume(key, "plan").session_id == plan
    compressed = store.compress(plan, [user("summary of the plan")], holder="test")
    assert compressed.title == "plan #3"
    store.reset(key)
    assert store.resume(key, "plan").session_id == compressed.id


def test_resume_by_title_without_an_exact_match_takes_the_highest_number(store, clock):
    """With no session titled exactly 'draft', 'draft' resumes the highest 'draft #N'."""
    key = store.get_or_create(DM).entry.session_key
    ids = {}
    for title in ("draft #2", "draft #3"):
        clock.advance(minutes=1)
        ids[title] = store.reset(key, title=title).session_id
    store.reset(key)
    assert store.resume(key, "draft").session_id == ids["draft #3"]


def test_resume_refuses_other_users(store, history):
    """Another user cannot resume Lin's session by title, prefix or exact id."""
    _, ids = history
    other = SessionSource(platform="feishu", chat_id="ou_eve", user_id="ou_eve")
    eve_key = store.get_or_create(other).entry.session_key
    for target in ("notes", ids["notes"], ids["notes"][:-2]):
        with pytest.raises(SessionNotFoundError) as info:
            store.resume(eve_key, target)
        if target != ids["notes"]:
            assert ids["notes"] not in str(info.value), "the error leaks a hidden session"


def test_resume_allow_restores_global_access(store, history):
    """A custom allow rule (single-user bots) lets any key resume any session."""
    _, ids = history
    other = SessionSource(platform="feishu", chat_id="ou_eve", user_id="ou_eve")
    eve_key = store.get_or_create(other).entry.session_key
    entry = store.resume(eve_key, "notes", allow=lambda _requester, _record: True)
    assert entry.session_id == ids["notes"]


def test_shared_thread_members_may_resume_its_history(store, clock):
    """Sessions created under a shared thread key are resumable by every member."""
    first = store.get_or_create(THREAD_ALICE)
    key = first.entry.session_key
    store.set_title(first.session_id, "incident 42")
    store.reset(key)
    entry = store.resume(key, "incident 42", requester=THREAD_BOB)
    assert entry.session_id == first.session_id


def test_resume_unknown_target(store, history):
    """An unknown target raises SessionNotFoundError with a hint."""
    key, _ = history
    with pytest.raises(SessionNotFoundError, match="list_sessions"):
        store.resume(key, "no such thing")
    with pytest.raises(SessionNotFoundError):
        store.resume(key, "   ")


def test_resume_current_session_only_touches(store, clock, history):
    """Resuming the session the key already has just records activity."""
    key, _ = history
    current = store.entry(key)
    clock.advance(minutes=1)
    entry = store.resume(key, current.session_id)
    assert (entry.session_id, entry.revision) == (current.session_id, current.revision)
    assert entry.updated_at == clock.now()


def test_resume_records_activity(store, clock, history):
    """A resumed session does not expire at once: resuming counts as activity."""
    key, _ids = history
    clock.advance(days=3)
    entry = store.resume(key, "notes")
    assert entry.updated_at == clock.now()
    assert not store.get_or_create(DM).created


def test_branch_copies_and_numbers_titles(store):
    """/branch copies the transcript into a child titled next in the lineage."""
    first = store.get_or_create(DM)
    key = first.entry.session_key
    store.set_title(first.session_id, "plan")
    store.append(first.session_id, user("q1"), reply("a1"))
    child = store.branch(key)
    record = store.session(child.session_id)
    assert record.title == "plan #2"
    assert record.parent_session_id == first.session_id
    assert record.model_config["_branched_from"] == first.session_id
    assert [m.content for m in store.transcript(child.session_id)] == ["q1", "a1"]
    assert store.session(first.session_id).end_reason == "branched"
    grandchild = store.branch(key, title="experiment")
    assert store.session(grandchild.session_id).title == "experiment"


def test_branch_of_an_untitled_session(store):
    """An untitled session's branch is called 'branch'."""
    key = store.get_or_create(DM).entry.session_key
    assert store.session(store.branch(key).session_id).title == "branch"


# -- compression -----------------------------------------------------------------------------------


def test_compress_moves_every_key_to_a_numbered_child(store):
    """Compression ends the parent, re-points all its keys and numbers the child's title."""
    first = store.get_or_create(THREAD_ALICE)
    store.set_title(first.session_id, "项目规划")
    store.append(first.session_id, *(user(f"m{n}") for n in range(10)))
    summary = [Message(role="system", content="Summary: ten messages.")]
    child = store.compress(first.session_id, summary, holder="worker-1")
    assert child.title == "项目规划 #2"
    assert child.parent_session_id == first.session_id
    assert store.session(first.session_id).end_reason == "compression"
    assert store.get_or_create(THREAD_BOB).session_id == child.id
    assert [m.content for m in store.transcript(child.id)] == ["Summary: ten messages."]
    grandchild = store.compress(child.id, summary, holder="worker-1")
    assert grandchild.title == "项目规划 #3"


def test_compress_refuses_a_second_holder(store):
    """While one holder has the lease, another holder's compression is refused."""
    session_id = store.get_or_create(DM).session_id
    with store.compression_lease(session_id, "worker-1"):
        with pytest.raises(LeaseHeldError):
            store.compress(session_id, [], holder="worker-2")
        child = store.compress(session_id, [], holder="worker-1")
    assert store.session(child.id).parent_session_id == session_id


def test_compress_refuses_an_ended_session(store):
    """A session already compressed cannot fork a second child."""
    session_id = store.get_or_create(DM).session_id
    store.compress(session_id, [], holder="a")
    with pytest.raises(ConflictError):
        store.compress(session_id, [], holder="b")


def test_resume_follows_compression_to_the_tip(store, clock):
    """Resuming a compressed session lands on its newest descendant."""
    first = store.get_or_create(DM)
    key = first.entry.session_key
    store.set_title(first.session_id, "long talk")
    tip = store.compress(first.session_id, [], holder="w")
    store.reset(key)
    assert store.resume(key, first.session_id).session_id == tip.id
    assert store.resume(key, "long talk").session_id == tip.id


# -- titles ----------------------------------------------------------------------------------------


def test_titles_are_sanitised_and_unique_per_owner(store):
    """Titles are cleaned; the same owner cannot reuse one (case-insensitively)."""
    first = store.get_or_create(DM).session_id
    assert store.set_title(first, "  Deploy\tplan\u200b ").title == "Deploy plan"
    key = store.entry(store.key_for(DM)).session_key
    second = store.reset(key).session_id
    with pytest.raises(TitleConflictError) as info:
        store.set_title(second, "DEPLOY PLAN")
    assert info.value.other_session_id == first
    assert store.set_title(first, "deploy plan").title == "deploy plan"
    assert store.set_title(first, None).title is None


def test_other_owners_may_use_the_same_title(store):
    """Title uniqueness is per owner: another user may use the same title."""
    mine = store.get_or_create(DM).session_id
    other = store.get_or_create(SessionSource(platform="feishu", chat_id="ou_x", user_id="ou_x"))
    store.set_title(mine, "weekly")
    assert store.set_title(other.session_id, "weekly").title == "weekly"


def test_new_with_a_taken_title(store):
    """/new with a title the owner already uses is refused before anything changes."""
    first = store.get_or_create(DM)
    store.set_title(first.session_id, "taken")
    with pytest.raises(TitleConflictError):
        store.reset(first.entry.session_key, title="Taken")
    assert store.entry(first.entry.session_key).session_id == first.session_id
