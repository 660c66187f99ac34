"""Retention: RetentionPolicy, SessionStore.maintain, the async twin and its schedule.

Every test runs on a frozen clock; the schedule is driven through its sleep, never by waiting.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_scenarios import inject_before_delete

from hermes_sessions import (
    Message,
    ResetPolicies,
    ResetPolicy,
    RetentionPolicy,
    RetentionReport,
    SessionNotFoundError,
    SessionSource,
    SessionStore,
)
from hermes_sessions.aio import AsyncSessionStore, _maintenance
from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.clock import FrozenClock
from hermes_sessions.store import _retention

LIN = SessionSource(platform="feishu", chat_id="ou_lin", user_id="ou_lin")
EVE = SessionSource(platform="feishu", chat_id="ou_eve", user_id="ou_eve")
TG = SessionSource(platform="telegram", chat_id="42", user_id="42")


NEVER = ResetPolicies(ResetPolicy(mode="none"))
"""Keys that never reset by themselves: their live sessions never expire."""


@pytest.fixture
def store(make_backend, clock):
    """A store whose keys never reset by themselves (expiry has tests of its own below)."""
    with SessionStore(make_backend(), clock=clock, resets=NEVER) as opened:
        yield opened


def user(text: str) -> Message:
    """A user message."""
    return Message(role="user", content=text)


def history(store: SessionStore, source: SessionSource, n: int, *, gap: float = 1) -> list[str]:
    """``n`` sessions of ``source``'s key, one day apart; the last is live. Returns the ids."""
    ids = []
    key = store.key_for(source)
    for i in range(n):
        lookup = store.get_or_create(source)
        store.append(lookup.session_id, user(f"turn {i} of {key}"))
        ids.append(lookup.session_id)
        store.clock.advance(days=gap)  # type: ignore[attr-defined]
        if i < n - 1:
            store.reset(key)
    return ids


def exists(store: SessionStore, session_id: str) -> bool:
    """Whether the session is still stored."""
    try:
        store.session(session_id)
    except SessionNotFoundError:
        return False
    return True


# -- the policy --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"max_age": timedelta(days=-1)},
        {"max_age": 30},
        {"max_sessions_per_key": 0},
        {"max_sessions_per_key": True},
        {"max_sessions_per_key": 2.5},
        {"max_store_bytes": -1},
    ],
)
def test_policy_rejects_bad_values(fields):
    """Each limit is validated, with a message naming it."""
    with pytest.raises(ValueError, match=next(iter(fields))):
        RetentionPolicy(**fields)


def test_policy_sources_is_a_sequence():
    """A single string for sources is refused; a list becomes a tuple."""
    with pytest.raises(TypeError, match="sequence"):
        RetentionPolicy(sources="feishu")  # type: ignore[arg-type]
    assert RetentionPolicy(sources=["feishu"]).sources == ("feishu",)


def test_maintain_needs_a_policy(store):
    """Without a policy and without the store's ``retention``, maintain says what to do."""
    with pytest.raises(ValueError, match="retention="):
        store.maintain()


def test_an_empty_policy_removes_nothing(store):
    """Every rule off: nothing goes."""
    history(store, LIN, 3)
    report = store.maintain(RetentionPolicy())
    assert report.removed == ()
    assert report.bytes == 0


# -- each rule alone ---------------------------------------------------------------------------


def test_max_age_removes_old_ended_sessions(store, clock):
    """Ended sessions idle longer than max_age go; recent ones and the live one stay."""
    ids = history(store, LIN, 4)  # last active on days 0, 1, 2 and 3; now is day 4
    report = store.maintain(RetentionPolicy(max_age=timedelta(days=2, hours=12)))
    assert report.session_ids == (ids[0], ids[1])
    assert {r.rule for r in report.removed} == {"max_age"}
    assert report.messages == 2
    assert report.bytes > 0
    assert not report.dry_run
    assert [exists(store, i) for i in ids] == [False, False, True, True]


def test_max_sessions_per_key_keeps_the_newest(store):
    """Per key, the oldest ended sessions go until the count fits; other keys are counted apart."""
    lin = history(store, LIN, 5)
    eve = history(store, EVE, 2)
    report = store.maintain(RetentionPolicy(max_sessions_per_key=2))
    assert report.session_ids == tuple(lin[:3])
    assert {r.rule for r in report.removed} == {"max_sessions_per_key"}
    assert [exists(store, i) for i in lin + eve] == [False] * 3 + [True] * 4


