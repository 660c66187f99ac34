"""Interactions (buttons, card actions) name the conversation of the user who acted."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest

from extras import FRAMEWORKS_REASON
from hermes_sessions import AdapterPayloadError, build_session_key
from hermes_sessions.adapters import discord, feishu, slack, telegram

PAYLOADS = Path(__file__).parent / "payloads" / "interactions"
BOB_LANE = "agent:main:telegram:group:-1001234567890:43"


def load(name):
    """An interaction payload from ``payloads/interactions/``."""
    return json.loads((PAYLOADS / f"{name}.json").read_text(encoding="utf-8"))


# -- Telegram --------------------------------------------------------------------------------------


def ptb_update(name):
    """The payload as python-telegram-bot's ``Update``."""
    module = pytest.importorskip("telegram", reason=FRAMEWORKS_REASON)
    return module.Update.de_json(load(name), None)


def aiogram_update(name):
    """The payload as aiogram's ``Update``."""
    types = pytest.importorskip("aiogram.types", reason=FRAMEWORKS_REASON)
    return types.Update.model_validate(load(name))


TELEGRAM = {"payload": load, "python-telegram-bot": ptb_update, "aiogram": aiogram_update}


@pytest.fixture(params=sorted(TELEGRAM))
def update(request):
    """Build an update as a dict, a PTB ``Update`` or an aiogram ``Update``."""
    return TELEGRAM[request.param]


def test_a_callback_query_in_a_group_is_the_pressers_lane(update):
    """The button is on the bot's message, but the conversation is the presser's own lane."""
    source = telegram.interaction_source(update("telegram_callback_query"))
    assert source is not None
    assert build_session_key(source) == BOB_LANE
    assert (source.user_id, source.user_name) == ("43", "Bob")
    bots_lane = telegram.source_of(load("telegram_callback_query")["callback_query"]["message"])
    assert build_session_key(bots_lane) != BOB_LANE  # what source_of(cq.message) would give


def test_a_callback_query_in_a_forum_topic_keeps_the_topic(update):
    """A button pressed in a topic belongs to the topic's conversation."""
    source = telegram.interaction_source(update("telegram_callback_query_topic"))
    assert source is not None
    assert build_session_key(source) == "agent:main:telegram:group:-1002285219667:thread:17585"


def test_the_callback_query_itself_is_read_too():
    """A ``CallbackQuery`` (not its Update) gives the same source."""
    query = load("telegram_callback_query")["callback_query"]
    assert telegram.interaction_source(query) == telegram.interaction_source(
        load("telegram_callback_query")
    )


def test_an_inline_mode_button_names_no_conversation(update):
    """A button on an inline-mode message has no chat: ``None``."""
    assert telegram.interaction_source(update("telegram_callback_query_inline")) is None


def test_a_callback_query_without_a_message_or_presser_is_refused():
    """Neither a message nor an inline id, or no ``from``: refused, never guessed."""
    payload = load("telegram_callback_query")
    del payload["callback_query"]["message"]
    with pytest.raises(AdapterPayloadError, match=r"callback_query\.message"):
        telegram.interaction_source(payload)
    payload = load("telegram_callback_query")
    del payload["callback_query"]["from"]
    with pytest.raises(AdapterPayloadError, match=r"callback_query\.from"):
        telegram.interaction_source(payload)


def test_other_updates_are_no_interaction():
    """An Update that is not a callback query gives ``None``."""
    assert telegram.interaction_source({"update_id": 1, "poll": {"id": "p"}}) is None


# -- Slack -----------------------------------------------------------------------------------------


def through_bolt(body):
    """What a slack-bolt ``@app.action`` listener computes for ``body``, dispatched offline."""
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

    @app.action("approve")
    def on_approve(ack, body):
        ack()
        seen.append(slack.interaction_source(body))

    request = slack_bolt.BoltRequest(
        body="payload=" + urllib.parse.quote(json.dumps(body)),
        headers={"content-type": ["application/x-www-form-urlencoded"]},
    )
    assert app.dispatch(request).status == 200
    return seen


def test_a_block_action_in_a_channel_is_the_clickers_lane():
    """A button on the bot's message in a channel is the clicker's own channel lane."""
    body = load("slack_block_actions")
    (source,) = through_bolt(body)
    assert source == slack.interaction_source(body)
    assert build_session_key(source) == "agent:main:slack:channel:C0LAN2Q65:U0BOB"
    assert (source.user_name, source.scope_id) == ("bob", "T0001")


def test_a_block_action_in_a_thread_is_the_threads_conversation():
    """A button on a reply in a thread belongs to the thread (a root stays in the channel)."""
    body = load("slack_block_actions")
    body["container"]["thread_ts"] = "1778548000.000100"
    body["message"]["thread_ts"] = "1778548000.000100"
    source = slack.interaction_source(body)
    assert source is not None
    assert source.thread_id == "1778548000.000100"
    body["container"]["thread_ts"] = body["container"]["message_ts"]
    body["message"]["thread_ts"] = body["message"]["ts"]
    root = slack.interaction_source(body)
    assert root is not None
    assert root.thread_id is None


def test_a_modal_or_app_home_action_names_no_conversation():
    """An action without a channel (a modal, the App Home) gives ``None``."""
    body = load("slack_block_actions")
    del body["channel"]
    body["container"] = {"type": "view", "view_id": "V1"}
    assert slack.interaction_source(body) is None


# -- Discord ---------------------------------------------------------------------------------------

