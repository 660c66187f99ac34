"""Reset policies: DESIGN §4 vectors, real time zones, DST, active work and validation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_sessions import (
    ResetPolicies,
    ResetPolicy,
    evaluate_reset,
    exceeds_size,
    host_timezone,
    next_reset_at,
)
from hermes_sessions import policy as policy_module

UTC_DAILY = ResetPolicy(mode="daily", timezone="UTC")
DAY = datetime(2026, 6, 10, tzinfo=UTC)


def at(hour: int, minute: int = 0, second: int = 0, *, day_offset: int = 0) -> datetime:
    """Return a time on the reference day (UTC), shifted by ``day_offset`` days."""
    return DAY + timedelta(days=day_offset, hours=hour, minutes=minute, seconds=second)


# -- the daily vectors of DESIGN §4 ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "last", "expected"),
    [
        (at(10), at(3, 59), "daily"),
        (at(10), at(4), None),
        (at(3, 30), at(23, day_offset=-1), None),
        (at(3, 30), at(3, 59, day_offset=-1), "daily"),
    ],
    ids=["before-boundary", "exactly-at-boundary", "late-yesterday", "before-yesterdays"],
)
def test_daily_vectors(now, last, expected):
    """The daily reset fires exactly when the last activity precedes the latest boundary."""
    assert evaluate_reset(UTC_DAILY, last_activity=last, now=now) == expected


def test_daily_at_midnight():
    """With at_hour=0, activity at 23:59 yesterday is reset today."""
    policy = ResetPolicy(mode="daily", at_hour=0, timezone="UTC")
    assert evaluate_reset(policy, last_activity=at(23, 59, day_offset=-1), now=at(0, 30)) == "daily"


# -- idle ------------------------------------------------------------------------------------------


def test_idle_is_strict():
    """A session idle for exactly idle_minutes is kept; one microsecond more resets it."""
    policy = ResetPolicy(mode="idle", idle_minutes=30)
    last = at(12)
    assert evaluate_reset(policy, last_activity=last, now=last + timedelta(minutes=30)) is None
    later = last + timedelta(minutes=30, microseconds=1)
    assert evaluate_reset(policy, last_activity=last, now=later) == "idle"


def test_both_checks_idle_first():
    """Under ``both``, a session that is idle and past the boundary reports ``idle``."""
    policy = ResetPolicy(mode="both", idle_minutes=60, timezone="UTC")
    assert evaluate_reset(policy, last_activity=at(1), now=at(10)) == "idle"


def test_both_reports_daily_when_not_idle():
    """Under ``both``, a recent session that crossed the boundary reports ``daily``."""
    policy = ResetPolicy(mode="both", idle_minutes=1440, timezone="UTC")
    assert evaluate_reset(policy, last_activity=at(3, 50), now=at(4, 10)) == "daily"


def test_mode_none_never_resets():
    """Mode ``none`` keeps a session forever."""
    policy = ResetPolicy(mode="none")
    assert evaluate_reset(policy, last_activity=at(0), now=at(0, day_offset=400)) is None
    assert next_reset_at(policy, at(0)) is None


# -- active work -----------------------------------------------------------------------------------


def test_active_work_blocks_expiry_within_the_cap():
    """Background work keeps a stale session alive while its last activity is within the cap."""
    policy = ResetPolicy(mode="both", idle_minutes=60, timezone="UTC")
    last, now = at(1), at(10)
    assert evaluate_reset(policy, last_activity=last, now=now) == "idle"
    assert evaluate_reset(policy, last_activity=last, now=now, active_work=True) is None


def test_active_work_stops_protecting_after_the_cap():
    """Past max_active_work_age, a forgotten process no longer keeps the session alive."""
    policy = ResetPolicy(mode="idle", idle_minutes=60, max_active_work_age=timedelta(hours=24))
    last = at(0)
    within = last + timedelta(hours=24)
    beyond = last + timedelta(hours=24, microseconds=1)
    assert evaluate_reset(policy, last_activity=last, now=within, active_work=True) is None
    assert evaluate_reset(policy, last_activity=last, now=beyond, active_work=True) == "idle"


def test_active_work_without_a_cap_blocks_forever():
    """``max_active_work_age=None`` restores Hermes's unbounded protection."""
    policy = ResetPolicy(mode="idle", idle_minutes=1, max_active_work_age=None)
    far = at(0, day_offset=60)
    assert evaluate_reset(policy, last_activity=at(0), now=far, active_work=True) is None


