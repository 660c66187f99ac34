"""Telegram: messages sent on behalf of a chat are keyed and named by that chat."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extras import FRAMEWORKS_REASON
from hermes_sessions import AdapterPayloadError, build_session_key
from hermes_sessions.adapters import NewMessage
from hermes_sessions.adapters import telegram as adapter

PAYLOADS = Path(__file__).parent / "payloads"
GROUP_KEY = "agent:main:telegram:group:-1001234567890"


def load(name):
    """A payload file from ``payloads/``."""
    return json.loads((PAYLOADS / f"{name}.json").read_text(encoding="utf-8"))


def ptb_update(name):
    """The payload as python-telegram-bot's ``Update``."""
    telegram = pytest.importorskip("telegram", reason=FRAMEWORKS_REASON)
    return telegram.Update.de_json(load(name), None)


def aiogram_update(name):
    """The payload as aiogram's ``Update``."""
    types = pytest.importorskip("aiogram.types", reason=FRAMEWORKS_REASON)
    return types.Update.model_validate(load(name))


FRAMEWORKS = {"payload": load, "python-telegram-bot": ptb_update, "aiogram": aiogram_update}


@pytest.fixture(params=sorted(FRAMEWORKS))
def update(request):
    """Build an update from a payload file as a dict, a PTB ``Update`` or an aiogram ``Update``."""
    return FRAMEWORKS[request.param]


def converted(update, name):
    """The NewMessage of payload ``name``."""
    event = adapter.convert(update(name))
    assert isinstance(event, NewMessage)
    return event


def test_two_channels_posting_in_a_group_get_two_lanes(update):
    """Users posting as different channels are two senders, not one ``Channel_Bot``."""
    first = converted(update, "telegram_as_channel")
    second = converted(update, "telegram_as_other_channel")
    assert build_session_key(first.source) == f"{GROUP_KEY}:-1005550000001"
    assert build_session_key(second.source) != build_session_key(first.source)
    assert (first.message.sender_id, first.message.sender_name) == ("-1005550000001", "Acme status")
    assert second.message.sender_name == "Beta testers"


def test_anonymous_admins_speak_as_the_group(update):
    """An anonymous admin is the group itself, named by their signature, never ``Group``."""
    event = converted(update, "telegram_anonymous_admin")
    assert event.message.sender_id == "-1001234567890"
    assert event.message.sender_name == "Release manager"
    assert build_session_key(event.source) == f"{GROUP_KEY}:-1001234567890"


def test_an_automatic_forward_is_the_linked_channels(update):
    """A linked channel's post forwarded into its chat is the channel's, not 777000's."""
    event = converted(update, "telegram_auto_forward")
    assert (event.message.sender_id, event.message.sender_name) == ("-1009876543210", "Hermes news")


def test_a_placeholder_sender_without_its_chat_is_refused():
    """A placeholder ``from`` with no ``sender_chat`` names nobody: refused, not keyed as it."""
    payload = load("telegram_as_channel")
    del payload["message"]["sender_chat"]
    with pytest.raises(AdapterPayloadError) as info:
        adapter.convert(payload)
    assert info.value.field == "message.sender_chat"
