"""Key migration: SessionStore.migrate_keys, its report, collisions, missing origins, re-runs."""

from __future__ import annotations

import asyncio
import hashlib
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_sessions import (
    ConflictError,
    IncognitoPolicy,
    InvalidArgumentError,
    KeyMigrationReport,
    KeyPolicy,
    Message,
    SessionEntry,
    SessionRecord,
    SessionSource,
    SessionStore,
)
from hermes_sessions.aio import AsyncSessionStore
from hermes_sessions.backends.encrypted import EncryptedBackend
from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.backends.sqlite import SQLiteBackend
from hermes_sessions.cipher import Cipher, StaticKeys
from hermes_sessions.clock import FrozenClock
from hermes_sessions.protocols import SupportsCheck
from hermes_sessions.queries import SessionQuery
from hermes_sessions.state import StateScope
from hermes_sessions.store import KEY_MERGED

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from hermes_sessions.protocols import Backend

LIN = SessionSource(platform="feishu", chat_type="group", chat_id="oc_team", user_id="ou_lin")
EVE = SessionSource(platform="feishu", chat_type="group", chat_id="oc_team", user_id="ou_eve")
TG = SessionSource(platform="telegram", chat_id="42", user_id="42")
SHARED = KeyPolicy(group_sessions_per_user=False)


def user(text: str) -> Message:
    """A user message."""
    return Message(role="user", content=text)


def talk(store: SessionStore, source: SessionSource, text: str) -> str:
    """One user message from ``source``; return the session id."""
    session_id = store.get_or_create(source).session_id
    store.append(session_id, user(text))
    return session_id


def snapshot(backend: Backend) -> tuple[list[SessionEntry], list[SessionRecord]]:
    """Every entry and record, for comparing before and after."""
    records = backend.list_sessions(SessionQuery(limit=None)).items
    return backend.entries(), sorted((item.record for item in records), key=lambda r: r.id)


def bare_entry(backend: Backend, key: str, session_id: str, clock: FrozenClock) -> None:
    """A session with an entry that has no origin (as one rebuilt or imported without it)."""
    now = clock.now()
    backend.create_session(
        SessionRecord(id=session_id, source="x", started_at=now, session_key=key)
    )
    entry = SessionEntry(session_key=key, session_id=session_id, created_at=now, updated_at=now)
    backend.put_entry(entry, expected_revision=None)


# -- the everyday moves ----------------------------------------------------------------------------


def test_turning_group_isolation_off_merges_members_into_one_lane(store, clock):
    """Two members' keys collide: the session active last stays live, the other is history."""
    lin = talk(store, LIN, "hi from lin")
    clock.advance(timedelta(minutes=5))
    eve = talk(store, EVE, "hi from eve")
    report = store.migrate_keys(store.keys, SHARED, dry_run=False)
    new_key = SHARED.build(LIN)
    assert store.entry(new_key).session_id == eve
    assert [(m.new_key, m.session_id, m.merged) for m in report.merged] == [
        (new_key, eve, ((store.keys.build(LIN), lin),))
    ]
    merged = store.session(lin)
    assert (merged.end_reason, merged.session_key) == (KEY_MERGED, new_key)
    assert store.session(eve).end_reason is None
    history = store.list_sessions(session_key=new_key)
    assert {item.record.id for item in history.items} == {lin, eve}


def test_merged_history_stays_visible_from_the_new_shared_lane(store, clock):
    """A shared lane sees its own sessions: the merged one can be resumed from the new key."""
    lin = talk(store, LIN, "lin's plan")
    clock.advance(timedelta(minutes=5))
    talk(store, EVE, "eve's question")
    store.migrate_keys(store.keys, SHARED, dry_run=False)
    new_key = SHARED.build(LIN)
    assert store.resume(new_key, lin).session_id == lin
    assert store.transcript(lin)[0].content == "lin's plan"


def test_refused_collisions_leave_the_colliding_keys_alone(store):
    """With collisions='refuse' a colliding group stays; other keys still move."""
    talk(store, LIN, "a")
    talk(store, EVE, "b")
    talk(store, TG, "c")
    renamed = KeyPolicy(namespace="work", group_sessions_per_user=False)
    report = store.migrate_keys(store.keys, renamed, dry_run=False, collisions="refuse")
    keys = {e.session_key for e in store.backend.entries()}
    assert keys == {store.keys.build(LIN), store.keys.build(EVE), renamed.build(TG)}
    assert sorted(s.reason for s in report.skipped) == ["collision", "collision"]
    assert [m.old_key for m in report.moved] == [store.keys.build(TG)]


