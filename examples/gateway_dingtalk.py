"""A DingTalk gateway on dingtalk-stream, run offline on recorded Stream callbacks.

Recorded chatbot callbacks go to a ``dingtalk_stream.ChatbotHandler`` through its own entry
point, ``raw_process(CallbackMessage)``, which the Stream client calls for every frame it
receives, and the acknowledgement is printed. No client is connected, so nothing touches the
network. The handler converts the callback with ``hermes_sessions.adapters.dingtalk`` and
performs it with ``await aapply`` on an ``AsyncSessionStore``, so nothing blocks the Stream
client's event loop. Run it with ``python examples/gateway_dingtalk.py``; it works in a
temporary directory.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from typing import Any

import dingtalk_stream
from dingtalk_stream import AckMessage, CallbackMessage

from hermes_sessions import AsyncSessionStore
from hermes_sessions.adapters import aapply, dingtalk


def frame(
    number: int, conversation: str, kind: str, staff: str, nick: str, **content: Any
) -> CallbackMessage:
    """A recorded Stream frame carrying one chatbot message."""
    data = {
        "conversationId": conversation,
        "conversationType": kind,
        "msgId": f"msg{number}",
        "senderStaffId": staff,
        "senderId": f"$:LWCP_v1:${staff}",
        "senderNick": nick,
        "senderCorpId": "dingcorp",
        "isInAtList": kind == "2",
        "createAt": 1778547600000 + number,
        **content,
    }
    return CallbackMessage.from_dict(
        {
            "specVersion": "1.0",
            "type": "CALLBACK",
            "headers": {
                "topic": dingtalk_stream.ChatbotMessage.TOPIC,
                "messageId": f"frame{number}",
            },
            "data": json.dumps(data, ensure_ascii=False),
        }
    )


FRAMES = [
    frame(1, "cid_group", "2", "zhang", "张伟", msgtype="text", text={"content": " 今天谁值班？"}),
    frame(2, "cid_group", "2", "li", "李娜", msgtype="text", text={"content": " 我值班"}),
    frame(
        3, "cid_zhang", "1", "zhang", "张伟", msgtype="picture", content={"downloadCode": "pic1"}
    ),
]


class SessionsHandler(dingtalk_stream.ChatbotHandler):
    """Stores every chatbot message it is given."""

    def __init__(self, store: AsyncSessionStore) -> None:
        super().__init__()
        self.store = store

    async def process(self, callback: CallbackMessage) -> tuple[int, str]:
        """Convert and store one message; acknowledge it."""
        event = dingtalk.convert(callback)
        if event is not None:
            applied = await aapply(self.store, event)
            print(f"{type(event).__name__:<10} {self.store.key_for(event.source)}")
            if applied.lookup is not None and applied.lookup.created:
                print("  -> would reply: 你好，这是一个新的对话")
        return AckMessage.STATUS_OK, "OK"


async def main() -> None:
    """Hand the recorded frames to the handler and show what the store kept."""
    with tempfile.TemporaryDirectory() as home:
        async with await AsyncSessionStore.open(home) as store:
            handler = SessionsHandler(store)
            for callback in FRAMES:
                ack = await handler.raw_process(callback)
                print(f"  ack {ack.code} for {ack.headers.message_id}")
            for key in (
                "agent:main:dingtalk:group:cid_group:zhang",
                "agent:main:dingtalk:dm:cid_zhang",
            ):
                session = (await store.entry(key)).session_id
                print(key, [m.content for m in await store.transcript(session)])


if __name__ == "__main__":
    asyncio.run(main())
