"""Telegram: python-telegram-bot and aiogram objects and Bot API payloads to store events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extras import FRAMEWORKS_REASON
from hermes_sessions import build_session_key
from hermes_sessions.adapters import Edit, NewMessage
from hermes_sessions.adapters import telegram as adapter

PAYLOADS = Path(__file__).parent / "payloads"


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


def test_private_chat_is_a_dm(update):
    """A private chat gives the DM key; the raw ``private`` is kept beside it."""
    event = adapter.convert(update("telegram_private"))
    assert isinstance(event, NewMessage)
    assert build_session_key(event.source) == "agent:main:telegram:dm:42"
    assert event.source.platform_chat_type == "private"
    assert event.message.content == "where did we leave the deploy?"
    assert (event.message.sender_id, event.message.sender_name) == ("42", "Alice Liddell")


def test_message_ids_are_qualified_by_chat(update):
    """Telegram ids are per chat, so the platform id is ``<chat_id>:<message_id>``."""
    event = adapter.convert(update("telegram_private"))
    assert isinstance(event, NewMessage)
    assert event.message.platform_message_id == "42:7"
    assert event.source.message_id == "42:7"


def test_a_forum_topic_is_its_own_shared_session(update):
    """A supergroup forum topic keys on chat and topic, shared by its members (DESIGN §3.2)."""
    event = adapter.convert(update("telegram_forum_topic"), bot_username="hermes_bot")
    assert isinstance(event, NewMessage)
    expected = "agent:main:telegram:group:-1002285219667:thread:17585"
    assert build_session_key(event.source) == expected
    assert event.source.platform_chat_type == "supergroup"
    assert event.source.chat_name == "Hermes dev"


def test_the_bot_mention_is_stripped_and_recorded(update):
    """``@hermes_bot`` leaves the text and ``extra['mentions_bot']`` says it was there."""
    event = adapter.convert(update("telegram_forum_topic"), bot_username="@Hermes_Bot")
    assert isinstance(event, NewMessage)
    assert event.message.content == "summarise the release notes"
    assert event.message.extra["mentions_bot"] is True


def test_the_topic_root_is_not_a_reply(update):
    """In a topic, the implicit reply to the topic's first message is not recorded as a reply."""
    event = adapter.convert(update("telegram_forum_topic"))
    assert isinstance(event, NewMessage)
    assert "reply_to" not in event.message.extra
    assert "@hermes_bot" in str(event.message.content)


def test_a_reply_in_an_ordinary_group_stays_in_the_group(update):
    """A reply thread id outside a forum is ignored; the reply and quote go to ``extra``."""
    event = adapter.convert(update("telegram_group_reply"))
    assert isinstance(event, NewMessage)
    assert event.source.thread_id is None
    assert build_session_key(event.source) == "agent:main:telegram:group:-1001234567890:42"
    assert event.message.extra == {"reply_to": "-1001234567890:50", "quote": "deploy"}


def test_a_photo_becomes_a_part_with_its_file_ids(update):
    """The largest photo size is a part carrying ``file_id``; the caption leads as text."""
    event = adapter.convert(update("telegram_photo"))
    assert isinstance(event, NewMessage)
    assert event.message.content == [
        {"type": "text", "text": "the error screen"},
        {
            "type": "image",
            "file_id": "AgACAgIAAxkBAAIBlarge",
            "file_unique_id": "AQADlarge",
            "file_size": 72000,
        },
    ]


def test_a_voice_note_becomes_an_audio_part(update):
    """A voice note alone is a one-part message of type ``audio``."""
    event = adapter.convert(update("telegram_voice_document"))
    assert isinstance(event, NewMessage)
    assert event.message.content == [
        {
            "type": "audio",
            "file_id": "AwACAgIAAxkBAAIBvoice",
            "file_unique_id": "AgADvoice",
            "mime_type": "audio/ogg",
            "file_size": 9000,
            "duration": 4,
        }
    ]


def test_an_edited_message_is_an_edit_of_the_same_id(update):
    """``edited_message`` becomes an ``Edit`` naming the id the original was stored under."""
    event = adapter.convert(update("telegram_edited"))
    assert isinstance(event, Edit)
    assert event.platform_message_id == "42:7"
    assert event.content == "where did we leave the rollback?"
    assert build_session_key(event.source) == "agent:main:telegram:dm:42"


def test_a_channel_post_keys_on_the_channel(update):
    """A channel post has no sender: the key is the channel's, the name its author signature."""
    event = adapter.convert(update("telegram_channel_post"))
    assert isinstance(event, NewMessage)
    assert build_session_key(event.source) == "agent:main:telegram:channel:-1009876543210"
    assert event.message.sender_id is None
    assert event.message.sender_name == "Jordan"


def test_a_bare_message_is_accepted_too():
    """A ``Message`` (as aiogram handlers receive it) converts like the update around it."""
    types = pytest.importorskip("aiogram.types", reason=FRAMEWORKS_REASON)
    update = types.Update.model_validate(load("telegram_edited"))
    event = adapter.convert(update.edited_message)
    assert isinstance(event, Edit)
    assert event.platform_message_id == "42:7"


def test_updates_without_a_message_give_nothing():
    """A callback query, or a service message without text or media, concerns no transcript."""
    assert adapter.convert({"update_id": 1, "callback_query": {"id": "1"}}) is None
    service = load("telegram_private")
    del service["message"]["text"]
    service["message"]["new_chat_title"] = "renamed"
    assert adapter.convert(service) is None
    assert adapter.convert("not an update") is None