def test_a_namespace_change_moves_keys_and_their_records(store, clock):
    """Every key and every record of its lane moves to the new namespace."""
    first = talk(store, TG, "old")
    clock.advance(timedelta(minutes=1))
    second = store.get_or_create(TG, force_new=True).session_id
    renamed = KeyPolicy(namespace="work")
    store.migrate_keys(store.keys, renamed, dry_run=False)
    new_key = renamed.build(TG)
    assert store.entry(new_key).session_id == second
    assert {store.session(s).session_key for s in (first, second)} == {new_key}


def test_rebuilding_routing_after_migration_uses_the_new_keys(store):
    """Records carry the new key, so routing rebuilt from them lands on the new keys."""
    session_id = talk(store, TG, "hi")
    renamed = KeyPolicy(namespace="work")
    store.migrate_keys(store.keys, renamed, dry_run=False)
    entry = store.entry(renamed.build(TG))
    store.backend.delete_entry(entry.session_key, expected_revision=entry.revision)
    assert store.rebuild_routing() == 1
    assert store.entry(renamed.build(TG)).session_id == session_id


def test_remap_changes_the_chat_type_vocabulary(store):
    """``remap`` rewrites sources first: here channels become groups."""
    channel = SessionSource(platform="slack", chat_type="channel", chat_id="C1", user_id="U1")
    talk(store, channel, "hi")

    def channels_are_groups(source: SessionSource) -> SessionSource:
        if source.chat_type != "channel":
            return source
        return attrs.evolve(source, chat_type="group")

    store.migrate_keys(store.keys, store.keys, dry_run=False, remap=channels_are_groups)
    assert [e.session_key for e in store.backend.entries()] == ["agent:main:slack:group:C1:U1"]


# -- what cannot be worked out ---------------------------------------------------------------------


def test_an_entry_without_origin_and_an_ambiguous_key_is_reported(store, clock):
    """A group key of two segments under member isolation could be chat+thread or chat+member."""
    key = "agent:main:feishu:group:oc_team:ou_lin"
    bare_entry(store.backend, key, "s1", clock)
    report = store.migrate_keys(store.keys, SHARED, dry_run=False)
    assert [(s.key, s.reason) for s in report.skipped] == [(key, "no_origin")]
    assert store.entry(key).session_id == "s1"
    assert not report.changed


def test_an_entry_without_origin_moves_when_its_key_reads_back(store, clock):
    """A DM key names one chat: it moves by the key read back (``via='key'``)."""
    bare_entry(store.backend, "agent:main:telegram:dm:42", "s1", clock)
    renamed = KeyPolicy(namespace="work")
    report = store.migrate_keys(store.keys, renamed, dry_run=False)
    assert [(m.new_key, m.via) for m in report.moved] == [("agent:work:telegram:dm:42", "key")]
    assert store.session("s1").session_key == "agent:work:telegram:dm:42"


def test_a_rebuilt_entry_moves_by_its_key(store):
    """An entry rebuilt from records has a partial origin (no chat id); its key is read instead."""
    channel = SessionSource(platform="slack", chat_type="channel", chat_id="C1")
    session_id = talk(store, channel, "hi")
    entry = store.entry(store.key_for(channel))
    store.backend.delete_entry(entry.session_key, expected_revision=entry.revision)
    store.rebuild_routing()
    renamed = KeyPolicy(namespace="work")
    report = store.migrate_keys(store.keys, renamed, dry_run=False)
    assert [m.via for m in report.moved] == ["key"]
    assert store.entry(renamed.build(channel)).session_id == session_id
    assert not store.migrate_keys(store.keys, renamed, dry_run=False).changed


def test_an_openclaw_topic_key_moves_to_this_librarys_form(store, clock):
    """OpenClaw's ``:topic:<id>`` group key reads back unambiguously and moves."""
    bare_entry(store.backend, "agent:main:telegram:group:-100:topic:42", "s1", clock)
    report = store.migrate_keys(store.keys, store.keys, dry_run=False)
    assert [m.new_key for m in report.moved] == ["agent:main:telegram:group:-100:thread:42"]


