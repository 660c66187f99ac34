"""Reset notices: texts for every reason, in English and Chinese, honouring notify settings."""

from __future__ import annotations

import attrs
import pytest

from hermes_sessions.host import NOTICES_EN, NOTICES_ZH, format_duration, reset_notice
from hermes_sessions.models import ResetDecision
from hermes_sessions.policy import ResetPolicy


def decision(reason, *, notify=True):
    """A reset decision of ``reason`` for session ``s1``."""
    return ResetDecision(reason=reason, previous_session_id="s1", notify=notify)


@pytest.mark.parametrize(
    ("minutes", "english", "chinese"),
    [
        (1440, "24h", "24 小时"),
        (90, "1h 30m", "1 小时 30 分钟"),
        (45, "45m", "45 分钟"),
        (60, "1h", "1 小时"),
        (2880, "48h", "48 小时"),
    ],
)
def test_durations_read_as_hours_and_minutes(minutes, english, chinese):
    """Durations are whole hours plus leftover minutes, in each language's units."""
    assert format_duration(minutes) == english
    assert format_duration(minutes, NOTICES_ZH) == chinese


def test_an_idle_reset_names_the_idle_time():
    """Both texts of an idle reset carry the policy's idle duration."""
    notice = reset_notice(decision("idle"), ResetPolicy(idle_minutes=1440))
    assert notice.reason == "idle"
    assert "nothing was said here for 24h" in notice.user_text
    assert "after 24h of inactivity" in notice.system_note


def test_a_daily_reset_names_the_hour_in_the_policys_zone():
    """The daily hour is shown with the policy's IANA zone."""
    policy = ResetPolicy(mode="daily", at_hour=4, timezone="Asia/Shanghai")
    notice = reset_notice(decision("daily"), policy)
    assert "every day at 04:00 (Asia/Shanghai)" in notice.user_text
    assert "daily at 04:00 (Asia/Shanghai)" in notice.system_note
    chinese = reset_notice(decision("daily"), policy, templates=NOTICES_ZH)
    assert "每天 04:00（Asia/Shanghai）重置" in chinese.user_text


def test_a_suspended_reset_has_its_own_texts():
    """A suspension is explained as such, in both languages."""
    assert "was suspended" in reset_notice(decision("suspended"), ResetPolicy()).user_text
    chinese = reset_notice(decision("suspended"), ResetPolicy(), templates=NOTICES_ZH)
    assert "已被挂起" in chinese.user_text
    assert "已被挂起" in chinese.system_note


def test_no_user_text_when_the_decision_says_not_to_notify():
    """``notify=False`` (policy off or platform excluded) leaves only the model's note."""
    notice = reset_notice(decision("idle", notify=False), ResetPolicy())
    assert notice.user_text is None
    assert notice.system_note


@pytest.mark.parametrize(
    ("platform", "notified"), [("webhook", False), ("api_server", False), ("telegram", True)]
)
def test_excluded_platforms_get_no_user_text(platform, notified):
    """With ``platform``, the policy's exclusion list is applied again."""
    notice = reset_notice(decision("daily"), ResetPolicy(), platform=platform)
    assert (notice.user_text is not None) == notified


def test_a_policy_with_notify_off_silences_every_platform():
    """``notify=False`` on the policy silences the user text whatever the platform."""
    notice = reset_notice(decision("idle"), ResetPolicy(notify=False), platform="telegram")
    assert notice.user_text is None


def test_templates_are_replaceable():
    """A host swaps one sentence with ``attrs.evolve`` and keeps the rest."""
    templates = attrs.evolve(NOTICES_EN, idle_user="New chat after {duration} away.")
    notice = reset_notice(decision("idle"), ResetPolicy(idle_minutes=45), templates=templates)
    assert notice.user_text == "New chat after 45m away."


@pytest.mark.parametrize("templates", [NOTICES_EN, NOTICES_ZH])
@pytest.mark.parametrize("reason", ["size", "retention"])
def test_size_and_retention_resets_have_notices(templates, reason):
    """Every ResetReason has texts: a size rotation and a retention reset are announced too."""
    notice = reset_notice(decision(reason), ResetPolicy(), templates=templates)
    assert notice.reason == reason
    assert notice.user_text
    assert notice.system_note.startswith("[")
    assert notice.user_text != reset_notice(decision("idle"), ResetPolicy()).user_text