def test_max_store_bytes_removes_oldest_across_keys(store):
    """The oldest ended sessions of any key go until the estimated size fits."""
    lin = history(store, LIN, 3)
    eve = history(store, EVE, 3)
    full = store.maintain(RetentionPolicy(max_store_bytes=10**12), dry_run=True).store_bytes
    assert full is not None
    one = store.maintain(RetentionPolicy(max_store_bytes=full - 1), dry_run=True)
    assert one.session_ids == (lin[0],)
    assert one.store_bytes == full - one.bytes
    report = store.maintain(RetentionPolicy(max_store_bytes=0))
    assert report.session_ids == (lin[0], lin[1], eve[0], eve[1])
    assert {r.rule for r in report.removed} == {"max_store_bytes"}
    assert report.store_bytes is not None
    assert report.store_bytes > 0  # only the two live sessions remain, and they are protected
    assert set(report.spared) == set()  # live sessions are never candidates at all
    assert exists(store, lin[2])
    assert exists(store, eve[2])


def test_sources_limit_what_goes(store):
    """With sources, only those platforms' sessions are removed."""
    lin = history(store, LIN, 3)
    tg = history(store, TG, 3)
    report = store.maintain(RetentionPolicy(max_sessions_per_key=1, sources=["telegram"]))
    assert report.session_ids == tuple(tg[:2])
    assert all(exists(store, i) for i in lin)


# -- rules combined, dry run -------------------------------------------------------------------


def test_rules_run_in_order_and_each_names_its_removals(store, clock):
    """Age first, then per-key count, then size; each removal names the rule that took it."""
    lin = history(store, LIN, 5)  # days 0..4, now day 5
    eve = history(store, EVE, 2)  # days 5..6, now day 7
    policy = RetentionPolicy(
        max_age=timedelta(days=6, hours=12), max_sessions_per_key=3, max_store_bytes=0
    )
    report = store.maintain(policy, dry_run=True)
    rules = {r.session_id: r.rule for r in report.removed}
    assert rules == {
        lin[0]: "max_age",
        lin[1]: "max_sessions_per_key",
        lin[2]: "max_store_bytes",
        lin[3]: "max_store_bytes",
        eve[0]: "max_store_bytes",
    }
    assert report.session_ids[0] == lin[0]


def test_dry_run_deletes_nothing_and_reports_the_same(store):
    """A dry run reports exactly what the real pass then deletes."""
    ids = history(store, LIN, 4) + history(store, EVE, 3)
    policy = RetentionPolicy(max_sessions_per_key=2, max_age=timedelta(days=5, hours=12))
    dry = store.maintain(policy, dry_run=True)
    assert dry.dry_run
    assert all(exists(store, i) for i in ids)
    real = store.maintain(policy)
    assert (real.removed, real.messages, real.bytes) == (dry.removed, dry.messages, dry.bytes)
    assert not any(exists(store, i) for i in real.session_ids)
    assert store.maintain(policy).removed == ()


def test_the_store_default_policy(make_backend, clock):
    """``retention=`` on the store is the policy of a bare ``maintain()``."""
    store = SessionStore(
        make_backend(), clock=clock, retention=RetentionPolicy(max_sessions_per_key=1)
    )
    try:
        ids = history(store, LIN, 3)
        assert store.maintain().session_ids == tuple(ids[:2])
    finally:
        store.close()


# -- silent chats ------------------------------------------------------------------------------


@pytest.fixture
def resetting(make_backend, clock):
    """A store with the default reset policy (idle 24 h, daily at 04:00)."""
    with SessionStore(make_backend(), clock=clock) as opened:
        yield opened


def silent_chat(store: SessionStore, days: int) -> str:
    """A chat that said one thing and then nothing for ``days``; its session id."""
    lookup = store.get_or_create(LIN)
    store.append(lookup.session_id, user("anyone there?"))
    store.clock.advance(days=days)  # type: ignore[attr-defined]
    return lookup.session_id