def test_a_sender_the_key_never_named_is_not_guessed(store, clock):
    """Turning isolation on needs the sender; a shared key read back has none: reported."""
    key = "agent:main:feishu:group:oc_team"
    bare_entry(store.backend, key, "s1", clock)
    shared = KeyPolicy(group_sessions_per_user=False)
    report = store.migrate_keys(shared, KeyPolicy(), dry_run=False)
    assert [s.reason for s in report.skipped] == ["no_origin"]
    assert "names none" in report.skipped[0].detail
    assert store.entry(key).session_id == "s1"


def test_a_key_moving_onto_an_incognito_lane_stays(clock):
    """A persisted lane is never moved into an incognito one (kept in memory only): reported."""
    renamed = KeyPolicy(namespace="work")
    policy = IncognitoPolicy(keys=[renamed.build(TG)])
    with SessionStore(InMemoryBackend(), clock=clock, incognito=policy) as store:
        talk(store, TG, "hi")
        report = store.migrate_keys(store.keys, renamed, dry_run=False)
        assert [s.reason for s in report.skipped] == ["incognito"]
        assert store.entry(store.keys.build(TG)).origin == TG


def test_keys_of_another_namespace_are_reported_and_left(store, clock):
    """A key outside the old policy's namespace belongs to another profile: it stays."""
    bare_entry(store.backend, "agent:other:feishu:group:oc_team:ou_lin", "s1", clock)
    report = store.migrate_keys(store.keys, SHARED, dry_run=False)
    assert [s.reason for s in report.skipped] == ["foreign"]
    assert store.entry("agent:other:feishu:group:oc_team:ou_lin").session_id == "s1"


def test_ids_canonicalised_in_a_key_are_not_guessed_back(store, clock):
    """Without origin, a WhatsApp key holds canonical ids: dropping the canonicaliser is refused."""
    bare_entry(store.backend, "agent:main:whatsapp:dm:15551234567", "s1", clock)
    raw = KeyPolicy(canonicalizers={"whatsapp": None})
    report = store.migrate_keys(store.keys, raw, dry_run=False)
    assert [s.reason for s in report.skipped] == ["no_origin"]
    assert "canonicalised" in report.skipped[0].detail


def test_unrouted_records_follow_a_readable_key(store, clock):
    """Records of a lane without an entry move when the key reads back; an open one stays open."""
    now = clock.now()
    key = "agent:main:telegram:dm:7"
    store.backend.create_session(
        SessionRecord(id="s1", source="telegram", started_at=now, session_key=key)
    )
    report = store.migrate_keys(store.keys, KeyPolicy(namespace="work"), dry_run=False)
    assert report.rekeyed == (("s1", "agent:work:telegram:dm:7"),)
    assert store.session("s1").end_reason is None


def test_an_open_unrouted_record_moving_onto_a_routed_key_becomes_history(store, clock):
    """A key keeps one live session: an open record arriving on a routed lane ends key_merged."""
    renamed = KeyPolicy(namespace="work")
    live = talk(store, TG, "hi")
    store.migrate_keys(store.keys, renamed, dry_run=False)
    now = clock.now()
    stray = SessionRecord(
        id="s_stray", source="telegram", started_at=now, session_key=store.keys.build(TG)
    )
    store.backend.create_session(stray)
    store.migrate_keys(store.keys, renamed, dry_run=False)
    assert store.session("s_stray").end_reason == KEY_MERGED
    assert store.session("s_stray").session_key == renamed.build(TG)
    assert store.entry(renamed.build(TG)).session_id == live


def test_an_unreadable_unrouted_lane_is_reported_once(store, clock):
    """Records of a lane without entry and without a readable key: one skip for the lane."""
    key = "agent:main:feishu:group:oc_team:ou_lin"
    for n in range(3):
        record = SessionRecord(id=f"s{n}", source="feishu", started_at=clock.now(), session_key=key)
        store.backend.create_session(record)
    report = store.migrate_keys(store.keys, SHARED, dry_run=False)
    assert [(s.key, s.reason) for s in report.skipped] == [(key, "unrouted")]
    assert {store.session(f"s{n}").session_key for n in range(3)} == {key}


