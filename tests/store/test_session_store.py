"""SessionStore lifecycle scenarios, run on every backend."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import attrs
import pytest

from hermes_sessions import (
    ConflictError,
    InvalidIdError,
    KeyPolicy,
    LeaseHeldError,
    Message,
    ResetPolicies,
    ResetPolicy,
    SessionNotFoundError,
    SessionSource,
    TitleConflictError,
)
from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.clock import SystemClock
from hermes_sessions.store import RotateEvent, SessionStore

DM = SessionSource(platform="feishu", chat_id="ou_lin", user_id="ou_lin", user_name="林晓")
ALICE = SessionSource(platform="feishu", chat_type="group", chat_id="oc_team", user_id="ou_alice")
BOB = SessionSource(platform="feishu", chat_type="group", chat_id="oc_team", user_id="ou_bob")
THREAD_ALICE = attrs.evolve(ALICE, chat_type="thread", thread_id="t_1")
THREAD_BOB = attrs.evolve(BOB, chat_type="thread", thread_id="t_1")


def user(text: str, **fields: object) -> Message:
    """A user message."""
    return Message(role="user", content=text, **fields)  # type: ignore[arg-type]


def reply(text: str) -> Message:
    """An assistant message."""
    return Message(role="assistant", content=text)


def with_policy(store: SessionStore, policy: ResetPolicy) -> SessionStore:
    """The same store with ``policy`` as its default reset policy."""
    return attrs.evolve(store, resets=ResetPolicies(policy))


# -- keys and first contact ------------------------------------------------------------------------


def test_first_contact_creates_a_session(store):
    """The first message of a conversation creates its session and routing entry."""
    lookup = store.get_or_create(DM)
    assert lookup.created
    assert lookup.reset is None
    assert lookup.entry.session_key == "agent:main:feishu:dm:ou_lin"
    record = store.session(lookup.session_id)
    assert (record.source, record.user_id, record.session_key) == (
        "feishu",
        "ou_lin",
        lookup.entry.session_key,
    )
    assert lookup.entry.display_name == "林晓"


def test_fresh_session_is_returned_unchanged(store, clock):
    """A second message within the policy returns the same session, not created."""
    first = store.get_or_create(DM)
    clock.advance(minutes=5)
    again = store.get_or_create(DM)
    assert not again.created
    assert again.entry == first.entry


def test_get_or_create_is_a_pure_read_when_fresh(store, clock):
    """Looking up a fresh session writes nothing (the revision and activity stay)."""
    first = store.get_or_create(DM)
    clock.advance(minutes=5)
    store.get_or_create(DM)
    entry = store.entry(first.entry.session_key)
    assert (entry.revision, entry.updated_at) == (first.entry.revision, first.entry.updated_at)


def test_group_members_are_isolated(store):
    """Two members of one group get separate sessions by default."""
    alice = store.get_or_create(ALICE)
    bob = store.get_or_create(BOB)
    assert alice.session_id != bob.session_id
    assert alice.entry.session_key.endswith(":ou_alice")


def test_thread_members_share_a_session(store):
    """Members of a thread share one session by default."""
    assert (
        store.get_or_create(THREAD_ALICE).session_id == store.get_or_create(THREAD_BOB).session_id
    )


def test_key_policy_can_isolate_threads(store):
    """With thread_sessions_per_user, thread members get their own sessions."""
    isolated = attrs.evolve(store, keys=KeyPolicy(thread_sessions_per_user=True))
    assert (
        isolated.get_or_create(THREAD_ALICE).session_id
        != isolated.get_or_create(THREAD_BOB).session_id
    )


def test_concurrent_first_contacts_make_one_session(store):
    """Threads racing on a new key all end up in one session."""
    barrier = threading.Barrier(6)
    seen: list[str] = []

    def contact() -> None:
        barrier.wait()
        seen.append(store.get_or_create(DM).session_id)

    threads = [threading.Thread(target=contact) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(seen)) == 1
    assert store.list_sessions().items[0].record.id == seen[0]
    assert len(store.list_sessions().items) == 1


# -- appending -------------------------------------------------------------------------------------


def test_append_stamps_time_and_records_activity(store, clock):
    """Appending fills timestamps from the clock and moves the key's activity forward."""
    lookup = store.get_or_create(DM)
    clock.advance(minutes=3)
    stored = store.append(lookup.session_id, user("你好"), reply("你好！"))
    assert [m.timestamp for m in stored] == [clock.now(), clock.now()]
    assert store.entry(lookup.entry.session_key).updated_at == clock.now()


