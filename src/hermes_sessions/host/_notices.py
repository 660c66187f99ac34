"""What to tell the user, and the model, after an automatic reset."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

if TYPE_CHECKING:
    from hermes_sessions.models import ResetDecision
    from hermes_sessions.policy import ResetPolicy

__all__ = [
    "NOTICES_EN",
    "NoticeTemplates",
    "ResetNotice",
    "format_duration",
    "reset_notice",
]

_MINUTES_PER_HOUR: Final = 60


@attrs.frozen(kw_only=True)
class NoticeTemplates:
    """The texts of :func:`reset_notice`; replace any with :func:`attrs.evolve`.

    ``*_user`` texts go to the person, ``*_note`` texts into the new session for the model.
    Placeholders: ``{duration}`` (idle), ``{hour}`` and ``{zone}`` (daily). ``hours`` and
    ``minutes`` format the parts of a duration, joined by ``duration_joiner``.

    .. versionadded:: 0.1.0
    """

    idle_user: str = (
        "◐ Started a fresh conversation: nothing was said here for {duration}. "
        "Say /resume to go back to the previous one."
    )
    daily_user: str = (
        "◐ Started a fresh conversation: sessions reset every day at {hour} ({zone}). "
        "Say /resume to go back to the previous one."
    )
    suspended_user: str = (
        "◐ Started a fresh conversation: the previous one was suspended. "
        "Say /resume to go back to it."
    )
    size_user: str = (
        "◐ This conversation grew long, so it goes on in a new session. "
        "Say /resume to go back to the previous one."
    )
    retention_user: str = (
        "◐ Started a fresh conversation: the previous one was deleted under the data "
        "retention policy."
    )
    idle_note: str = (
        "[System note: the previous session ended after {duration} of inactivity and this is a "
        "new session. Earlier messages are not in your context; search past sessions if the user "
        "refers to them.]"
    )
    daily_note: str = (
        "[System note: sessions reset daily at {hour} ({zone}); this is a new session. Earlier "
        "messages are not in your context; search past sessions if the user refers to them.]"
    )
    suspended_note: str = (
        "[System note: the previous session was suspended and this is a new session. Earlier "
        "messages are not in your context; search past sessions if the user refers to them.]"
    )
    size_note: str = (
        "[System note: the previous session reached its size limit and this session continues "
        "it. Earlier messages are not in your context; search past sessions if the user refers "
        "to them.]"
    )
    retention_note: str = (
        "[System note: the previous session was deleted under the retention policy and this is "
        "a new session. Its messages are gone.]"
    )
    hours: str = "{}h"
    minutes: str = "{}m"
    duration_joiner: str = " "


NOTICES_EN: Final = NoticeTemplates()
"""English notices (the default).

.. versionadded:: 0.1.0
"""


@attrs.frozen(kw_only=True)
class ResetNotice:
    """The texts for one automatic reset.

    .. versionadded:: 0.1.0
    """

    reason: str
    """``idle``, ``daily``, ``suspended``, ``retention`` or ``size``."""
    user_text: str | None
    """What to tell the person; ``None`` when the policy says not to notify on this platform."""
    system_note: str
    """What to tell the model (append with ``touch=False``, or add to the system prompt)."""


def format_duration(minutes: int, templates: NoticeTemplates = NOTICES_EN) -> str:
    """``minutes`` as hours and minutes: ``24h``, ``1h 30m``, ``45m``.

    >>> [format_duration(m) for m in (1440, 90, 45)]
    ['24h', '1h 30m', '45m']

    .. versionadded:: 0.1.0
    """
    hours, rest = divmod(minutes, _MINUTES_PER_HOUR)
    parts = []
    if hours:
        parts.append(templates.hours.format(hours))
    if rest or not hours:
        parts.append(templates.minutes.format(rest))
    return templates.duration_joiner.join(parts)


def reset_notice(
    decision: ResetDecision,
    policy: ResetPolicy,
    *,
    platform: str | None = None,
    templates: NoticeTemplates = NOTICES_EN,
) -> ResetNotice:
    """The user text and the model's note after the automatic reset ``decision``.

    ``user_text`` is ``None`` unless ``decision.notify`` (which already applied the policy's
    ``notify`` and ``notify_exclude_platforms`` for the source's platform) and, when
    ``platform`` is given, ``policy.notifies(platform)``. The idle duration is the policy's
    ``idle_minutes``; the daily hour is shown in the policy's zone.

    >>> from hermes_sessions.models import ResetDecision
    >>> from hermes_sessions.policy import ResetPolicy
    >>> decision = ResetDecision(reason="idle", previous_session_id="s1", notify=True)
    >>> reset_notice(decision, ResetPolicy(idle_minutes=90)).user_text
    '◐ Started a fresh conversation: nothing was said here for 1h 30m. Say /resume ...'

    .. versionadded:: 0.1.0
    """
    values = {
        "duration": format_duration(policy.idle_minutes, templates),
        "hour": f"{policy.at_hour:02d}:00",
        "zone": policy.zone.key,
    }
    user = getattr(templates, f"{decision.reason}_user")
    note = getattr(templates, f"{decision.reason}_note")
    notify = decision.notify and (platform is None or policy.notifies(platform))
    return ResetNotice(
        reason=decision.reason,
        user_text=user.format(**values) if notify else None,
        system_note=note.format(**values),
    )