# -- dry runs, re-runs, retries and input --------------------------------------------------------


def test_a_dry_run_writes_nothing(store, clock):
    """The dry run reports the same moves a real pass makes, and changes nothing."""
    talk(store, LIN, "a")
    clock.advance(timedelta(minutes=1))
    talk(store, EVE, "b")
    before = snapshot(store.backend)
    dry = store.migrate_keys(store.keys, SHARED)
    assert dry.dry_run
    assert snapshot(store.backend) == before
    real = store.migrate_keys(store.keys, SHARED, dry_run=False)
    assert (dry.moved, dry.merged, dry.rekeyed) == (real.moved, real.merged, real.rekeyed)


def test_a_second_run_is_a_no_op(store, clock):
    """Running the same migration again changes nothing and reports nothing to do."""
    talk(store, LIN, "a")
    talk(store, EVE, "b")
    talk(store, TG, "c")
    store.migrate_keys(store.keys, SHARED, dry_run=False)
    after = snapshot(store.backend)
    again = store.migrate_keys(store.keys, SHARED, dry_run=False)
    assert (again.changed, again.merged, again.skipped) == (False, (), ())
    assert again.unchanged == 2
    assert snapshot(store.backend) == after


def lane_state(store: SessionStore, key: str) -> dict[str, Any]:
    """The lane state stored under ``key``."""
    scope = StateScope.lane(key).id
    return store.backend.get_state([scope]).get(scope, {})


def test_lane_state_follows_a_moved_key(store, clock):
    """A namespace change moves the lane's state to the new key and clears the old one."""
    session_id = talk(store, TG, "a")
    old_key = store.keys.build(TG)
    store.update_state({StateScope.lane(old_key): {"model": "m1", "n": 2}})
    work = KeyPolicy(namespace="work")
    report = store.migrate_keys(store.keys, work, dry_run=False)
    assert report.states_moved == ((old_key, work.build(TG)),)
    assert lane_state(store, work.build(TG)) == {"model": "m1", "n": 2}
    assert lane_state(store, old_key) == {}
    assert store.state(session_id).lane == {"model": "m1", "n": 2}


def test_lane_state_follows_a_moved_key_on_an_encrypted_store(clock, tmp_path):
    """Under a cipher, the lane state (and the markers around the plan) move the same way."""
    data_key = hashlib.sha256(b"lane state data key").digest()
    cipher = Cipher(StaticKeys({"k1": data_key}), token_key=hashlib.sha256(b"token").digest())
    backend = EncryptedBackend(SQLiteBackend(tmp_path / "state.db"), cipher=cipher)
    with SessionStore(backend, clock=clock) as store:
        talk(store, TG, "a")
        old_key = store.keys.build(TG)
        store.update_state({StateScope.lane(old_key): {"model": "m1"}})
        work = KeyPolicy(namespace="work")
        store.migrate_keys(store.keys, work, dry_run=False)
        assert (lane_state(store, old_key), lane_state(store, work.build(TG))) == (
            {},
            {"model": "m1"},
        )
        assert not store.migrate_keys(store.keys, work, dry_run=False).changed


def test_unrouted_lane_state_follows_its_records(store, clock):
    """A lane with records but no entry takes its lane state along when its records move."""
    key = "agent:main:telegram:dm:7"
    store.backend.create_session(
        SessionRecord(id="s1", source="telegram", started_at=clock.now(), session_key=key)
    )
    store.update_state({StateScope.lane(key): {"topic": "x"}})
    store.migrate_keys(store.keys, KeyPolicy(namespace="work"), dry_run=False)
    assert lane_state(store, "agent:work:telegram:dm:7") == {"topic": "x"}
    assert lane_state(store, key) == {}


def test_merged_lane_state_gives_the_live_sessions_values_precedence(store, clock):
    """On a merge the winner's lane values win, the loser's fill in what the winner lacks."""
    talk(store, LIN, "a")
    clock.advance(timedelta(minutes=5))
    talk(store, EVE, "b")  # eve is active last: her session stays live
    lin_key, eve_key = store.keys.build(LIN), store.keys.build(EVE)
    store.update_state({StateScope.lane(lin_key): {"model": "lin", "lang": "zh"}})
    store.update_state({StateScope.lane(eve_key): {"model": "eve"}})
    report = store.migrate_keys(store.keys, SHARED, dry_run=False)
    new_key = SHARED.build(LIN)
    assert set(report.states_moved) == {(lin_key, new_key), (eve_key, new_key)}
    assert lane_state(store, new_key) == {"model": "eve", "lang": "zh"}
    assert (lane_state(store, lin_key), lane_state(store, eve_key)) == ({}, {})


