"""DingTalk: dingtalk-stream chatbot messages and their payloads to store events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extras import FRAMEWORKS_REASON
from hermes_sessions import AdapterPayloadError, build_session_key
from hermes_sessions.adapters import NewMessage
from hermes_sessions.adapters import dingtalk as adapter

PAYLOADS = Path(__file__).parent / "payloads"


def load(name):
    """A payload file from ``payloads/``."""
    return json.loads((PAYLOADS / f"{name}.json").read_text(encoding="utf-8"))


def chatbot_message(name):
    """The payload as dingtalk-stream's ``ChatbotMessage``."""
    dingtalk_stream = pytest.importorskip("dingtalk_stream", reason=FRAMEWORKS_REASON)
    return dingtalk_stream.ChatbotMessage.from_dict(load(name))


def callback_message(name):
    """The payload inside the Stream frame a ``ChatbotHandler`` receives."""
    dingtalk_stream = pytest.importorskip("dingtalk_stream", reason=FRAMEWORKS_REASON)
    frame = {
        "specVersion": "1.0",
        "type": "CALLBACK",
        "headers": {"topic": "/v1.0/im/bot/messages/get", "messageId": "frame-1"},
        "data": json.dumps(load(name), ensure_ascii=False),
    }
    return dingtalk_stream.CallbackMessage.from_dict(frame)


FRAMEWORKS = {
    "payload": load,
    "ChatbotMessage": chatbot_message,
    "CallbackMessage": callback_message,
}


@pytest.fixture(params=sorted(FRAMEWORKS))
def message(request):
    """Build a message as the payload, dingtalk-stream's ``ChatbotMessage`` or its callback."""
    return FRAMEWORKS[request.param]


def converted(message, name):
    """Convert ``name`` built by ``event``/``message``; it must be a ``NewMessage``."""
    event = adapter.convert(message(name))
    assert isinstance(event, NewMessage)
    return event


def test_a_group_message_is_a_group_lane_per_member(message):
    """``conversationType`` 2 is a group; members are isolated by their staff id."""
    event = converted(message, "dingtalk_group_text")
    assert build_session_key(event.source) == "agent:main:dingtalk:group:cidxyz==:manager4850"
    assert event.source.platform_chat_type == "2"
    assert event.source.chat_name == "发布群"
    assert event.source.scope_id == "dingcorp"


def test_text_is_trimmed_and_the_mention_recorded(message):
    """The text loses DingTalk's padding; ``isInAtList`` becomes ``extra['mentions_bot']``."""
    event = converted(message, "dingtalk_group_text")
    assert event.message.content == "今天谁值班？"
    assert event.message.extra == {"mentions_bot": True}
    assert event.message.platform_message_id == "msgA1=="
    assert (event.message.sender_id, event.message.sender_name) == ("manager4850", "张伟")


def test_a_one_to_one_picture_is_a_dm_image_part(message):
    """``conversationType`` 1 is a DM; a picture is a part with its download code.

    (dingtalk-stream's ``ImageContent`` keeps only ``downloadCode``; payloads keep both codes.)
    """
    event = converted(message, "dingtalk_single_picture")
    assert build_session_key(event.source) == "agent:main:dingtalk:dm:cidsingle=="
    [part] = event.message.content
    assert part["type"] == "image"
    assert part["downloadCode"] == "mIofN681YE3f"


def test_rich_text_gives_text_and_pictures(message):
    """A rich-text message gives its text and its pictures as parts."""
    event = converted(message, "dingtalk_single_rich_text")
    assert event.message.content == [
        {"type": "text", "text": "看看这张图"},
        {"type": "image", "downloadCode": "dcode1", "pictureDownloadCode": "pcode1"},
    ]


def test_audio_carries_its_recognition_as_text(message):
    """A voice message is an audio part, led by DingTalk's speech recognition."""
    event = converted(message, "dingtalk_single_audio")
    assert event.message.content == [
        {"type": "text", "text": "明天开会"},
        {"type": "audio", "downloadCode": "acode1", "duration": 3000},
    ]


def test_an_external_sender_is_known_by_sender_id():
    """Without a staff id (someone outside the org), the sender is their ``senderId``."""
    data = load("dingtalk_group_text")
    del data["senderStaffId"]
    event = adapter.convert(data)
    assert isinstance(event, NewMessage)
    assert event.message.sender_id == "$:LWCP_v1:$zhangwei"


def test_unknown_types_and_non_messages_give_nothing():
    """A message type with nothing to keep, or something that is not a mapping, gives ``None``."""
    data = load("dingtalk_group_text")
    data["msgtype"] = "chatRecord"
    assert adapter.convert(data) is None
    assert adapter.convert(42) is None


def test_a_mapping_that_is_no_chatbot_message_is_refused():
    """A dict without the fields every chatbot message has names the first one missing."""
    with pytest.raises(AdapterPayloadError) as info:
        adapter.convert({"type": "SYSTEM"})
    assert (info.value.platform, info.value.field) == ("dingtalk", "conversationType")
