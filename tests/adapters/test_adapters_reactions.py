"""Reactions are annotations on the message they target, never a turn of their own."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from extras import FRAMEWORKS_REASON
from hermes_sessions import Message, SessionSource
from hermes_sessions.adapters import React, apply, discord, feishu, slack, telegram
from hermes_sessions.window import context_window, reactions_of

PAYLOADS = Path(__file__).parent / "payloads"
OPS = {"id": -1001234567890, "title": "Ops", "type": "supergroup"}
BOB = SessionSource(platform="telegram", chat_type="supergroup", chat_id=OPS["id"], user_id=43)


def load(name):
    """A payload file from ``payloads/``."""
    return json.loads((PAYLOADS / f"{name}.json").read_text(encoding="utf-8"))


def ptb_update(data):
    """A Bot API update as python-telegram-bot's ``Update``."""
    module = pytest.importorskip("telegram", reason=FRAMEWORKS_REASON)
    return module.Update.de_json(data, None)


def aiogram_update(data):
    """A Bot API update as aiogram's ``Update``."""
    types = pytest.importorskip("aiogram.types", reason=FRAMEWORKS_REASON)
    return types.Update.model_validate(data)


TELEGRAM = {"payload": copy.deepcopy, "python-telegram-bot": ptb_update, "aiogram": aiogram_update}


@pytest.fixture(params=sorted(TELEGRAM))
def update(request):
    """Build an update as a dict, a PTB ``Update`` or an aiogram ``Update``."""
    return TELEGRAM[request.param]


def bots_reply(store, source, pmid, text="deployed to staging"):
    """The bot's reply in ``source``'s lane, stored with the platform id it was sent under."""
    session_id = store.get_or_create(source).session_id
    reply = Message(role="assistant", content=text, platform_message_id=pmid)
    return store.append(session_id, reply)[0]


def reaction_update(old, new, message_id=55):
    """Bob's reactions on a message of the Ops group changed from ``old`` to ``new``."""
    data = load("telegram_message_reaction")
    data["message_reaction"]["message_id"] = message_id
    data["message_reaction"]["old_reaction"] = [{"type": "emoji", "emoji": e} for e in old]
    data["message_reaction"]["new_reaction"] = [{"type": "emoji", "emoji": e} for e in new]
    return data


def test_a_telegram_reaction_annotates_the_message_and_adds_no_turn(store, update):
    """Bob's 👍 on the bot's reply in his lane lands on that reply; the transcript keeps 1."""
    reply = bots_reply(store, BOB, f"{OPS['id']}:55")
    event = telegram.convert(update(reaction_update([], ["👍"])))
    assert isinstance(event, React)
    assert (event.added, event.removed, event.source.participant) == (("👍",), (), "43")
    applied = apply(store, event)
    assert applied.message is not None
    assert applied.message.id == reply.id
    assert reactions_of(applied.message) == {"👍": ("43",)}
    assert len(store.transcript(reply.session_id)) == 1
    changed = telegram.convert(update(reaction_update(["👍"], ["🔥"])))
    assert (changed.added, changed.removed) == (("🔥",), ("👍",))
    apply(store, changed)
    (kept,) = store.transcript(reply.session_id)
    assert reactions_of(kept) == {"🔥": ("43",)}
    apply(store, telegram.convert(update(reaction_update(["🔥"], []))))
    assert "reactions" not in store.transcript(reply.session_id)[0].extra


def test_a_reaction_to_a_channel_post_finds_the_channels_lane(store):
    """A reactor in a channel has no lane of their own there: the post is in the channel's."""
    channel = SessionSource(platform="telegram", chat_type="channel", chat_id=-1009876543210)
    post = bots_reply(store, channel, "-1009876543210:3", text="v0.1 is out")
    data = reaction_update([], ["🎉"], message_id=3)
    data["message_reaction"]["chat"] = {"id": -1009876543210, "title": "News", "type": "channel"}
    del data["message_reaction"]["user"]
    data["message_reaction"]["actor_chat"] = {
        "id": -1005550000001,
        "title": "Acme",
        "type": "channel",
    }
    applied = apply(store, telegram.convert(data))
    assert applied.message is not None
    assert applied.message.id == post.id
    assert reactions_of(applied.message) == {"🎉": ("-1005550000001",)}


def test_an_unchanged_or_unknown_reaction_changes_nothing(store):
    """Same reactions before and after give ``None``; a message the store lacks is not found."""
    assert telegram.convert(reaction_update(["👍"], ["👍"])) is None
    applied = apply(store, telegram.convert(reaction_update([], ["👍"], message_id=999)))
    assert (applied.session_id, applied.message) == (None, None)


def test_a_slack_reaction_finds_the_authors_lane(store):
    """Bob reacts to Alice's message: it is in Alice's lane, found through ``item_user``."""
    posted = apply(store, slack.convert(load("slack_channel_file")))
    body = load("slack_reaction_added")
    event = slack.convert(body, bot_user_id="UBOT")
    assert isinstance(event, React)
    applied = apply(store, event)
    assert applied.message is not None
    assert applied.message.id == posted.message.id
    assert reactions_of(applied.message) == {":thumbsup:": ("U0BOB",)}
    body["event"]["type"] = "reaction_removed"
    apply(store, slack.convert(body))
    assert reactions_of(store.transcript(posted.session_id)[0]) == {}
    body["event"]["user"] = "UBOT"
    assert slack.convert(body, bot_user_id="UBOT") is None


