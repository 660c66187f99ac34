"""SessionStore lifecycle scenarios on every backend: keys, appends, automatic resets, opening."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import attrs
import pytest
from store_scenarios import ALICE, BOB, DM, THREAD_ALICE, THREAD_BOB, reply, user, with_policy

from hermes_sessions import (
    InvalidIdError,
    KeyPolicy,
    Message,
    ResetPolicies,
    ResetPolicy,
    SessionNotFoundError,
    SessionSource,
)
from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.clock import SystemClock
from hermes_sessions.store import RotateEvent, SessionStore

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


def test_daily_and_idle_does_not_cut_an_active_chat_at_the_boundary(store, clock):
    """Under ``daily_and_idle`` a chat active across 04:00 carries on; a quiet one is reset."""
    policy = ResetPolicy(mode="daily_and_idle", idle_minutes=60, at_hour=4, timezone="UTC")
    gentle = with_policy(store, policy)
    clock.set(datetime(2026, 5, 13, 3, 50, tzinfo=UTC))
    first = gentle.get_or_create(DM)
    clock.set(datetime(2026, 5, 13, 4, 10, tzinfo=UTC))  # past 04:00, but idle 20 minutes
    assert gentle.get_or_create(DM).session_id == first.session_id
    clock.set(datetime(2026, 5, 13, 4, 45, tzinfo=UTC))  # idle 55 minutes: still going
    assert gentle.get_or_create(DM).session_id == first.session_id
    clock.set(datetime(2026, 5, 14, 4, 20, tzinfo=UTC))  # the next boundary finds it quiet
    second = gentle.get_or_create(DM)
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
