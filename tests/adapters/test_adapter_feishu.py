"""Feishu / Lark: lark-oapi event objects and event payloads to store events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extras import FRAMEWORKS_REASON
from hermes_sessions import KeyPolicy, build_session_key
from hermes_sessions.adapters import NewMessage
from hermes_sessions.adapters import feishu as adapter

PAYLOADS = Path(__file__).parent / "payloads"


def load(name):
    """A payload file from ``payloads/``."""
    return json.loads((PAYLOADS / f"{name}.json").read_text(encoding="utf-8"))


def lark_event(name):
    """The payload as lark-oapi's ``P2ImMessageReceiveV1``, as its dispatcher builds it."""
    lark = pytest.importorskip("lark_oapi", reason=FRAMEWORKS_REASON)
    im = pytest.importorskip("lark_oapi.api.im.v1")
    return lark.JSON.unmarshal(
        (PAYLOADS / f"{name}.json").read_text("utf-8"), im.P2ImMessageReceiveV1
    )


def inner_event(name):
    """Only the ``event`` part of the body."""
    return load(name)["event"]


FRAMEWORKS = {"payload": load, "event-body": inner_event, "lark-oapi": lark_event}


@pytest.fixture(params=sorted(FRAMEWORKS))
def event(request):
    """Build an event as the whole body, its ``event`` part, or lark-oapi's own object."""
    return FRAMEWORKS[request.param]


def converted(event, name, **options):
    """Convert ``name`` built by ``event``/``message``; it must be a ``NewMessage``."""
    result = adapter.convert(event(name), **options)
    assert isinstance(result, NewMessage)
    return result


def test_a_group_thread_is_shared(event):
    """Two members of one group thread land on one key (DESIGN §3.2: threads are shared)."""
    first = converted(event, "feishu_group_thread")
    second = converted(event, "feishu_group_thread_other_member")
    assert build_session_key(first.source) == "agent:main:feishu:group:oc_xxx:thread:omt_1"
    assert build_session_key(second.source) == build_session_key(first.source)


def test_thread_members_are_isolated_only_when_asked(event):
    """With both per-user flags on, each member of the thread gets their own lane."""
    policy = KeyPolicy(thread_sessions_per_user=True)
    first = converted(event, "feishu_group_thread")
    expected = "agent:main:feishu:group:oc_xxx:thread:omt_1:on_union1"
    assert build_session_key(first.source, policy) == expected


def test_union_id_is_the_participant_and_the_sender(event):
    """``open_id`` is ``user_id``; ``union_id`` is preferred in keys and is the sender."""
    message = converted(event, "feishu_group_thread")
    assert (message.source.user_id, message.source.user_id_alt) == ("ou_user1", "on_union1")
    assert message.message.sender_id == "on_union1"
    assert message.source.scope_id == "2ca1d211f64f6438"


def test_mentions_become_names_and_the_bot_is_removed(event):
    """Placeholders turn into ``@Name``; the bot's own mention leaves and is recorded."""
    message = converted(event, "feishu_group_thread", bot_open_id="ou_bot")
    assert message.message.content == "部署回滚了吗 @王芳"
    assert message.message.extra == {
        "reply_to": "om_root",
        "thread_root": "om_root",
        "mentions_bot": True,
    }


def test_without_the_bot_id_every_mention_is_kept(event):
    """Not knowing the bot's open_id, the adapter keeps its mention like any other."""
    message = converted(event, "feishu_group_thread")
    assert message.message.content == "@Hermes 部署回滚了吗 @王芳"
    assert "mentions_bot" not in message.message.extra


def test_a_p2p_chat_is_a_dm(event):
    """``p2p`` becomes ``dm``, keyed by the chat id, with the raw name kept."""
    message = converted(event, "feishu_p2p_post")
    assert build_session_key(message.source) == "agent:main:feishu:dm:oc_p2p_lin"
    assert message.source.platform_chat_type == "p2p"


def test_post_content_is_text_plus_image_parts(event):
    """A rich-text post gives its title and paragraphs as text and its images as parts."""
    message = converted(event, "feishu_p2p_post", bot_open_id="ou_bot")
    assert message.message.content == [
        {"type": "text", "text": "周报\n本周完成了 搜索\n请总结"},
        {"type": "image", "image_key": "img_v2_041b28e3"},
    ]
    assert message.message.extra == {"mentions_bot": True}


def test_a_file_message_is_a_file_part(event):
    """A file message carries its ``file_key`` and name."""
    message = converted(event, "feishu_p2p_file")
    assert message.message.content == [
        {"type": "file", "file_key": "file_v3_00ab", "name": "report.pdf"}
    ]


def test_a_card_is_parsed_to_its_text(event):
    """An interactive card gives its visible strings, in order."""
    message = converted(event, "feishu_p2p_interactive")
    assert message.message.content == "审批\n请假申请\n同意"


def test_a_post_in_a_locale_wrapper_is_read():
    """A post body keyed by locale (``zh_cn``) is read like a bare one."""
    data = load("feishu_p2p_post")
    body = json.loads(data["event"]["message"]["content"])
    data["event"]["message"]["content"] = json.dumps({"zh_cn": body}, ensure_ascii=False)
    message = adapter.convert(data)
    assert isinstance(message, NewMessage)
    assert message.message.content[0]["text"].startswith("周报\n")


def test_unsupported_content_gives_nothing():
    """A message type with nothing to keep (a shared chat card) and non-events give ``None``."""
    data = load("feishu_p2p_file")
    data["event"]["message"]["message_type"] = "share_chat"
    data["event"]["message"]["content"] = json.dumps({"chat_id": "oc_other"})
    assert adapter.convert(data) is None
    assert adapter.convert({"schema": "2.0", "event": {"message_id": "om_1"}}) is None
    data["event"]["message"]["content"] = "not json"
    assert adapter.convert(data) is None