SAM = {
    "id": "80351110224678913",
    "username": "sam",
    "global_name": "Sam",
    "discriminator": "0",
    "avatar": None,
}
TEXT = {
    "id": "1180000000000000100",
    "type": 0,
    "name": "general",
    "guild_id": "1180000000000000999",
    "position": 0,
    "permission_overwrites": [],
    "nsfw": False,
    "permissions": "0",
}
THREAD = {
    "id": "1180000000000000300",
    "type": 11,
    "name": "crash on start",
    "parent_id": "1180000000000000200",
    "guild_id": "1180000000000000999",
    "owner_id": "80351110224678912",
    "message_count": 1,
    "member_count": 1,
    "thread_metadata": {
        "archived": False,
        "auto_archive_duration": 1440,
        "archive_timestamp": "2026-05-12T01:00:00+00:00",
    },
    "permissions": "0",
}


def interaction(channel, *, guild=True):
    """An ``INTERACTION_CREATE`` payload: Sam pressed a button on the bot's message."""
    data = {
        "id": "1190000000000000001",
        "application_id": "1180000000000000555",
        "type": 3,
        "token": "offline",
        "version": 1,
        "channel_id": channel["id"],
        "channel": channel,
        "data": {"custom_id": "approve", "component_type": 2},
        "attachment_size_limit": 8388608,
        "app_permissions": "0",
        "locale": "en-US",
        "entitlements": [],
        "authorizing_integration_owners": {},
        "context": 0 if guild else 1,
    }
    if guild:
        member = {
            "user": SAM,
            "roles": [],
            "joined_at": "2026-01-01T00:00:00+00:00",
            "deaf": False,
            "mute": False,
            "permissions": "0",
            "flags": 0,
        }
        return {**data, "guild_id": "1180000000000000999", "member": member}
    return {**data, "user": SAM}


def discord_interaction(data):
    """The payload as discord.py's own ``Interaction``."""
    module = pytest.importorskip("discord", reason=FRAMEWORKS_REASON)
    state = module.Client(intents=module.Intents.none())._connection
    bot = {"id": "1180000000000000555", "username": "hermes", "discriminator": "0", "bot": True}
    state.user = module.ClientUser(state=state, data={**bot, "avatar": None})
    return module.Interaction(data=data, state=state)


DISCORD = {"payload": lambda data: data, "discord.py": discord_interaction}


@pytest.fixture(params=sorted(DISCORD))
def build(request):
    """Build an interaction as its payload or discord.py's ``Interaction``."""
    return DISCORD[request.param]


def test_a_button_in_a_guild_channel_is_the_pressers_lane(build):
    """Sam's press in #general is Sam's lane there, not the bot's."""
    source = discord.interaction_source(build(interaction(TEXT)))
    assert source is not None
    assert build_session_key(source) == "agent:main:discord:group:1180000000000000100:" + SAM["id"]
    assert (source.user_name, source.scope_id) == ("Sam", "1180000000000000999")


def test_a_button_in_a_thread_is_the_threads_conversation(build):
    """A press in a thread belongs to the thread, under its parent channel."""
    source = discord.interaction_source(build(interaction(THREAD)))
    assert source is not None
    expected = "agent:main:discord:thread:1180000000000000200:thread:1180000000000000300"
    assert build_session_key(source) == expected


def test_a_button_in_a_dm_is_the_dm(build):
    """A press in a DM is that DM's conversation."""
    dm = {"id": "1180000000000000400", "type": 1, "recipients": [SAM]}
    source = discord.interaction_source(build(interaction(dm, guild=False)))
    assert source is not None
    assert build_session_key(source) == "agent:main:discord:dm:1180000000000000400"


def test_an_interaction_without_its_user_is_refused():
    """No member and no user: refused."""
    data = interaction(TEXT)
    del data["member"]
    with pytest.raises(AdapterPayloadError, match="user is missing"):
        discord.interaction_source(data)


# -- Feishu ----------------------------------------------------------------------------------------


def lark_trigger(name):
    """The payload as lark-oapi's ``P2CardActionTrigger``."""
    lark = pytest.importorskip("lark_oapi", reason=FRAMEWORKS_REASON)
    model = pytest.importorskip(
        "lark_oapi.event.callback.model.p2_card_action_trigger", reason=FRAMEWORKS_REASON
    )
    raw = (PAYLOADS / f"{name}.json").read_text(encoding="utf-8")
    return lark.JSON.unmarshal(raw, model.P2CardActionTrigger)


FEISHU = {"payload": load, "lark-oapi": lark_trigger}


@pytest.fixture(params=sorted(FEISHU))
def trigger(request):
    """Build a card action as JSON or lark-oapi's ``P2CardActionTrigger``."""
    return FEISHU[request.param]


def test_a_card_action_in_a_group_is_the_operators_lane(trigger):
    """The operator's own lane in the card's chat, by their union_id."""
    source = feishu.interaction_source(trigger("feishu_card_action"), chat_type="group")
    assert source is not None
    assert build_session_key(source) == "agent:main:feishu:group:oc_xxx:on_union2"


def test_a_card_action_in_a_thread_or_a_p2p_chat(trigger):
    """The chat type and the thread, which the callback lacks, come from the caller."""
    event = trigger("feishu_card_action")
    threaded = feishu.interaction_source(event, chat_type="group", thread_id="omt_1")
    assert threaded is not None
    assert build_session_key(threaded) == "agent:main:feishu:group:oc_xxx:thread:omt_1"
    p2p = feishu.interaction_source(event, chat_type="p2p")
    assert p2p is not None
    assert build_session_key(p2p) == "agent:main:feishu:dm:oc_xxx"


def test_a_card_action_without_its_operator_is_refused():
    """No operator: refused."""
    payload = load("feishu_card_action")
    del payload["event"]["operator"]
    with pytest.raises(AdapterPayloadError, match=r"event\.operator"):
        feishu.interaction_source(payload, chat_type="group")