def test_a_silent_chat_is_listed_expired(resetting, make_backend, clock):
    """A session its key's policy expired is ``expired`` in listings; under ``none``, open."""
    old = silent_chat(resetting, 200)
    (item,) = resetting.list_sessions(limit=None).items
    assert (item.record.id, item.expired, item.state) == (old, True, "expired")
    with SessionStore(make_backend(), clock=clock, resets=NEVER) as never:
        silent_chat(never, 200)
        (item,) = never.list_sessions(limit=None).items
        assert (item.expired, item.state) == (False, "open")


def test_retention_rotates_off_a_silent_chat_and_the_lookup_says_why(resetting):
    """``max_age`` takes a silent chat's live session; the next lookup says ``retention``.

    The key moves to a new session in the plan that deletes the old one; the chat's next message
    starts there.
    """
    old = silent_chat(resetting, 200)
    key = resetting.key_for(LIN)
    rotations = []
    resetting.on_rotate(rotations.append)
    policy = RetentionPolicy(max_age=timedelta(days=90))
    assert resetting.maintain(policy, dry_run=True).session_ids == (old,)
    report = resetting.maintain(policy)
    assert report.session_ids == (old,)
    assert not exists(resetting, old)
    fresh = resetting.entry(key).session_id
    assert resetting.session(fresh).message_count == 0
    assert [(r.old_session_id, r.new_session_id, r.reason) for r in rotations] == [
        (old, fresh, "retention")
    ]
    lookup = resetting.get_or_create(LIN)
    assert lookup.created
    assert lookup.session_id == fresh
    assert lookup.reset is not None
    assert (lookup.reset.reason, lookup.reset.previous_session_id) == ("retention", old)
    resetting.append(lookup.session_id, user("back again"))
    again = resetting.get_or_create(LIN)
    assert (again.created, again.reset, again.session_id) == (False, None, fresh)
    assert resetting.maintain(RetentionPolicy(max_age=timedelta(days=90))).removed == ()


def test_prune_takes_a_silent_chat_too(resetting):
    """``prune --older-than`` is the same age rule: a silent chat's session goes."""
    old = silent_chat(resetting, 200)
    assert resetting.prune(timedelta(days=90), dry_run=True).session_ids == (old,)
    assert resetting.prune(timedelta(days=90), dry_run=False).session_ids == (old,)
    assert resetting.get_or_create(LIN).reset.reason == "retention"


def test_the_age_rule_applies_to_a_key_that_never_resets(store):
    """Under ``none`` nothing expires, but the operator's age rule still takes old sessions."""
    old = silent_chat(store, 200)
    assert store.list_sessions(limit=None).items[0].state == "open"
    assert store.maintain(RetentionPolicy(max_age=timedelta(days=90))).session_ids == (old,)
    assert store.get_or_create(LIN).reset.reason == "retention"


def test_a_silent_chat_under_active_work_is_spared_with_the_reason(make_backend, clock):
    """A key under active work keeps its session, and the report says why."""
    with SessionStore(make_backend(), clock=clock, active_work=lambda _key: True) as store:
        old = silent_chat(store, 200)
        report = store.maintain(RetentionPolicy(max_age=timedelta(days=90)))
        assert report.removed == ()
        assert report.spared_reasons == {old: "active_work"}
        assert store.entry(store.key_for(LIN)).session_id == old


def test_a_chat_that_speaks_after_the_choice_keeps_its_session(store, clock, monkeypatch):
    """The chat's activity between the pass's choice and its move: the session stays."""
    old = silent_chat(store, 200)
    kind = type(store.backend)
    acquire = kind.acquire_lease

    def chosen(self, resource, holder, **kwargs):
        taken = acquire(self, resource, holder, **kwargs)
        if resource == f"compress:{old}":
            store.touch(store.key_for(LIN))  # the host records the chat's activity
        return taken

    monkeypatch.setattr(kind, "acquire_lease", chosen)
    report = store.maintain(RetentionPolicy(max_age=timedelta(days=90)))
    assert report.removed == ()
    assert report.spared_reasons == {old: "changed"}
    store.append(old, user("and the reply lands"))


