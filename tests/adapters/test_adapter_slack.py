"""Slack: Events API payloads, also as slack-bolt hands them to listeners, to store events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extras import FRAMEWORKS_REASON
from hermes_sessions import build_session_key
from hermes_sessions.adapters import Edit, NewMessage, Retract
from hermes_sessions.adapters import slack as adapter

PAYLOADS = Path(__file__).parent / "payloads"


def load(name):
    """A payload file from ``payloads/``."""
    return json.loads((PAYLOADS / f"{name}.json").read_text(encoding="utf-8"))


def through_bolt(*names):
    """What a slack-bolt app's listeners convert, dispatching the payloads offline."""
    slack_bolt = pytest.importorskip("slack_bolt", reason=FRAMEWORKS_REASON)
    from slack_bolt.authorization import AuthorizeResult  # noqa: PLC0415  # optional framework

    def authorize(enterprise_id, team_id, user_id):
        return AuthorizeResult(
            enterprise_id=enterprise_id,
            team_id=team_id,
            bot_user_id="UBOT",
            bot_id="BBOT",
            bot_token="xoxb-offline",  # noqa: S106  # a fake token; nothing is sent
        )

    app = slack_bolt.App(
        signing_secret="unused",  # noqa: S106  # verification is off offline
        authorize=authorize,
        request_verification_enabled=False,
        process_before_response=True,
    )
    seen = []

    @app.event("message")
    def on_message(body, context):
        seen.append(adapter.convert(body, bot_user_id=context.bot_user_id))

    @app.event("app_mention")
    def on_mention(event, context):
        seen.append(adapter.convert(event, bot_user_id=context.bot_user_id))

    for name in names:
        request = slack_bolt.BoltRequest(
            body=(PAYLOADS / f"{name}.json").read_text(encoding="utf-8"),
            headers={"content-type": ["application/json"]},
        )
        assert app.dispatch(request).status == 200
    return seen


def test_bolt_listeners_see_the_same_events_as_the_payloads():
    """Dispatched through slack-bolt, each payload converts as it does on its own."""
    names = ["slack_dm_thread", "slack_app_mention", "slack_message_changed"]
    names += ["slack_message_deleted", "slack_channel_join"]
    direct = [adapter.convert(load(name), bot_user_id="UBOT") for name in names]
    assert through_bolt(*names) == direct
    assert [type(e).__name__ for e in direct] == [
        "NewMessage",
        "NewMessage",
        "Edit",
        "Retract",
        "NoneType",
    ]


def test_a_dm_thread_keeps_the_dm_key_plus_the_thread():
    """A reply in a DM thread keys as the DM followed by ``thread_ts`` (DESIGN §3.2)."""
    dm = adapter.convert(load("slack_dm"))
    reply = adapter.convert(load("slack_dm_thread"))
    assert isinstance(dm, NewMessage)
    assert isinstance(reply, NewMessage)
    assert build_session_key(dm.source) == "agent:main:slack:dm:D024BE91L"
    assert build_session_key(reply.source) == "agent:main:slack:dm:D024BE91L:1778547600.000100"


def test_ids_are_qualified_by_channel_and_the_team_is_the_scope():
    """``ts`` is per channel, so ids are ``<channel>:<ts>``; the thread root is the reply target."""
    reply = adapter.convert(load("slack_dm_thread"))
    assert isinstance(reply, NewMessage)
    assert reply.message.platform_message_id == "D024BE91L:1778547700.000200"
    assert reply.message.extra == {"reply_to": "D024BE91L:1778547600.000100"}
    assert reply.source.scope_id == "T0001"
    assert reply.source.platform_chat_type == "im"
    assert reply.message.sender_id == "U2147483697"


def test_an_app_mention_reads_the_type_from_the_channel_id():
    """``app_mention`` has no ``channel_type``; a ``C`` channel is a channel, isolated per user."""
    event = adapter.convert(load("slack_app_mention"), bot_user_id="UBOT")
    assert isinstance(event, NewMessage)
    assert build_session_key(event.source) == "agent:main:slack:channel:C0LAN2Q65:U2147483697"
    assert event.message.content == "what changed in <#C0LAN2Q65|general> today?"
    assert event.message.extra == {"mentions_bot": True}


def test_without_the_bot_id_the_mention_is_kept():
    """Not knowing the bot's user id, the adapter leaves ``<@UBOT>`` in the text."""
    event = adapter.convert(load("slack_app_mention")["event"])
    assert isinstance(event, NewMessage)
    assert str(event.message.content).startswith("<@UBOT> ")


def test_shared_files_become_parts():
    """Files are parts typed by their MIME type, with their id, name and private URL."""
    event = adapter.convert(load("slack_channel_file"))
    assert isinstance(event, NewMessage)
    text, log, graph = event.message.content
    assert text == {"type": "text", "text": "log attached"}
    assert log["type"] == "file"
    assert log["file_id"] == "F0S43PZDF"
    assert log["name"] == "deploy.log"
    assert graph["type"] == "image"
    assert graph["url_private"].endswith("graph.png")


def test_message_changed_is_an_edit_of_the_nested_message():
    """The edit names the original's qualified id and its lane (the DM thread)."""
    event = adapter.convert(load("slack_message_changed"))
    assert isinstance(event, Edit)
    assert event.platform_message_id == "D024BE91L:1778547700.000200"
    assert event.content == "and the third step?"
    assert build_session_key(event.source).endswith(":dm:D024BE91L:1778547600.000100")


def test_a_change_that_keeps_the_text_is_no_edit():
    """Slack also sends ``message_changed`` when only a thread's reply count moved."""
    data = load("slack_message_changed")
    data["event"]["message"]["text"] = data["event"]["previous_message"]["text"]
    assert adapter.convert(data) is None


def test_message_deleted_is_a_retract():
    """``message_deleted`` names ``deleted_ts`` in the channel, in the original's lane."""
    event = adapter.convert(load("slack_message_deleted"))
    assert isinstance(event, Retract)
    assert event.platform_message_id == "D024BE91L:1778547700.000200"
    assert event.source.thread_id == "1778547600.000100"


def test_bots_and_other_events_give_nothing():
    """Messages from bots or the bot itself, joins and non-message events concern no transcript."""
    from_bot = load("slack_dm")
    from_bot["event"]["bot_id"] = "B999"
    assert adapter.convert(from_bot) is None
    own = load("slack_dm")
    own["event"]["user"] = "UBOT"
    assert adapter.convert(own, bot_user_id="UBOT") is None
    deleted_own = load("slack_message_deleted")
    deleted_own["event"]["previous_message"]["user"] = "UBOT"
    assert adapter.convert(deleted_own, bot_user_id="UBOT") is None
    assert adapter.convert(load("slack_channel_join")) is None
    assert adapter.convert({"type": "event_callback", "event": {"type": "channel_created"}}) is None
    assert adapter.convert(["not", "an", "event"]) is None
    empty = load("slack_dm")
    empty["event"]["text"] = ""
    assert adapter.convert(empty) is None
