"""Reset policies: is a conversation still fresh, or must a new session start?

Everything here is pure: time comes in as arguments (aware datetimes only) and nothing reads the
clock. The daily boundary is computed in a real IANA zone, so it stays at the configured hour across
daylight-saving changes: when the hour does not exist (spring forward) the boundary is the first
instant after the gap; when it occurs twice (fall back) it is the first occurrence.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Mapping
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal, TypeAlias, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import attrs

from hermes_sessions.clock import require_aware
from hermes_sessions.exceptions import InvalidArgumentError

__all__ = [
    "ResetMode",
    "ResetPolicies",
    "ResetPolicy",
    "evaluate_reset",
    "exceeds_size",
    "host_timezone",
    "next_reset_at",
]

ResetMode: TypeAlias = Literal["idle", "daily", "both", "daily_and_idle", "none"]
"""When a policy resets a session: after idle time, at a daily hour, either, or never.

``daily_and_idle`` resets at the daily hour only a chat that has also been idle for
``idle_minutes``, so a conversation going on at the boundary is not cut.

.. versionadded:: 0.1.0
"""
MODES: Final = ("idle", "daily", "both", "daily_and_idle", "none")
_ONE_MICROSECOND: Final = timedelta(microseconds=1)
_LOCALTIME: Final = Path("/etc/localtime")
_DECLARED_TIMEZONE: Final = Path("/etc/timezone")


# -- the host's time zone --------------------------------------------------------------------------


def _zone_from_name(name: str) -> ZoneInfo | None:
    name = name.removeprefix(":")
    if "zoneinfo/" in name:  # TZ=/usr/share/zoneinfo/Europe/Berlin
        name = name.rsplit("zoneinfo/", 1)[1]
    if not name or name.startswith("/"):
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


@functools.cache
def _host_timezone(tz_env: str | None, localtime: Path, declared: Path) -> ZoneInfo:
    if tz_env:
        zone = _zone_from_name(tz_env)
        if zone is not None:
            return zone
    try:
        target = str(localtime.readlink())
    except OSError:
        target = ""
    zone = _zone_from_name(target) if "zoneinfo/" in target else None
    if zone is not None:
        return zone
    try:
        name = declared.read_text(encoding="utf-8").strip()
    except OSError:
        name = ""
    zone = _zone_from_name(name) if name else None
    if zone is not None:
        return zone
    warnings.warn(
        "could not find the host's IANA time zone (TZ is unset or unknown and /etc/localtime is "
        "not a zoneinfo link); daily resets use UTC. Set ResetPolicy(timezone=...) or TZ.",
        RuntimeWarning,
        stacklevel=3,
    )
    return ZoneInfo("UTC")


def host_timezone() -> ZoneInfo:
    """Return the host's time zone as a real IANA zone.

    Looks at ``TZ``, then the ``/etc/localtime`` link, then ``/etc/timezone``; never the fixed
    offset ``datetime.astimezone()`` returns, which is wrong on the other side of a DST change.
    Falls back to UTC with one warning.

    .. versionadded:: 0.1.0
    """
    return _host_timezone(os.environ.get("TZ"), _LOCALTIME, _DECLARED_TIMEZONE)


# -- validators ------------------------------------------------------------------------------------


def _int_in(low: int, high: int | None) -> Any:
    def check(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{attribute.name} must be an int, got {type(value).__name__}")
        if value < low or (high is not None and value > high):
            bounds = f"between {low} and {high}" if high is not None else f">= {low}"
            raise InvalidArgumentError(f"{attribute.name} must be {bounds}, got {value}")

    return check


def _mode(_instance: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in MODES:
        raise InvalidArgumentError(f"mode must be one of {', '.join(MODES)}; got {value!r}")


def _timezone(_instance: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str) or _zone_from_name(value) is None:
        raise InvalidArgumentError(
            f"timezone must be an IANA zone name such as 'Asia/Shanghai', got {value!r}"
        )


def _work_age(_instance: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, timedelta) or value < timedelta(0)):
        raise InvalidArgumentError(
            f"max_active_work_age must be a timedelta >= 0 or None, got {value!r}"
        )


def _limit(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        _int_in(1, None)(_instance, attribute, value)


def _bool(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{attribute.name} must be a bool, got {type(value).__name__}")


def _platforms(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        raise TypeError("notify_exclude_platforms must be a sequence of platform names, not a str")
    return tuple(cast("Any", value))


# -- the policy ------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ResetPolicy:
    """When a key's session expires.

    Args:
        mode: ``idle`` (after ``idle_minutes`` without activity), ``daily`` (at ``at_hour`` in
            ``timezone``), ``both`` (whichever comes first), ``daily_and_idle`` (once a daily
            boundary has passed since the last activity *and* the chat has been idle for
            ``idle_minutes``) or ``none`` (never).
        idle_minutes: Minutes without activity before an idle reset (>= 1).
        at_hour: Hour of the daily reset, 0-23, in ``timezone``.
        timezone: IANA zone of the daily reset; ``None`` means the host's zone.
        notify: Whether hosts should tell the user about automatic resets.
        notify_exclude_platforms: Platforms never notified (machine clients).
        max_active_work_age: Active background work keeps a session alive only while its last
            activity is at most this old; ``None`` removes the cap (Hermes's behaviour).
        max_messages: Rotate the live session once it holds this many messages (``None``: no
            limit). Applies under every mode, ``none`` included.
        max_tokens: Rotate the live session once its transcript is estimated at this many tokens
            (:func:`~hermes_sessions.window.estimate_tokens`; ``None``: no limit).

    Invalid values raise ``ValueError`` here, at construction, never later.

    .. versionadded:: 0.1.0
    """

    mode: ResetMode = attrs.field(default="both", validator=_mode)
    idle_minutes: int = attrs.field(default=1440, validator=_int_in(1, None))
    at_hour: int = attrs.field(default=4, validator=_int_in(0, 23))
    timezone: str | None = attrs.field(default=None, validator=_timezone)
    notify: bool = attrs.field(default=True, validator=_bool)
    notify_exclude_platforms: tuple[str, ...] = attrs.field(
        default=("api_server", "webhook"), converter=_platforms
    )
    max_active_work_age: timedelta | None = attrs.field(
        default=timedelta(hours=24), validator=_work_age
    )
    max_messages: int | None = attrs.field(default=None, validator=_limit)
    max_tokens: int | None = attrs.field(default=None, validator=_limit)

    @property
    def zone(self) -> ZoneInfo:
        """The zone daily resets are computed in."""
        if self.timezone is None:
            return host_timezone()
        zone = _zone_from_name(self.timezone)
        assert zone is not None  # noqa: S101  # checked by the validator
        return zone

    def notifies(self, platform: str) -> bool:
        """Whether an automatic reset on ``platform`` should be announced to the user."""
        return self.notify and platform not in self.notify_exclude_platforms


_POLICY_KEYS: Final = frozenset(
    {
        "mode",
        "idle_minutes",
        "at_hour",
        "timezone",
        "notify",
        "notify_exclude_platforms",
        "max_active_work_minutes",
        "max_messages",
        "max_tokens",
    }
)


def _policy_from_mapping(values: Mapping[str, Any], where: str) -> ResetPolicy:
    unknown = sorted(set(values) - _POLICY_KEYS)
    if unknown:
        raise InvalidArgumentError(
            f"unknown reset policy setting(s) {unknown} in {where}; "
            f"allowed: {', '.join(sorted(_POLICY_KEYS))}"
        )
    kwargs = dict(values)
    if "max_active_work_minutes" in kwargs:
        minutes = kwargs.pop("max_active_work_minutes")
        kwargs["max_active_work_age"] = None if minutes is None else timedelta(minutes=minutes)
    try:
        return ResetPolicy(**kwargs)
    except (TypeError, ValueError) as error:
        raise InvalidArgumentError(f"invalid reset policy in {where}: {error}") from error


def _policy_map(value: Mapping[str, ResetPolicy]) -> Mapping[str, ResetPolicy]:
    for name, policy in value.items():
        if not isinstance(policy, ResetPolicy):
            raise TypeError(f"the policy for {name!r} must be a ResetPolicy")
    return MappingProxyType(dict(value))


@attrs.frozen
class ResetPolicies:
    """Picks the reset policy for a message: platform override, else chat type, else default.

    .. versionadded:: 0.1.0
    """

    default: ResetPolicy = attrs.field(factory=ResetPolicy)
    by_type: Mapping[str, ResetPolicy] = attrs.field(
        factory=dict, converter=_policy_map, kw_only=True, hash=False
    )
    by_platform: Mapping[str, ResetPolicy] = attrs.field(
        factory=dict, converter=_policy_map, kw_only=True, hash=False
    )

    def for_source(self, platform: str, chat_type: str) -> ResetPolicy:
        """Return the policy that governs a ``chat_type`` conversation on ``platform``."""
        policy = self.by_platform.get(platform)
        if policy is None:
            policy = self.by_type.get(chat_type, self.default)
        return policy

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> ResetPolicies:
        """Read the ``session_reset:`` configuration block.

        Top-level settings (``mode``, ``idle_minutes``, ``at_hour``, ``timezone``, ``notify``,
        ``notify_exclude_platforms``, ``max_active_work_minutes``) form the default policy.
        ``by_type`` and ``by_platform`` map a chat type or platform to partial settings that are
        laid over the defaults. A mapping of the form ``{"session_reset": {...}}`` is unwrapped.

        >>> ResetPolicies.from_mapping(
        ...     {"mode": "idle", "by_platform": {"feishu": {"mode": "daily"}}}
        ... ).for_source("feishu", "dm").mode
        'daily'
        """
        if set(config) == {"session_reset"}:
            config = config["session_reset"]
        base = {k: v for k, v in config.items() if k not in {"by_type", "by_platform"}}
        default = _policy_from_mapping(base, "session_reset")
        overrides: dict[str, dict[str, ResetPolicy]] = {"by_type": {}, "by_platform": {}}
        for group, policies in overrides.items():
            section = config.get(group) or {}
            if not isinstance(section, Mapping):
                raise TypeError(f"session_reset.{group} must map names to settings")
            for name, partial in section.items():
                if not isinstance(partial, Mapping):
                    raise TypeError(f"session_reset.{group}.{name} must be a mapping of settings")
                policies[name] = _policy_from_mapping(
                    {**base, **partial}, f"session_reset.{group}.{name}"
                )
        return cls(default, by_type=overrides["by_type"], by_platform=overrides["by_platform"])


# -- evaluation ------------------------------------------------------------------------------------


def _utc(value: datetime, name: str) -> datetime:
    require_aware(value, name)
    # Arithmetic between datetimes sharing a tzinfo ignores DST offsets; do everything in UTC.
    return value.astimezone(UTC)


def _boundary_on(day: date, hour: int, zone: tzinfo) -> datetime:
    """The UTC instant of ``hour:00`` local time on ``day`` (DST gaps and folds resolved)."""
    wall = datetime.combine(day, time(hour), tzinfo=zone)
    instant = wall.astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) == wall.replace(tzinfo=None):
        return instant  # the hour exists (fold=0 picks its first occurrence)
    # The hour falls in a gap. fold=1 reads it with the offset after the change, which lands
    # before the transition; fold=0 lands after it. Bisect for the transition instant, which is
    # the first instant after the gap.
    after_offset = instant.astimezone(zone).utcoffset()
    low = wall.replace(fold=1).astimezone(UTC)
    high = instant
    while high - low > _ONE_MICROSECOND:
        middle = low + (high - low) / 2
        if middle.astimezone(zone).utcoffset() == after_offset:
            high = middle
        else:
            low = middle
    return high


def _latest_boundary(now: datetime, hour: int, zone: tzinfo) -> datetime:
    today = now.astimezone(zone).date()
    boundary = _boundary_on(today, hour, zone)
    if now < boundary:
        boundary = _boundary_on(today - timedelta(days=1), hour, zone)
    return boundary


def evaluate_reset(
    policy: ResetPolicy,
    *,
    last_activity: datetime,
    now: datetime,
    active_work: bool = False,
) -> Literal["idle", "daily"] | None:
    """Return why the session must be reset now (``"idle"`` or ``"daily"``), or ``None``.

    Active background work for the key blocks expiry while ``now - last_activity`` is at most
    ``policy.max_active_work_age``. Under ``both``, idle is checked first. Under
    ``daily_and_idle`` the reason is ``"daily"``, reported only when a boundary has passed since
    the last activity and the session has also been idle for more than ``idle_minutes``: a chat
    active across the boundary carries on until it falls quiet (or until the next boundary finds
    it quiet). Both comparisons are strict: a session idle for exactly ``idle_minutes`` is kept,
    and so is one whose last activity was exactly at the daily boundary. (Suspension is the
    store's business: it wins over every policy, ``none`` included.)

    .. versionadded:: 0.1.0
    """
    last = _utc(last_activity, "last_activity")
    current = _utc(now, "now")
    if active_work and (
        policy.max_active_work_age is None or current - last <= policy.max_active_work_age
    ):
        return None
    idle = current > last + timedelta(minutes=policy.idle_minutes)
    if policy.mode == "daily_and_idle":
        if idle and last < _latest_boundary(current, policy.at_hour, policy.zone):
            return "daily"
        return None
    if policy.mode in {"idle", "both"} and idle:
        return "idle"
    if policy.mode in {"daily", "both"} and last < _latest_boundary(
        current, policy.at_hour, policy.zone
    ):
        return "daily"
    return None


def exceeds_size(policy: ResetPolicy, *, messages: int, tokens: int = 0) -> bool:
    """Whether a live session of ``messages`` messages and ``tokens`` tokens must rotate.

    True once it holds at least ``policy.max_messages`` messages or ``policy.max_tokens``
    tokens (a limit of ``None`` never fires). The store then moves the key to a child session
    (its parent the full one, which ends ``size``) with the same session state, like
    compression, and the lookup reports ``reset.reason == "size"``.

    >>> exceeds_size(ResetPolicy(max_messages=100), messages=100)
    True

    .. versionadded:: 0.1.0
    """
    if policy.max_messages is not None and messages >= policy.max_messages:
        return True
    return policy.max_tokens is not None and tokens >= policy.max_tokens


def next_reset_at(policy: ResetPolicy, last_activity: datetime) -> datetime | None:
    """Return the earliest instant (UTC) at which :func:`evaluate_reset` reports a reset.

    ``None`` under mode ``none``. Idle expiry is strict, so it comes one microsecond after
    ``last_activity + idle_minutes``; a daily reset comes exactly at the next boundary; under
    ``daily_and_idle`` the later of the two (the first instant both hold). Active
    work is not considered (it is a property of the moment, not of the policy).

    .. versionadded:: 0.1.0
    """
    last = _utc(last_activity, "last_activity")
    if policy.mode == "none":
        return None
    idle = last + timedelta(minutes=policy.idle_minutes) + _ONE_MICROSECOND
    if policy.mode == "idle":
        return idle
    zone = policy.zone
    day = last.astimezone(zone).date()
    boundary = _boundary_on(day, policy.at_hour, zone)
    if boundary <= last:
        boundary = _boundary_on(day + timedelta(days=1), policy.at_hour, zone)
    if policy.mode == "daily":
        return boundary
    if policy.mode == "daily_and_idle":
        return max(idle, boundary)
    return min(idle, boundary)