def test_a_dry_run_reports_lane_state_and_writes_none(store, clock):
    """The dry run names the lane state that would move, and leaves every lane's state alone."""
    talk(store, TG, "a")
    old_key = store.keys.build(TG)
    store.update_state({StateScope.lane(old_key): {"k": 1}})
    work = KeyPolicy(namespace="work")
    dry = store.migrate_keys(store.keys, work)
    assert dry.states_moved == ((old_key, work.build(TG)),)
    assert f"lane state {old_key} -> {work.build(TG)}" in dry.lines()
    assert (lane_state(store, old_key), lane_state(store, work.build(TG))) == ({"k": 1}, {})


def test_a_second_run_leaves_moved_lane_state_alone(store, clock):
    """Re-running a finished migration moves no lane state and changes none."""
    talk(store, TG, "a")
    store.update_state({StateScope.lane(store.keys.build(TG)): {"k": 1}})
    work = KeyPolicy(namespace="work")
    store.migrate_keys(store.keys, work, dry_run=False)
    again = store.migrate_keys(store.keys, work, dry_run=False)
    assert (again.changed, again.states_moved) == (False, ())
    assert lane_state(store, work.build(TG)) == {"k": 1}


class ProcessDiedError(Exception):
    """Raised by a test backend where the process would have died."""


class CrashAfterApply(InMemoryBackend):
    """A backend whose process "dies" right after the plan is applied (old keys not cleared)."""

    crash = False

    def apply(self, plan: Any) -> Any:
        """Apply the plan, then die once when armed."""
        result = super().apply(plan)
        if self.crash:
            self.crash = False
            raise ProcessDiedError  # stands for the process dying mid-migration
        return result


def test_a_re_run_finishes_clearing_after_a_crash(clock):
    """A pass cut off after its plan leaves old lane state; the next run reports and clears it."""
    with SessionStore(CrashAfterApply(), clock=clock) as store:
        talk(store, TG, "a")
        old_key = store.keys.build(TG)
        store.update_state({StateScope.lane(old_key): {"k": 1}})
        work = KeyPolicy(namespace="work")
        store.backend.crash = True  # type: ignore[attr-defined]
        with pytest.raises(ProcessDiedError):
            store.migrate_keys(store.keys, work, dry_run=False)
        assert lane_state(store, work.build(TG)) == {"k": 1}
        assert store.migrate_keys(store.keys, work).states_moved == ((old_key, work.build(TG)),)
        store.migrate_keys(store.keys, work, dry_run=False)
        assert (lane_state(store, old_key), lane_state(store, work.build(TG))) == ({}, {"k": 1})
        assert not store.migrate_keys(store.keys, work, dry_run=False).changed


class CrashBeforeApply(InMemoryBackend):
    """A backend whose process "dies" just before the plan is applied."""

    crash = False

    def apply(self, plan: Any) -> Any:
        """Die once when armed, else apply the plan."""
        if self.crash:
            self.crash = False
            raise ProcessDiedError  # stands for the process dying mid-migration
        return super().apply(plan)


def test_a_re_run_after_a_crash_before_the_plan_merges_the_same(clock):
    """A crash after the merge was written, before the plan: the re-run ends at the same state."""
    with SessionStore(CrashBeforeApply(), clock=clock) as store:
        talk(store, LIN, "a")
        clock.advance(timedelta(minutes=5))
        talk(store, EVE, "b")
        store.update_state({StateScope.lane(store.keys.build(LIN)): {"model": "lin", "x": 1}})
        store.update_state({StateScope.lane(store.keys.build(EVE)): {"model": "eve"}})
        store.backend.crash = True  # type: ignore[attr-defined]
        with pytest.raises(ProcessDiedError):
            store.migrate_keys(store.keys, SHARED, dry_run=False)
        store.migrate_keys(store.keys, SHARED, dry_run=False)
        assert lane_state(store, SHARED.build(LIN)) == {"model": "eve", "x": 1}
        assert lane_state(store, store.keys.build(LIN)) == {}