# -- real time zones -------------------------------------------------------------------------------


@pytest.fixture
def utc_host(monkeypatch):
    """Pretend the host runs in UTC, whatever this machine's zone is."""
    monkeypatch.setenv("TZ", "UTC")
    policy_module._host_timezone.cache_clear()
    yield
    policy_module._host_timezone.cache_clear()


@pytest.mark.usefixtures("utc_host")
def test_shanghai_boundary_on_a_utc_host():
    """``timezone="Asia/Shanghai"`` puts the boundary at 04:00 Shanghai (20:00 UTC)."""
    policy = ResetPolicy(mode="daily", timezone="Asia/Shanghai")
    boundary = datetime(2026, 6, 9, 20, tzinfo=UTC)
    just_before = boundary - timedelta(microseconds=1)
    now = datetime(2026, 6, 10, 1, tzinfo=UTC)  # 09:00 in Shanghai
    assert evaluate_reset(policy, last_activity=just_before, now=now) == "daily"
    assert evaluate_reset(policy, last_activity=boundary, now=now) is None
    assert next_reset_at(policy, just_before) == boundary
    utc_policy = ResetPolicy(mode="daily")
    assert evaluate_reset(utc_policy, last_activity=just_before, now=now) is None


def test_inputs_in_other_zones_are_compared_as_instants():
    """Aware datetimes in any zone are compared by instant, not by wall clock."""
    shanghai = ZoneInfo("Asia/Shanghai")
    last = datetime(2026, 6, 10, 3, 59, tzinfo=shanghai)
    now = datetime(2026, 6, 9, 22, tzinfo=UTC)  # 06:00 in Shanghai
    policy = ResetPolicy(mode="daily", timezone="Asia/Shanghai")
    assert evaluate_reset(policy, last_activity=last, now=now) == "daily"


NEW_YORK = "America/New_York"
BERLIN = "Europe/Berlin"


@pytest.mark.parametrize(
    ("zone", "day", "hour", "boundary_utc"),
    [
        # spring forward: 02:00 does not exist, the boundary is 03:00 EDT = 07:00 UTC
        (NEW_YORK, (2026, 3, 8), 2, datetime(2026, 3, 8, 7, tzinfo=UTC)),
        # fall back: 01:00 happens twice, the boundary is the first (EDT) = 05:00 UTC
        (NEW_YORK, (2026, 11, 1), 1, datetime(2026, 11, 1, 5, tzinfo=UTC)),
        # spring forward: 02:00 does not exist, the boundary is 03:00 CEST = 01:00 UTC
        (BERLIN, (2026, 3, 29), 2, datetime(2026, 3, 29, 1, tzinfo=UTC)),
        # fall back: 02:00 happens twice, the boundary is the first (CEST) = 00:00 UTC
        (BERLIN, (2026, 10, 25), 2, datetime(2026, 10, 25, 0, tzinfo=UTC)),
        # Samoa skipped 30 December 2011 entirely: 04:00 lies deep inside the gap, so the
        # boundary is the first instant after it, midnight of the 31st (+14:00)
        ("Pacific/Apia", (2011, 12, 30), 4, datetime(2011, 12, 30, 10, tzinfo=UTC)),
        # an ordinary hour on a transition day is unaffected
        (NEW_YORK, (2026, 3, 8), 4, datetime(2026, 3, 8, 8, tzinfo=UTC)),
        (BERLIN, (2026, 10, 25), 4, datetime(2026, 10, 25, 3, tzinfo=UTC)),
    ],
    ids=[
        "ny-spring",
        "ny-fall",
        "berlin-spring",
        "berlin-fall",
        "apia-skipped-day",
        "ny-normal",
        "berlin-normal",
    ],
)
def test_daily_boundary_across_dst(zone, day, hour, boundary_utc):
    """The daily boundary on a DST change day is the first instant at or after the hour."""
    policy = ResetPolicy(mode="daily", at_hour=hour, timezone=zone)
    evening_before = datetime(*day, tzinfo=ZoneInfo(zone)) - timedelta(hours=3)
    assert next_reset_at(policy, evening_before) == boundary_utc
    tiny = timedelta(microseconds=1)
    after = boundary_utc + timedelta(hours=1)
    assert evaluate_reset(policy, last_activity=boundary_utc - tiny, now=after) == "daily"
    assert evaluate_reset(policy, last_activity=boundary_utc, now=after) is None
    assert evaluate_reset(policy, last_activity=evening_before, now=boundary_utc) == "daily"
    assert evaluate_reset(policy, last_activity=evening_before, now=boundary_utc - tiny) is None