def test_internal_appends_do_not_refresh_activity(store, clock):
    """``touch=False`` appends keep the key's last activity (and its expiry) unchanged."""
    lookup = store.get_or_create(DM)
    clock.advance(minutes=3)
    store.append(lookup.session_id, Message(role="system", content="job done"), touch=False)
    assert store.entry(lookup.entry.session_key).updated_at == lookup.entry.updated_at


def test_append_is_idempotent_on_platform_ids(store):
    """A redelivered platform message is stored once."""
    session_id = store.get_or_create(DM).session_id
    store.append(session_id, user("hi", platform_message_id="om_1"))
    store.append(session_id, user("hi", platform_message_id="om_1"))
    assert len(store.transcript(session_id)) == 1


def test_redact_applies_before_storage(make_backend, clock):
    """The redact hook rewrites messages before they are stored or indexed."""

    def hide_keys(message: Message) -> Message:
        text = str(message.content).replace("sk-SECRET", "[redacted]")
        return attrs.evolve(message, content=text)

    with SessionStore(make_backend(), clock=clock, redact=hide_keys) as store:
        session_id = store.get_or_create(DM).session_id
        store.append(session_id, user("my key is sk-SECRET"))
        assert store.transcript(session_id)[0].content == "my key is [redacted]"
        assert store.search("SECRET") == []


def test_touch_and_last_prompt_tokens(store, clock):
    """Touch records activity and the prompt size without a message."""
    key = store.get_or_create(DM).entry.session_key
    clock.advance(minutes=7)
    entry = store.touch(key, last_prompt_tokens=1200)
    assert (entry.updated_at, entry.last_prompt_tokens) == (clock.now(), 1200)
    with pytest.raises(SessionNotFoundError):
        store.touch("agent:main:x:dm:nobody")


def test_tail_and_paging(store):
    """Tail returns the last n messages in order; messages pages by id."""
    session_id = store.get_or_create(DM).session_id
    stored = store.append(session_id, *(user(f"m{n}") for n in range(6)))
    assert [m.content for m in store.tail(session_id, 2)] == ["m4", "m5"]
    assert [m.content for m in store.messages(session_id, after_id=stored[3].id)] == ["m4", "m5"]
    assert [m.content for m in store.messages(session_id, limit=2)] == ["m0", "m1"]


def test_unsafe_ids_are_refused(store):
    """Session ids that could name other files are refused before reaching the backend."""
    with pytest.raises(InvalidIdError):
        store.append("../../etc/passwd", user("x"))
    with pytest.raises(InvalidIdError):
        store.tail("a/b", 3)


# -- automatic resets ------------------------------------------------------------------------------


def test_idle_reset(store, clock):
    """After the idle timeout the next message starts a new session; the old one ends idle."""
    idle = with_policy(store, ResetPolicy(mode="idle", idle_minutes=30))
    first = idle.get_or_create(DM)
    idle.append(first.session_id, user("before"))
    clock.advance(minutes=31)
    second = idle.get_or_create(DM)
    assert second.created
    assert second.reset is not None
    assert (second.reset.reason, second.reset.previous_session_id) == ("idle", first.session_id)
    assert second.reset.notify
    old = idle.session(first.session_id)
    assert (old.end_reason, old.ended_at) == ("idle", clock.now())