def test_an_expired_session_counts_as_ended_for_the_size_rule(resetting, clock):
    """The size rule takes an expired live session; a chat still talking keeps its own."""
    old = silent_chat(resetting, 3)
    talking = resetting.get_or_create(EVE).session_id
    resetting.append(talking, user("still here"))
    report = resetting.maintain(RetentionPolicy(max_store_bytes=0))
    assert report.session_ids == (old,)
    assert report.spared == ()  # an open session that has not expired is never a candidate
    assert exists(resetting, talking)


# -- the protections ---------------------------------------------------------------------------


def test_a_live_session_is_spared_by_the_count_and_size_rules(store, clock):
    """A key's session (here ended by the host itself) that has not expired stays.

    The count and size rules spare it as ``live``.
    """
    ids = history(store, LIN, 3)
    store.backend.end_session(ids[2], "host_closed", at=clock.now())
    clock.advance(days=30)
    report = store.maintain(RetentionPolicy(max_sessions_per_key=1, max_store_bytes=0))
    assert exists(store, ids[2])
    assert report.session_ids == (ids[0], ids[1])
    assert report.spared == (ids[2],)
    assert report.spared_reasons == {ids[2]: "live"}


def test_a_key_moved_onto_a_chosen_session_during_the_pass_keeps_it(store, clock):
    """A /resume onto a session after the pass chose it, before it deletes: the session stays."""
    ids = history(store, LIN, 3)
    key = store.key_for(LIN)
    clock.advance(days=10)
    calls = []

    def busy(_key: str) -> bool:
        calls.append(_key)
        if len(calls) == 2:  # ids[0] is chosen; now a user resumes it
            store.resume(key, ids[0])
        return False

    report = store.maintain(RetentionPolicy(max_age=timedelta(days=1)), busy=busy)
    assert exists(store, ids[0])
    assert store.entry(key).session_id == ids[0]
    assert ids[0] in report.spared
    assert ids[0] not in report.session_ids
    assert ids[1] in report.session_ids


def test_a_resume_between_the_last_check_and_the_delete_keeps_the_session(
    store, clock, monkeypatch
):
    """A /resume landing after every check of the pass, just before its delete: nothing lost.

    The delete itself is conditional (``RotationPlan.drop``), so the resumed session stays, the
    key still reaches it, and the message acknowledged after the resume is there.
    """
    ids = history(store, LIN, 3)
    key = store.key_for(LIN)
    clock.advance(days=10)

    def resume_and_talk() -> None:
        store.resume(key, ids[0])
        store.append(ids[0], user("acknowledged after the resume"))

    inject_before_delete(monkeypatch, store, ids[0], resume_and_talk)
    report = store.maintain(RetentionPolicy(max_age=timedelta(days=1)))
    assert store.entry(key).session_id == ids[0]
    assert store.transcript(ids[0])[-1].content == "acknowledged after the resume"
    assert ids[0] in report.spared
    assert ids[0] not in report.session_ids
    assert ids[1] in report.session_ids
    lookup = store.get_or_create(LIN)
    assert lookup.session_id == ids[0]
    store.append(lookup.session_id, user("and the chat goes on"))


def test_a_session_changed_and_left_again_before_the_delete_is_kept(store, clock, monkeypatch):
    """Resumed, written to and left again before the delete: its revision moved on, it stays."""
    ids = history(store, LIN, 3)
    key = store.key_for(LIN)
    clock.advance(days=10)

    def resume_talk_and_leave() -> None:
        store.resume(key, ids[0])
        store.append(ids[0], user("said in passing"))
        store.reset(key)

    inject_before_delete(monkeypatch, store, ids[0], resume_talk_and_leave)
    report = store.prune(timedelta(days=1), dry_run=False)
    assert store.transcript(ids[0])[-1].content == "said in passing"
    assert ids[0] not in report.session_ids
    assert ids[1] in report.session_ids