def test_second_pass_of_a_repeated_hour_does_not_reset_again():
    """Activity in the first 01:30 of a fall-back night survives the second 01:30."""
    policy = ResetPolicy(mode="daily", at_hour=1, timezone=NEW_YORK)
    first_pass = datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # 01:30 EDT
    second_pass = datetime(2026, 11, 1, 6, 30, tzinfo=UTC)  # 01:30 EST
    assert evaluate_reset(policy, last_activity=first_pass, now=second_pass) is None


def test_naive_datetimes_are_rejected():
    """Naive datetimes raise a ValueError that says to use aware ones."""
    with pytest.raises(ValueError, match="timezone-aware"):
        evaluate_reset(ResetPolicy(), last_activity=datetime(2026, 1, 1), now=at(0))  # noqa: DTZ001
    with pytest.raises(ValueError, match="timezone-aware"):
        next_reset_at(ResetPolicy(), datetime(2026, 1, 1))  # noqa: DTZ001
    with pytest.raises(TypeError):
        evaluate_reset(ResetPolicy(), last_activity="yesterday", now=at(0))  # type: ignore[arg-type]


# -- next_reset_at ---------------------------------------------------------------------------------


def test_next_reset_idle_is_one_microsecond_after_the_limit():
    """Idle expiry is strict, so the first expired instant is just past the limit."""
    policy = ResetPolicy(mode="idle", idle_minutes=90)
    assert next_reset_at(policy, at(12)) == at(13, 30) + timedelta(microseconds=1)


def test_next_reset_both_takes_the_earlier():
    """Under ``both``, the next reset is whichever of idle and daily comes first."""
    policy = ResetPolicy(mode="both", idle_minutes=60, timezone="UTC")
    assert next_reset_at(policy, at(3, 30)) == at(4)
    assert next_reset_at(policy, at(5)) == at(6) + timedelta(microseconds=1)


# -- daily_and_idle --------------------------------------------------------------------------------

GENTLE = ResetPolicy(mode="daily_and_idle", idle_minutes=60, at_hour=4, timezone="UTC")


@pytest.mark.parametrize(
    ("last", "now", "expected"),
    [
        (at(3, 50), at(4, 10), None),  # boundary passed, but the chat was active 20 minutes ago
        (at(3, 50), at(4, 50), None),  # idle exactly 60 minutes is still fresh (strict)
        (at(3, 50), at(4, 51), "daily"),  # boundary passed and idle for more than 60 minutes
        (at(4, 30), at(23, 59), None),  # idle for hours, but no boundary since the last message
        (at(4), at(6), None),  # activity exactly at the boundary counts as after it
        (at(4, 30), at(4, 1, day_offset=1), "daily"),  # the next boundary finds it quiet
        (at(3, 59, 59), at(4, 0, 1, day_offset=1), "daily"),
    ],
)
def test_daily_and_idle_vectors(last, now, expected):
    """Only a chat both past a boundary and idle for idle_minutes is reset, with reason daily."""
    assert evaluate_reset(GENTLE, last_activity=last, now=now) == expected


