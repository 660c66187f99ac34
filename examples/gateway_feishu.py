"""A Feishu / Lark gateway on lark-oapi, run offline on recorded event callbacks.

Recorded ``im.message.receive_v1`` callbacks go through lark-oapi's own dispatch,
``EventDispatcherHandler.do(RawRequest)``, the call its web-framework adapters make for every
callback (no encryption key is set, so no signature is checked). The registered handler
converts lark-oapi's ``P2ImMessageReceiveV1`` with ``hermes_sessions.adapters.feishu`` and
performs it with ``apply``: two members of a group thread share one conversation, a DM is its
own, and the bot's mention is stripped. Run it with ``python examples/gateway_feishu.py``; it
works in a temporary directory.
"""

from __future__ import annotations

import json
import tempfile
from http import HTTPStatus
from typing import TYPE_CHECKING

import lark_oapi as lark

from hermes_sessions import SessionStore
from hermes_sessions.adapters import apply, feishu

if TYPE_CHECKING:
    from lark_oapi.api.im.v1 import P2ImMessageReceiveV1

BOT_OPEN_ID = "ou_bot"
BOT_MENTION = {"key": "@_user_1", "id": {"open_id": BOT_OPEN_ID}, "name": "Hermes"}


def callback(
    number: int, sender: str, chat: str, chat_type: str, text: str, **more: object
) -> bytes:
    """A recorded event callback body (schema 2.0) for a text message."""
    message = {
        "message_id": f"om_{number}",
        "chat_id": chat,
        "chat_type": chat_type,
        "message_type": "text",
        "content": json.dumps({"text": text}, ensure_ascii=False),
        **more,
    }
    body = {
        "schema": "2.0",
        "header": {
            "event_id": f"ev_{number}",
            "event_type": "im.message.receive_v1",
            "tenant_key": "tenant_1",
            "app_id": "cli_offline",
        },
        "event": {
            "sender": {"sender_id": {"open_id": f"ou_{sender}", "union_id": f"on_{sender}"}},
            "message": message,
        },
    }
    return json.dumps(body, ensure_ascii=False).encode()


THREAD = {"thread_id": "omt_1", "root_id": "om_1"}
CALLBACKS = [
    callback(1, "lin", "oc_group", "group", "@_user_1 部署回滚了吗？", mentions=[BOT_MENTION]),
    callback(2, "wang", "oc_group", "group", "我也想知道", parent_id="om_1", **THREAD),
    callback(
        3, "lin", "oc_group", "group", "@_user_1 回滚到哪个版本", mentions=[BOT_MENTION], **THREAD
    ),
    callback(4, "lin", "oc_dm_lin", "p2p", "帮我总结今天的发布"),
]


def main() -> None:
    """Dispatch the recorded callbacks and show what the store kept."""
    with tempfile.TemporaryDirectory() as home, SessionStore.open(home) as store:

        def on_message(data: P2ImMessageReceiveV1) -> None:
            event = feishu.convert(data, bot_open_id=BOT_OPEN_ID)
            if event is None:
                return
            applied = apply(store, event)
            print(f"{type(event).__name__:<10} {store.key_for(event.source)}")
            if applied.lookup is not None and applied.lookup.created:
                print("  -> would reply: 你好，这是一个新的对话")

        handler = (
            lark.EventDispatcherHandler.builder("", "")
            .register_p2_im_message_receive_v1(on_message)
            .build()
        )
        for body in CALLBACKS:
            request = lark.RawRequest()
            request.uri = "/webhook/event"
            request.headers = {"Content-Type": "application/json"}
            request.body = body
            response = handler.do(request)
            assert response.status_code == HTTPStatus.OK, response.content  # noqa: S101  # the example's check

        thread = store.entry("agent:main:feishu:group:oc_group:thread:omt_1")
        print("the group thread, shared:")
        for message in store.transcript(thread.session_id):
            reply_to = message.extra.get("reply_to")
            print(f"  {message.sender_id}: {message.content}  (reply to {reply_to})")
        print(
            "search '回滚':",
            sorted(hit.message.platform_message_id or "" for hit in store.search("回滚")),
        )


if __name__ == "__main__":
    main()