def test_active_work_is_asked_again_before_the_delete(make_backend, clock, monkeypatch):
    """A key that became busy after its session was chosen (its lease taken) keeps it."""
    busy = {"lin": False}
    store = SessionStore(
        make_backend(), clock=clock, resets=NEVER, active_work=lambda _key: busy["lin"]
    )
    try:
        ids = history(store, LIN, 2)
        clock.advance(days=10)
        store.touch(store.key_for(LIN))  # the chat is active: only ids[0] is old
        kind = type(store.backend)
        acquire = kind.acquire_lease

        def chosen(self, resource, holder, **kwargs):
            taken = acquire(self, resource, holder, **kwargs)
            if resource == f"compress:{ids[0]}":
                busy["lin"] = True  # a turn of the key starts right after the choice
            return taken

        monkeypatch.setattr(kind, "acquire_lease", chosen)
        report = store.maintain(RetentionPolicy(max_age=timedelta(days=1)))
        assert report.removed == ()
        assert report.spared == (ids[0],)
        assert report.spared_reasons == {ids[0]: "active_work"}
        assert exists(store, ids[0])
    finally:
        store.close()


def test_a_resumed_and_a_suspended_key_keep_their_sessions(store, clock):
    """A key resumed onto an old session, then suspended, keeps pointing at it; it stays.

    Its next message ends it ``suspended``, kept for a ``/resume``.
    """
    ids = history(store, LIN, 3)
    key = store.key_for(LIN)
    store.resume(key, ids[0])
    store.suspend(key)
    clock.advance(days=30)
    report = store.maintain(RetentionPolicy(max_age=timedelta(days=1), max_store_bytes=0))
    assert exists(store, ids[0])
    assert set(report.session_ids) == {ids[1], ids[2]}
    assert report.spared_reasons == {ids[0]: "suspended"}


def test_sessions_ended_suspended_are_kept(store, clock):
    """A session its key's suspension ended stays, so the user can still resume it."""
    first = store.get_or_create(LIN).session_id
    store.suspend(store.key_for(LIN))
    clock.advance(days=1)
    second = store.get_or_create(LIN).session_id
    assert second != first
    assert store.session(first).end_reason == "suspended"
    clock.advance(days=30)
    store.touch(store.key_for(LIN))
    report = store.maintain(RetentionPolicy(max_age=timedelta(days=1), max_sessions_per_key=1))
    assert report.removed == ()
    assert report.spared == (first,)
    assert exists(store, first)


def test_sessions_of_keys_under_active_work_are_kept(make_backend, clock):
    """The store's ``active_work`` callback (and ``busy``) protect every session of a key."""
    busy = {"lin": False}
    store = SessionStore(
        make_backend(), clock=clock, resets=NEVER, active_work=lambda _key: busy["lin"]
    )
    try:
        ids = history(store, LIN, 3)
        store.touch(store.key_for(LIN))
        policy = RetentionPolicy(max_sessions_per_key=1)
        busy["lin"] = True
        assert store.maintain(policy).removed == ()
        busy["lin"] = False
        key = store.key_for(LIN)
        assert store.maintain(policy, busy=lambda k: k == key).spared == (ids[0], ids[1])
        assert store.prune(timedelta(0), dry_run=False, busy=lambda k: k == key).session_ids == ()
        assert store.maintain(policy).session_ids == (ids[0], ids[1])
    finally:
        store.close()


def test_a_session_under_a_compression_lease_is_kept(store, clock):
    """Someone holding a session's compression lease keeps it; the pass leaves no lease behind."""
    ids = history(store, LIN, 2)
    store.touch(store.key_for(LIN))
    policy = RetentionPolicy(max_age=timedelta(hours=1))
    with store.compression_lease(ids[0], "summariser"):
        report = store.maintain(policy)
        assert report.removed == ()
        assert report.spared == (ids[0],)
    assert store.maintain(policy, dry_run=True).session_ids == (ids[0],)
    with store.compression_lease(ids[1], "summariser"):
        pass  # the dry run released its lease on ids[0] and took none on the live ids[1]
    assert store.maintain(policy).session_ids == (ids[0],)


def test_children_of_a_removed_session_are_orphaned(store, clock):
    """A compressed parent goes; its child stays and loses the parent link (as prune does)."""
    first = store.get_or_create(LIN)
    tip = store.compress(first.session_id, [user("summary")], holder="w")
    clock.advance(days=10)
    store.touch(store.key_for(LIN))
    report = store.maintain(RetentionPolicy(max_age=timedelta(days=1)))
    assert report.session_ids == (first.session_id,)
    assert store.session(tip.id).parent_session_id is None