def test_slack_bolt_hands_reactions_to_the_adapter():
    """Dispatched through slack-bolt's ``reaction_added`` listener, the event is a React."""
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

    @app.event("reaction_added")
    def on_reaction(body, context):
        seen.append(slack.convert(body, bot_user_id=context.bot_user_id))

    request = slack_bolt.BoltRequest(
        body=(PAYLOADS / "slack_reaction_added.json").read_text(encoding="utf-8"),
        headers={"content-type": ["application/json"]},
    )
    assert app.dispatch(request).status == 200
    assert seen == [slack.convert(load("slack_reaction_added"))]


DISCORD_REACTION = {
    "user_id": "80351110224678913",
    "channel_id": "1180000000000000100",
    "message_id": "1180000000000000001",
    "guild_id": "1180000000000000999",
    "message_author_id": "80351110224678912",
    "emoji": {"id": None, "name": "👍"},
    "type": 0,
    "burst": False,
}


def raw_reaction(data, event_type):
    """The payload as discord.py's own ``RawReactionActionEvent``."""
    module = pytest.importorskip("discord", reason=FRAMEWORKS_REASON)
    emoji = module.PartialEmoji.from_dict(data["emoji"])
    return module.RawReactionActionEvent(data, emoji, event_type)


def test_a_discord_reaction_annotates_the_authors_message(store):
    """Sam's 👍 on Nelly's message in #general lands in Nelly's lane, through discord.py too."""
    posted = apply(store, discord.convert(load("discord_guild_text")))
    for built in (DISCORD_REACTION, raw_reaction(DISCORD_REACTION, "REACTION_ADD")):
        event = discord.convert_reaction(built)
        assert isinstance(event, React)
        assert event.platform_message_id == "1180000000000000001"
        applied = apply(store, event)
        assert applied.message is not None
        assert applied.message.id == posted.message.id
    assert reactions_of(store.transcript(posted.session_id)[0]) == {"👍": ("80351110224678913",)}
    gone = discord.convert_reaction(raw_reaction(DISCORD_REACTION, "REACTION_REMOVE"), removed=True)
    apply(store, gone)
    assert reactions_of(store.transcript(posted.session_id)[0]) == {}
    custom = {**DISCORD_REACTION, "emoji": {"id": "99", "name": "shipit"}}
    assert discord.convert_reaction(custom).added == ("<:shipit:99>",)
    own = {**DISCORD_REACTION, "user_id": "1180000000000000555"}
    assert discord.convert_reaction(own, bot_user_id=1180000000000000555) is None


FEISHU_REACTION = {
    "schema": "2.0",
    "header": {
        "event_id": "9e3702a84e847582be8db7fb73283c02",
        "event_type": "im.message.reaction.created_v1",
        "create_time": "1778547640000",
        "token": "rvaYgkR3Vx8X1",
        "app_id": "cli_9f5343c580712544",
        "tenant_key": "2ca1d211f64f6438",
    },
    "event": {
        "message_id": "om_thread_reply_1",
        "reaction_type": {"emoji_type": "THUMBSUP"},
        "operator_type": "user",
        "user_id": {"open_id": "ou_user2", "union_id": "on_union2", "user_id": "u_2"},
        "action_time": "1778547640000",
    },
}


def lark_reaction(data):
    """The payload as lark-oapi's reaction event of its type."""
    lark = pytest.importorskip("lark_oapi", reason=FRAMEWORKS_REASON)
    im = pytest.importorskip("lark_oapi.api.im.v1", reason=FRAMEWORKS_REASON)
    created = data["header"]["event_type"].endswith("created_v1")
    model = im.P2ImMessageReactionCreatedV1 if created else im.P2ImMessageReactionDeletedV1
    return lark.JSON.unmarshal(json.dumps(data), model)


def test_a_feishu_reaction_in_a_thread_annotates_the_message(store):
    """The chat the event lacks comes from the caller; the thread's message gets the reaction."""
    posted = apply(store, feishu.convert(load("feishu_group_thread"), bot_open_id="ou_bot"))
    chat = {"chat_id": "oc_xxx", "chat_type": "group", "thread_id": "omt_1"}
    for built in (FEISHU_REACTION, lark_reaction(FEISHU_REACTION)):
        applied = apply(store, feishu.convert_reaction(built, **chat))
        assert applied.message is not None
        assert applied.message.id == posted.message.id
    assert reactions_of(store.transcript(posted.session_id)[0]) == {"THUMBSUP": ("on_union2",)}
    deleted = copy.deepcopy(FEISHU_REACTION)
    deleted["header"]["event_type"] = "im.message.reaction.deleted_v1"
    apply(store, feishu.convert_reaction(lark_reaction(deleted), **chat))
    assert reactions_of(store.transcript(posted.session_id)[0]) == {}
    bot = copy.deepcopy(FEISHU_REACTION)
    bot["event"]["operator_type"] = "app"
    assert feishu.convert_reaction(bot, **chat) is None


def test_the_window_shows_reactions_compactly_on_their_message(store):
    """``show_reactions`` puts a short line on the reacted message; no message is added."""
    reply = bots_reply(store, BOB, f"{OPS['id']}:55")
    apply(store, telegram.convert(reaction_update([], ["👍"])))
    messages = store.messages(reply.session_id)
    plain = context_window(messages)
    shown = context_window(messages, show_reactions=True)
    assert [m.content for m in plain.messages] == ["deployed to staging"]
    assert [m.content for m in shown.messages] == ["deployed to staging [reactions: 👍]"]
    assert shown.tokens > plain.tokens