class RacingBackend(InMemoryBackend):
    """Another writer suspends a key just before each of the first ``races`` plans applies."""

    def __init__(self, races: int) -> None:
        super().__init__()
        self.races = races
        self.applied = 0

    def apply(self, plan: Any) -> Any:
        """Let another writer move an entry on first, while races remain."""
        self.applied += 1
        if plan.delete and self.races:
            self.races -= 1
            entry = self.entries()[0]
            self.put_entry(attrs.evolve(entry, suspended=True), expected_revision=entry.revision)
        return super().apply(plan)


def test_a_concurrent_write_makes_the_pass_plan_again(clock):
    """A key written between reading and applying: the plan conflicts, is made again, applies."""
    backend = RacingBackend(races=1)
    store = SessionStore(backend, clock=clock)
    talk(store, TG, "hi")
    before = backend.applied
    store.migrate_keys(store.keys, KeyPolicy(namespace="work"), dry_run=False)
    assert backend.applied - before == 2
    assert store.entry("agent:work:telegram:dm:42").suspended


def test_conflicts_that_never_stop_are_raised(clock):
    """When every attempt conflicts, the ConflictError reaches the caller."""
    backend = RacingBackend(races=100)
    store = SessionStore(backend, clock=clock)
    talk(store, TG, "hi")
    with pytest.raises(ConflictError):
        store.migrate_keys(store.keys, KeyPolicy(namespace="work"), dry_run=False)
    assert store.entry("agent:main:telegram:dm:42").suspended


def test_an_unknown_collision_rule_is_refused(store):
    """``collisions`` is 'merge' or 'refuse'; anything else says so."""
    with pytest.raises(InvalidArgumentError, match="merge"):
        store.migrate_keys(store.keys, SHARED, collisions="pick")  # type: ignore[arg-type]


def test_report_lines_name_every_move_merge_and_skip(store, clock):
    """``lines()`` has one line per move, merge and skip."""
    talk(store, LIN, "a")
    talk(store, EVE, "b")
    bare_entry(store.backend, "agent:main:feishu:group:oc_x:ou_y", "s9", clock)
    report = store.migrate_keys(store.keys, SHARED)
    lines = report.lines()
    assert sum(line.startswith("move ") for line in lines) == 2
    assert sum(line.startswith("merge into ") for line in lines) == 1
    assert sum(line.startswith("skip ") for line in lines) == 1


def test_the_async_twin_migrates(clock):
    """AsyncSessionStore.migrate_keys runs the same pass."""

    async def scenario() -> KeyMigrationReport:
        astore = AsyncSessionStore(SessionStore(InMemoryBackend(), clock=clock))
        async with astore:
            await astore.get_or_create(TG)
            return await astore.migrate_keys(
                astore.store.keys, KeyPolicy(namespace="work"), dry_run=False
            )

    report = asyncio.run(scenario())
    assert [m.new_key for m in report.moved] == ["agent:work:telegram:dm:42"]


# -- the property: every combination of the key flags ----------------------------------------------

POLICIES = st.builds(
    lambda group, thread, namespace, canonical: KeyPolicy(
        namespace=namespace,
        group_sessions_per_user=group,
        thread_sessions_per_user=thread,
        canonicalizers={} if canonical else {"whatsapp": None},
    ),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["main", "work"]),
    st.booleans(),
)
SOURCES = st.builds(
    SessionSource,
    platform=st.sampled_from(["feishu", "whatsapp"]),
    chat_type=st.sampled_from(["dm", "group", "thread"]),
    chat_id=st.sampled_from(["c1", "+15551", "15551"]),
    user_id=st.sampled_from([None, "+15551", "15551:2@s.whatsapp.net", "u2"]),
    thread_id=st.sampled_from([None, "t1"]),
)
STEPS = st.lists(
    st.tuples(SOURCES, st.sampled_from(["talk", "new", "quiet"])), min_size=1, max_size=12
)