def test_prune_is_the_age_rule(store, clock):
    """``prune`` and ``maintain(max_age)`` choose the same sessions."""
    ids = history(store, LIN, 4)
    pruned = store.prune(timedelta(days=1, hours=12))
    report = store.maintain(RetentionPolicy(max_age=timedelta(days=1, hours=12)), dry_run=True)
    assert set(pruned.session_ids) == set(report.session_ids) == set(ids[:3])
    assert (pruned.messages, pruned.bytes) == (report.messages, report.bytes)


# -- the async twin and its schedule -----------------------------------------------------------


def test_async_maintain_spares_keys_held_by_a_turn(store):
    """Inside a turn its key is under active work; after the block the pass removes them."""
    ids = history(store, LIN, 3)
    astore = AsyncSessionStore(store)
    policy = RetentionPolicy(max_sessions_per_key=1)

    async def scenario():
        async with astore.turn(LIN) as turn:
            held = await astore.maintain(policy)
            pruned = await astore.prune(timedelta(0), dry_run=False)
        return turn.session_id, held, pruned, await astore.maintain(policy, dry_run=True)

    live, held, pruned, after = asyncio.run(scenario())
    assert held.removed == ()
    assert {ids[0], ids[1]} <= set(held.spared)
    assert pruned.session_ids == ()
    assert set(after.session_ids) == set(held.spared)
    assert live not in after.session_ids