def test_daily_and_idle_next_reset_is_the_later_condition():
    """The first expired instant is when both the boundary and the idle limit have passed."""
    tiny = timedelta(microseconds=1)
    assert next_reset_at(GENTLE, at(3, 50)) == at(4, 50) + tiny
    assert next_reset_at(GENTLE, at(2)) == at(4)
    assert next_reset_at(GENTLE, at(12)) == at(4, day_offset=1)


def test_daily_and_idle_respects_active_work():
    """Active work blocks a daily_and_idle reset like any other."""
    assert evaluate_reset(GENTLE, last_activity=at(1), now=at(8), active_work=True) is None


def test_daily_and_idle_reads_from_configuration():
    """The mode is accepted in a session_reset block."""
    policies = ResetPolicies.from_mapping({"mode": "daily_and_idle", "idle_minutes": 45})
    assert policies.default.mode == "daily_and_idle"


ZONES = st.sampled_from(
    ["UTC", "Asia/Shanghai", NEW_YORK, BERLIN, "Australia/Lord_Howe", "America/Santiago"]
)
INSTANTS = st.datetimes(
    min_value=datetime(2020, 1, 1),  # noqa: DTZ001  # hypothesis bounds are naive
    max_value=datetime(2035, 1, 1),  # noqa: DTZ001
    timezones=st.just(UTC),
)
POLICIES = st.builds(
    ResetPolicy,
    mode=st.sampled_from(["idle", "daily", "both", "daily_and_idle"]),
    idle_minutes=st.integers(1, 3000),
    at_hour=st.integers(0, 23),
    timezone=ZONES,
)


@given(POLICIES, INSTANTS)
def test_next_reset_at_is_the_first_expired_instant(policy, last):
    """evaluate_reset fires at next_reset_at and not one microsecond before it."""
    expiry = next_reset_at(policy, last)
    assert expiry is not None
    assert expiry > last
    assert evaluate_reset(policy, last_activity=last, now=expiry) is not None
    before = expiry - timedelta(microseconds=1)
    assert evaluate_reset(policy, last_activity=last, now=before) is None


@given(POLICIES, INSTANTS, st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=3)))
def test_expiry_is_monotonic_in_time(policy, last, elapsed):
    """Once a session has expired it stays expired as time goes on."""
    now = last + elapsed
    if evaluate_reset(policy, last_activity=last, now=now) is not None:
        later = now + timedelta(hours=1)
        assert evaluate_reset(policy, last_activity=last, now=later) is not None


@given(
    st.builds(
        ResetPolicy,
        mode=st.just("daily_and_idle"),
        idle_minutes=st.integers(1, 3000),
        at_hour=st.integers(0, 23),
        timezone=ZONES,
    ),
    INSTANTS,
    st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=4)),
)
def test_daily_and_idle_is_daily_and_idle_together(policy, last, elapsed):
    """daily_and_idle fires exactly when both the daily and the idle policy would."""
    now = last + elapsed
    daily = attrs.evolve(policy, mode="daily")
    idle = attrs.evolve(policy, mode="idle")
    both_fire = (
        evaluate_reset(daily, last_activity=last, now=now) is not None
        and evaluate_reset(idle, last_activity=last, now=now) is not None
    )
    got = evaluate_reset(policy, last_activity=last, now=now)
    assert got == ("daily" if both_fire else None)


