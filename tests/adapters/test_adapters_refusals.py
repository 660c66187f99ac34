"""Adapters refuse a payload that cannot say whose conversation it is, under ``python -O`` too."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_sessions import AdapterPayloadError
from hermes_sessions.adapters import dingtalk, discord, feishu, slack, telegram

PAYLOADS = Path(__file__).parent / "payloads"
ADAPTERS = Path(__file__).parents[2] / "src" / "hermes_sessions" / "adapters"


def load(name):
    """A payload file from ``payloads/``."""
    return json.loads((PAYLOADS / f"{name}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("convert", "name", "path", "field"),
    [
        (
            telegram.convert,
            "telegram_group_reply",
            ("message", "chat", "type"),
            "message.chat.type",
        ),
        (feishu.convert, "feishu_group_thread", ("event", "message", "chat_type"), None),
        (dingtalk.convert, "dingtalk_group_text", ("conversationType",), "conversationType"),
    ],
)
def test_a_group_message_without_its_chat_type_is_refused_not_a_dm(convert, name, path, field):
    """Without the chat type, a group's message is refused; it never becomes a DM."""
    payload = load(name)
    parent = payload
    for step in path[:-1]:
        parent = parent[step]
    del parent[path[-1]]
    with pytest.raises(AdapterPayloadError) as info:
        convert(payload)
    assert info.value.field == (field or ".".join(path))


@pytest.mark.parametrize(
    ("convert", "name", "path"),
    [
        (telegram.convert, "telegram_group_reply", ("message", "chat", "id")),
        (slack.convert, "slack_app_mention", ("event", "channel")),
        (feishu.convert, "feishu_group_thread", ("event", "message", "chat_id")),
        (discord.convert, "discord_dm_no_channel", ("channel_id",)),
        (dingtalk.convert, "dingtalk_group_text", ("conversationId",)),
    ],
)
def test_a_message_without_its_chat_id_is_refused(convert, name, path):
    """No adapter falls back to the sender or the thread when the chat id is missing."""
    payload = load(name)
    parent = payload
    for step in path[:-1]:
        parent = parent[step]
    del parent[path[-1]]
    with pytest.raises(AdapterPayloadError, match=path[-1]):
        convert(payload)


def test_a_telegram_message_without_its_id_is_refused_under_python_o():
    """The missing ``message_id`` is a refusal, not an ``assert`` that ``-O`` strips."""
    payload = load("telegram_private")
    del payload["message"]["message_id"]
    script = (
        "import json, sys\n"
        "from hermes_sessions import AdapterPayloadError\n"
        "from hermes_sessions.adapters import telegram\n"
        "try:\n"
        "    telegram.convert(json.loads(sys.argv[1]))\n"
        "except AdapterPayloadError as error:\n"
        "    print(error.field)\n"
    )
    result = subprocess.run(
        [sys.executable, "-O", "-c", script, json.dumps(payload)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "message.message_id"


def test_no_adapter_checks_a_payload_with_assert():
    """``python -O`` strips asserts, so no adapter module has one."""
    found = [
        f"{path.name}:{node.lineno}"
        for path in sorted(ADAPTERS.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Assert)
    ]
    assert found == []


def test_the_error_names_the_platform_and_the_field():
    """The message says which platform's event and which field, and what to do."""
    payload = load("slack_dm")
    payload["event"]["ts"] = 17
    with pytest.raises(AdapterPayloadError) as info:
        slack.convert(payload)
    assert (info.value.platform, info.value.field) == ("slack", "event.ts")
    assert str(info.value).startswith("slack event: event.ts must be a non-empty string, got int")
    assert isinstance(info.value, ValueError)