class Gate:
    """A stand-in for the schedule's sleep: records each wait and blocks until released."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        self.reached = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        """Record the wait, signal it, block until released."""
        self.waits.append(seconds)
        self.reached.set()
        await self.release.wait()
        self.release.clear()

    async def step(self) -> None:
        """Wait until the schedule sleeps again (one pass done)."""
        await self.reached.wait()
        self.reached.clear()


def test_the_schedule_runs_passes_and_stops_on_close(store, clock, monkeypatch):
    """start_maintenance runs a pass at once, then one per interval; aclose cancels it."""
    gate = Gate()
    monkeypatch.setattr(_maintenance, "_sleep", gate)
    ids = history(store, LIN, 2)
    astore = AsyncSessionStore(store)
    reports: list[RetentionReport] = []

    async def scenario():
        task = astore.start_maintenance(
            timedelta(hours=1), RetentionPolicy(max_age=timedelta(days=2)), on_report=reports.append
        )
        await gate.step()
        assert [r.session_ids for r in reports] == [()]
        with pytest.raises(RuntimeError, match="already"):
            astore.start_maintenance(timedelta(hours=1), RetentionPolicy())
        clock.advance(days=2)
        store.touch(store.key_for(LIN))
        gate.release.set()
        await gate.step()
        await astore.aclose()
        return task

    task = asyncio.run(scenario())
    assert [r.session_ids for r in reports] == [(), (ids[0],)]
    assert gate.waits == [3600.0, 3600.0]
    assert task.cancelled()


def test_a_failing_pass_does_not_end_the_schedule(store, monkeypatch, caplog):
    """A pass that raises is logged; the next interval runs again."""
    gate = Gate()
    monkeypatch.setattr(_maintenance, "_sleep", gate)
    astore = AsyncSessionStore(store)
    calls = []

    def broken(_self, _policy=None, *, dry_run=False, busy=None):
        calls.append(dry_run)
        raise OSError("disk gone")

    monkeypatch.setattr(SessionStore, "maintain", broken)

    async def scenario():
        task = astore.start_maintenance(timedelta(minutes=5), RetentionPolicy())
        await gate.step()
        gate.release.set()
        await gate.step()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
    assert calls == [False, False]
    assert "scheduled retention pass failed" in caplog.text


@pytest.mark.parametrize("every", [timedelta(0), timedelta(seconds=-1)])
def test_start_maintenance_validates(store, every):
    """A non-positive interval, or no policy at all, is refused before anything runs."""
    astore = AsyncSessionStore(store)

    async def scenario():
        with pytest.raises(ValueError, match="positive"):
            astore.start_maintenance(every, RetentionPolicy())
        with pytest.raises(ValueError, match="retention="):
            astore.start_maintenance(timedelta(hours=1))

    asyncio.run(scenario())


# -- property: protections hold and limits are met ---------------------------------------------

SOURCES = [SessionSource(platform="feishu", chat_id=f"c{i}", user_id=f"u{i}") for i in range(3)]

steps = st.lists(
    st.tuples(
        st.sampled_from(["msg", "reset", "suspend", "resume", "compress", "end"]),
        st.integers(0, len(SOURCES) - 1),
        st.integers(0, 3),
    ),
    max_size=25,
)
policies = st.builds(
    RetentionPolicy,
    max_age=st.none() | st.integers(1, 10).map(lambda d: timedelta(days=d)),
    max_sessions_per_key=st.none() | st.integers(1, 3),
    max_store_bytes=st.none() | st.integers(0, 3000),
)


def build(actions: list[tuple[str, int, int]]) -> SessionStore:
    """A store with random lineages: resets, suspensions, resumes and compressions."""
    store = SessionStore(InMemoryBackend(), clock=FrozenClock())
    for action, who, arg in actions:
        source = SOURCES[who]
        key = store.key_for(source)
        lookup = store.get_or_create(source)
        if action == "msg":
            store.append(lookup.session_id, user("x" * (arg * 40)))
        elif action == "reset":
            store.reset(key)
        elif action == "suspend":
            store.suspend(key)
        elif action == "resume":
            earlier = store.list_sessions(session_key=key, ended=True, limit=None).items
            if earlier:
                store.resume(key, earlier[arg % len(earlier)].record.id)
        elif action == "end":
            store.backend.end_session(lookup.session_id, "host_closed", at=store.clock.now())
        elif store.session(lookup.session_id).ended_at is None:
            store.compress(lookup.session_id, [user("summary")], holder="w")
        store.clock.advance(days=arg)  # type: ignore[attr-defined]
    return store


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(actions=steps, policy=policies)
def test_maintain_keeps_protected_sessions_and_meets_the_policy(actions, policy):
    """After a pass no protected session is gone; what remains fits unless only protected stay."""
    store = build(actions)
    records = [i.record for i in store.list_sessions(limit=None, include_compressed=True).items]
    pointing: dict[str, list] = {}
    for entry in store.backend.entries():
        pointing.setdefault(entry.session_id, []).append(entry)
    now = store.clock.now()
    cutoff = None if policy.max_age is None else now - policy.max_age
    lifecycle = _retention.lifecycle_of(store)
    expired = {s for s, entries in pointing.items() if lifecycle.expired(entries[0], now)}

    def activity(record):
        return max([record.last_active, *(e.updated_at for e in pointing.get(record.id, []))])

    def kept(record) -> bool:  # suspended, shared, or a live session neither expired nor old
        entries = pointing.get(record.id, [])
        fresh = record.id not in expired and (cutoff is None or activity(record) >= cutoff)
        return (
            record.end_reason == "suspended"
            or any(e.suspended for e in entries)
            or len(entries) > 1
            or (bool(entries) and fresh)
            or (record.ended_at is None and not entries and fresh)
        )

    protected = {r.id for r in records if kept(r)}
    report = store.maintain(policy)
    assert not set(report.session_ids) & protected
    left = [i.record for i in store.list_sessions(limit=None, include_compressed=True).items]
    for entry in store.backend.entries():  # every key on a session that exists
        assert entry.session_id in {r.id for r in left}
    fresh_starts = {r.id for r in left} - {r.id for r in records}  # keys moved off by retention
    assert all(store.session(i).message_count == 0 for i in fresh_starts)
    protected |= fresh_starts
    assert {r.id for r in left} - fresh_starts == {r.id for r in records} - set(report.session_ids)
    removable = [r for r in left if r.id not in protected]
    if cutoff is not None:
        assert all(activity(r) >= cutoff for r in removable)
    if policy.max_sessions_per_key is not None:
        for key in {r.session_key for r in left}:
            mine = [r for r in left if r.session_key == key]
            if len(mine) > policy.max_sessions_per_key:
                assert all(r.id in protected or r.id in pointing for r in mine)
    if policy.max_store_bytes is not None:
        assert report.store_bytes is not None
        assert report.store_bytes <= policy.max_store_bytes or not removable
    assert store.maintain(policy).removed == ()