# -- construction-time validation ------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mode": "weekly"},
        {"at_hour": 24},
        {"at_hour": -1},
        {"idle_minutes": 0},
        {"timezone": "Mars/Olympus"},
        {"timezone": "../../etc/passwd"},
        {"max_active_work_age": timedelta(hours=-1)},
    ],
)
def test_invalid_settings_raise_value_error(kwargs):
    """Out-of-range or unknown settings are refused at construction with a ValueError."""
    with pytest.raises(ValueError):
        ResetPolicy(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"at_hour": 4.0},
        {"idle_minutes": True},
        {"notify": "yes"},
        {"notify_exclude_platforms": "webhook"},
    ],
)
def test_wrong_types_raise_type_error(kwargs):
    """Settings of the wrong type are refused with a TypeError."""
    with pytest.raises(TypeError):
        ResetPolicy(**kwargs)


def test_notifies_applies_the_flag_and_exclusions():
    """Notification is off for excluded platforms and when the policy says so."""
    assert ResetPolicy().notifies("telegram")
    assert not ResetPolicy().notifies("webhook")
    assert not ResetPolicy(notify=False).notifies("telegram")


# -- ResetPolicies ---------------------------------------------------------------------------------


def test_platform_beats_type_beats_default():
    """A platform override wins over a chat-type override, which wins over the default."""
    default = ResetPolicy()
    by_type = ResetPolicy(mode="idle")
    by_platform = ResetPolicy(mode="none")
    policies = ResetPolicies(
        default, by_type={"group": by_type}, by_platform={"feishu": by_platform}
    )
    assert policies.for_source("feishu", "group") is by_platform
    assert policies.for_source("telegram", "group") is by_type
    assert policies.for_source("telegram", "dm") is default


def test_policy_maps_hold_policies():
    """Override maps must contain ResetPolicy values."""
    with pytest.raises(TypeError):
        ResetPolicies(by_type={"group": {"mode": "idle"}})  # type: ignore[dict-item]


def test_from_mapping_reads_the_config_block():
    """The session_reset block becomes the default, with overrides laid over it."""
    policies = ResetPolicies.from_mapping(
        {
            "mode": "both",
            "at_hour": 5,
            "idle_minutes": 120,
            "notify": False,
            "timezone": "Asia/Shanghai",
            "max_active_work_minutes": 30,
            "by_type": {"group": {"mode": "idle"}},
            "by_platform": {"feishu": {"at_hour": 6}, "cron": {"max_active_work_minutes": None}},
        }
    )
    assert policies.default == ResetPolicy(
        mode="both",
        at_hour=5,
        idle_minutes=120,
        notify=False,
        timezone="Asia/Shanghai",
        max_active_work_age=timedelta(minutes=30),
    )
    group = policies.for_source("telegram", "group")
    assert (group.mode, group.idle_minutes, group.at_hour) == ("idle", 120, 5)
    assert policies.for_source("feishu", "dm").at_hour == 6
    assert policies.for_source("cron", "dm").max_active_work_age is None


def test_from_mapping_unwraps_the_section_name():
    """A mapping holding only ``session_reset`` is unwrapped."""
    policies = ResetPolicies.from_mapping({"session_reset": {"mode": "none"}})
    assert policies.default.mode == "none"


def test_from_mapping_empty_gives_defaults():
    """An empty block gives the default policy and no overrides."""
    assert ResetPolicies.from_mapping({}) == ResetPolicies()


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({"mode": "hourly"}, ValueError),
        ({"idle_minute": 5}, ValueError),
        ({"by_type": {"group": {"at_hour": 30}}}, ValueError),
        ({"by_type": ["group"]}, TypeError),
        ({"by_platform": {"feishu": "daily"}}, TypeError),
    ],
)
def test_from_mapping_rejects_bad_config(config, error):
    """Bad settings and unknown keys are errors naming where they are."""
    with pytest.raises(error, match="session_reset"):
        ResetPolicies.from_mapping(config)


# -- the host's zone -------------------------------------------------------------------------------