def test_daily_reset_in_shanghai(store, clock):
    """A daily reset at 04:00 Shanghai time fires once the boundary passes."""
    daily = with_policy(store, ResetPolicy(mode="daily", at_hour=4, timezone="Asia/Shanghai"))
    clock.set(datetime(2026, 5, 12, 19, 30, tzinfo=UTC))  # 03:30 on the 13th in Shanghai
    first = daily.get_or_create(DM)
    clock.advance(minutes=20)  # 03:50
    assert not daily.get_or_create(DM).created
    clock.advance(minutes=20)  # 04:10
    second = daily.get_or_create(DM)
    assert second.reset is not None
    assert second.reset.reason == "daily"
    assert second.session_id != first.session_id


def test_daily_reset_across_dst(store, clock):
    """On the spring-forward night the 02:00 reset happens at 03:00 EDT, exactly once."""
    daily = with_policy(store, ResetPolicy(mode="daily", at_hour=2, timezone="America/New_York"))
    clock.set(datetime(2026, 3, 8, 6, 30, tzinfo=UTC))  # 01:30 EST
    first = daily.get_or_create(DM)
    clock.set(datetime(2026, 3, 8, 6, 59, tzinfo=UTC))  # 01:59 EST
    assert not daily.get_or_create(DM).created
    clock.set(datetime(2026, 3, 8, 7, 0, tzinfo=UTC))  # 03:00 EDT, the first instant after
    second = daily.get_or_create(DM)
    assert second.reset is not None
    assert second.reset.reason == "daily"
    clock.advance(hours=12)
    assert daily.get_or_create(DM).session_id == second.session_id != first.session_id


def test_notification_respects_excluded_platforms(store, clock):
    """Automatic resets on excluded platforms are not to be announced."""
    idle = with_policy(store, ResetPolicy(mode="idle", idle_minutes=1))
    hook = SessionSource(platform="webhook", chat_id="c1")
    idle.get_or_create(hook)
    clock.advance(minutes=2)
    reset = idle.get_or_create(hook).reset
    assert reset is not None
    assert not reset.notify


def test_active_work_keeps_a_session_alive(make_backend, clock):
    """A host's active-work callback blocks expiry (within the policy's cap)."""
    busy: set[str] = set()
    with SessionStore(
        make_backend(),
        clock=clock,
        resets=ResetPolicies(ResetPolicy(mode="idle", idle_minutes=10)),
        active_work=busy.__contains__,
    ) as store:
        first = store.get_or_create(DM)
        busy.add(first.entry.session_key)
        clock.advance(minutes=30)
        assert store.get_or_create(DM).session_id == first.session_id
        clock.advance(hours=30)
        assert store.get_or_create(DM).session_id != first.session_id


def test_suspended_beats_mode_none(store, clock):
    """A suspended key gets a new session even under a never-reset policy."""
    never = with_policy(store, ResetPolicy(mode="none"))
    first = never.get_or_create(DM)
    never.suspend(first.entry.session_key)
    clock.advance(minutes=1)
    second = never.get_or_create(DM)
    assert second.reset is not None
    assert second.reset.reason == "suspended"
    assert not second.entry.suspended
    assert never.session(first.session_id).end_reason == "suspended"


def test_resume_pending_still_expires(store, clock):
    """A resume-pending entry keeps its session only while the reset policy allows."""
    idle = with_policy(store, ResetPolicy(mode="idle", idle_minutes=60))
    first = idle.get_or_create(DM)
    key = first.entry.session_key
    entry = idle.mark_resume_pending(key, "gateway restart")
    assert (entry.resume_pending, entry.resume_reason) == (True, "gateway restart")
    clock.advance(minutes=30)
    assert idle.get_or_create(DM).session_id == first.session_id
    clock.advance(minutes=90)
    later = idle.get_or_create(DM)
    assert later.session_id != first.session_id
    assert not later.entry.resume_pending