@pytest.fixture(params=["memory", "sqlite"])
def open_backend(request: pytest.FixtureRequest) -> Iterator[Callable[[], Backend]]:
    """A factory of fresh backends (one per Hypothesis example)."""
    with tempfile.TemporaryDirectory() as directory:
        made: list[int] = []

        def fresh() -> Backend:
            made.append(1)
            if request.param == "memory":
                return InMemoryBackend()
            return SQLiteBackend(Path(directory) / f"state-{len(made)}.db")

        yield fresh


def assert_lane_state_followed(store: SessionStore, report: KeyMigrationReport) -> None:
    """Every moved lane's state (``{"lane": old_key}``) is at its new key, the old key's is gone."""
    merged_away = {key for merge in report.merged for key, _ in merge.merged}
    receiving = {new_key for _, new_key in report.states_moved}
    for old_key, new_key in report.states_moved:
        if old_key not in receiving:  # a chained key holds what it received
            assert lane_state(store, old_key) == {}
        if old_key not in merged_away:  # a winner's value is the new key's
            assert lane_state(store, new_key) == {"lane": old_key}
    for move in report.moved:
        assert (move.old_key, move.new_key) in report.states_moved


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(old=POLICIES, new=POLICIES, steps=STEPS)
def test_every_entry_lands_on_its_new_key_and_nothing_is_orphaned(open_backend, old, new, steps):
    """After migrating, keys are the new policy's, every record is routed or history, data kept."""
    clock = FrozenClock()
    with SessionStore(open_backend(), keys=old, clock=clock) as store:
        for n, (source, step) in enumerate(steps):
            clock.advance(timedelta(minutes=1))
            session_id = store.get_or_create(source, force_new=step == "new").session_id
            if step != "quiet":
                store.append(session_id, user(f"m{n}"), Message(role="assistant", content="ok"))
        entries_before, records_before = snapshot(store.backend)
        transcripts = {r.id: store.transcript(r.id) for r in records_before}
        for entry in entries_before:  # every lane gets a state of its own
            store.update_state({StateScope.lane(entry.session_key): {"lane": entry.session_key}})
        report = store.migrate_keys(old, new, dry_run=False)
        entries, records = snapshot(store.backend)
        assert_lane_state_followed(store, report)
        for entry in entries:
            assert entry.origin is not None
            assert entry.session_key == new.build(entry.origin)
        routed = {entry.session_key for entry in entries}
        for record in records:
            assert record.session_key in routed
            if record.id not in {e.session_id for e in entries}:
                assert record.is_ended
                lane = store.list_sessions(session_key=record.session_key, limit=None)
                assert record.id in {item.record.id for item in lane.items}
        assert {r.id: store.transcript(r.id) for r in records} == transcripts
        counters = ("message_count", "tool_call_count", "input_tokens", "revision")
        assert [[getattr(r, c) for c in counters] for r in records] == [
            [getattr(r, c) for c in counters] for r in records_before
        ]
        if isinstance(store.backend, SupportsCheck):
            assert store.backend.check().ok
        assert not store.migrate_keys(old, new, dry_run=False).changed


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(old=POLICIES, new=POLICIES, steps=STEPS, strip=st.sets(st.integers(0, 11)))
def test_entries_without_origin_move_right_or_are_reported(open_backend, old, new, steps, strip):
    """An entry stripped of its origin lands where its real origin says, or stays, reported."""
    with SessionStore(open_backend(), keys=old, clock=FrozenClock()) as store:
        for source, step in steps:
            store.clock.advance(timedelta(minutes=1))  # type: ignore[attr-defined]
            store.get_or_create(source, force_new=step == "new")
        truth: dict[str, tuple[str, SessionSource]] = {}
        for n, entry in enumerate(store.backend.entries()):
            if n in strip and entry.origin is not None:
                truth[entry.session_id] = (entry.session_key, entry.origin)
                bare = attrs.evolve(entry, origin=None)
                store.backend.put_entry(bare, expected_revision=entry.revision)
        report = store.migrate_keys(old, new, dry_run=False)
        skipped = {s.key for s in report.skipped}
        for session_id, (old_key, origin) in truth.items():
            record_key = store.session(session_id).session_key
            if record_key == old_key and old_key != new.build(origin):
                assert old_key in skipped or any(m.old_key == old_key for m in report.merged)
            else:
                assert record_key == new.build(origin)