def test_host_zone_comes_from_tz(monkeypatch):
    """``TZ`` naming an IANA zone is the host zone, also in ``:Zone`` and path forms."""
    for value in ("Asia/Shanghai", ":Asia/Shanghai", "/usr/share/zoneinfo/Asia/Shanghai"):
        monkeypatch.setenv("TZ", value)
        policy_module._host_timezone.cache_clear()
        assert host_timezone() == ZoneInfo("Asia/Shanghai")
    policy_module._host_timezone.cache_clear()


def test_tz_naming_a_file_outside_zoneinfo_is_ignored(tmp_path):
    """``TZ=/some/file`` is not a zone name; detection moves on to the next source."""
    declared = tmp_path / "timezone"
    declared.write_text("Asia/Tokyo", encoding="utf-8")
    zone = policy_module._host_timezone("/etc/custom-zone", tmp_path / "no-link", declared)
    assert zone == ZoneInfo("Asia/Tokyo")


def test_host_zone_from_the_localtime_link(tmp_path):
    """Without TZ, the /etc/localtime link names the zone."""
    link = tmp_path / "localtime"
    link.symlink_to("/usr/share/zoneinfo/Europe/Berlin")
    zone = policy_module._host_timezone(None, link, tmp_path / "missing")
    assert zone == ZoneInfo("Europe/Berlin")


def test_host_zone_from_etc_timezone(tmp_path):
    """Without TZ or a link, /etc/timezone names the zone."""
    declared = tmp_path / "timezone"
    declared.write_text("America/New_York\n", encoding="utf-8")
    zone = policy_module._host_timezone("garbage-zone", tmp_path / "no-link", declared)
    assert zone == ZoneInfo("America/New_York")


def test_host_zone_falls_back_to_utc_with_a_warning(tmp_path):
    """With no usable zone information, UTC is used and the host is warned once."""
    plain = tmp_path / "localtime"
    plain.write_bytes(b"TZif")
    policy_module._host_timezone.cache_clear()
    with pytest.warns(RuntimeWarning, match="IANA time zone"):
        zone = policy_module._host_timezone(None, plain, Path(tmp_path / "none"))
    assert zone == ZoneInfo("UTC")
    # cached: a second call does not warn again (warnings are errors in this suite)
    assert policy_module._host_timezone(None, plain, Path(tmp_path / "none")) == zone
    policy_module._host_timezone.cache_clear()


@pytest.mark.usefixtures("utc_host")
def test_policy_without_timezone_uses_the_host_zone():
    """``timezone=None`` resolves to the host zone when evaluated."""
    assert ResetPolicy().zone == ZoneInfo("UTC")


# -- size limits -----------------------------------------------------------------------------------


LIMITS = st.one_of(st.none(), st.integers(1, 10_000))


@given(LIMITS, LIMITS, st.integers(0, 20_000), st.integers(0, 20_000))
def test_exceeds_size_is_either_limit_reached(max_messages, max_tokens, messages, tokens):
    """Rotation by size fires exactly when a set limit is reached, and stays fired as it grows."""
    policy = ResetPolicy(mode="none", max_messages=max_messages, max_tokens=max_tokens)
    expected = (max_messages is not None and messages >= max_messages) or (
        max_tokens is not None and tokens >= max_tokens
    )
    assert exceeds_size(policy, messages=messages, tokens=tokens) is expected
    if expected:
        assert exceeds_size(policy, messages=messages + 1, tokens=tokens + 1)


def test_size_limits_are_validated_and_read_from_configuration():
    """Limits are ints >= 1 or None, checked at construction, and configurable."""
    with pytest.raises(ValueError, match="max_messages"):
        ResetPolicy(max_messages=0)
    with pytest.raises(TypeError, match="max_tokens"):
        ResetPolicy(max_tokens=1.5)  # type: ignore[arg-type]
    policies = ResetPolicies.from_mapping({"mode": "none", "max_messages": 200, "max_tokens": 9000})
    assert (policies.default.max_messages, policies.default.max_tokens) == (200, 9000)
    assert not exceeds_size(ResetPolicy(), messages=10**9, tokens=10**9)  # no limit by default