def test_clear_resume_pending(store):
    """Clearing the flag leaves the session in place."""
    key = store.get_or_create(DM).entry.session_key
    store.mark_resume_pending(key, "restart")
    entry = store.clear_resume_pending(key)
    assert (entry.resume_pending, entry.resume_reason) == (False, None)


def test_concurrent_resets_make_one_new_session(store, clock):
    """Threads racing on an expired key all land in the same new session."""
    idle = with_policy(store, ResetPolicy(mode="idle", idle_minutes=1))
    first = idle.get_or_create(DM)
    clock.advance(minutes=5)
    barrier = threading.Barrier(5)
    seen: list[str] = []

    def contact() -> None:
        barrier.wait()
        seen.append(idle.get_or_create(DM).session_id)

    threads = [threading.Thread(target=contact) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(seen)) == 1
    assert seen[0] != first.session_id


def test_on_rotate_reports_every_change(store, clock):
    """Callbacks hear about first sessions and rotations; a failing callback is contained."""
    events: list[RotateEvent] = []

    @store.on_rotate
    def broken(event: RotateEvent) -> None:
        raise RuntimeError(event.reason)

    store.on_rotate(events.append)
    first = store.get_or_create(DM)
    second = store.reset(first.entry.session_key)
    assert [(e.old_session_id, e.new_session_id, e.reason) for e in events] == [
        (None, first.session_id, "created"),
        (first.session_id, second.session_id, "session_reset"),
    ]
    assert broken is not None


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


def test_resume_by_title_prefers_the_newest_variant(store, history):
    """'my project' resumes 'my project #2'; an explicit '#N' resumes that one."""
    key, ids = history
    assert store.resume(key, "My Project").session_id == ids["my project #2"]
    store.reset(key)
    assert store.resume(key, "my project #2").session_id == ids["my project #2"]
    assert store.resume(key, "notes").session_id == ids["notes"]


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


# -- rewinds and platform edits --------------------------------------------------------------------


def test_retry_deletes_the_last_turn(store):
    """Retry removes the last user message and everything after it, and returns it."""
    session_id = store.get_or_create(DM).session_id
    store.append(session_id, user("q1"), reply("a1"), user("q2"), reply("a2"), reply("a2b"))
    last = store.retry(session_id)
    assert last is not None
    assert last.content == "q2"
    assert [m.content for m in store.transcript(session_id, include_inactive=True)] == ["q1", "a1"]
    assert store.session(session_id).message_count == 2


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


@pytest.mark.parametrize(
    ("kind", "path"), [("sqlite", "state.db"), ("jsonl", "sessions"), ("memory", None)]
)
def test_open_builds_the_named_backend(tmp_path, kind, path):
    """SessionStore.open keeps each backend's files where the docs say, under the home."""
    with SessionStore.open(tmp_path, backend=kind) as store:
        session_id = store.get_or_create(DM).session_id
        store.append(session_id, user("hello"))
    if path is not None:
        assert (tmp_path / path).exists()
        with SessionStore.open(tmp_path, backend=kind) as again:
            assert again.transcript(session_id)[0].content == "hello"


def test_open_rejects_unknown_backends(tmp_path):
    """An unknown backend name is a clear ValueError."""
    with pytest.raises(ValueError, match="unknown backend"):
        SessionStore.open(tmp_path, backend="carrier-pigeon")  # type: ignore[arg-type]


def test_store_repr_and_clock():
    """The store names its backend, and the system clock is aware UTC."""
    store = SessionStore(InMemoryBackend())
    assert "InMemoryBackend" in repr(store)
    assert SystemClock().now().tzinfo is UTC
    assert repr(SystemClock()) == "SystemClock()"
    assert (SystemClock().now() - datetime.now(UTC)) < timedelta(minutes=1)
