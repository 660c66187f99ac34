"""A Telegram gateway on python-telegram-bot, run offline on recorded updates.

The bot talks to the Bot API through a fake transport (``OfflineRequest``): ``getMe`` answers
with a recorded bot and ``sendMessage`` prints the reply instead of sending it. Recorded
updates go through PTB's own dispatch, ``Application.process_update``, exactly as polling or a
webhook would deliver them; each handler converts its update with
``hermes_sessions.adapters.telegram`` and performs it with ``await aapply`` on an
``AsyncSessionStore``, so the store's commits never block PTB's event loop. Run it with
``python examples/gateway_telegram_ptb.py``; it works in a temporary directory.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from typing import Any

from telegram import Update
from telegram.ext import Application, ContextTypes, MessageHandler, filters
from telegram.request import BaseRequest, RequestData

from hermes_sessions import AsyncSessionStore
from hermes_sessions.adapters import aapply, telegram

BOT = {"id": 7000001, "is_bot": True, "first_name": "Hermes", "username": "hermes_bot"}
ALICE = {"id": 42, "is_bot": False, "first_name": "Alice"}
BOB = {"id": 43, "is_bot": False, "first_name": "Bob"}
FORUM = {"id": -1002285219667, "title": "Hermes dev", "type": "supergroup", "is_forum": True}
DM = {"id": 42, "first_name": "Alice", "type": "private"}


def message(
    number: int, chat: dict[str, Any], sender: dict[str, Any], text: str, **more: Any
) -> dict[str, Any]:
    """A Bot API message as Telegram sends it."""
    return {
        "message_id": number,
        "date": 1778547600 + number,
        "chat": chat,
        "from": sender,
        "text": text,
        **more,
    }


TOPIC = {"message_thread_id": 17585, "is_topic_message": True}
UPDATES = [
    {"update_id": 1, "message": message(7, DM, ALICE, "where did we leave the deploy?")},
    {"update_id": 2, "message": message(901, FORUM, ALICE, "@hermes_bot release notes?", **TOPIC)},
    {"update_id": 3, "message": message(902, FORUM, BOB, "and the changelog", **TOPIC)},
    {"update_id": 4, "edited_message": message(7, DM, ALICE, "where did we leave the rollback?")},
    {"update_id": 1, "message": message(7, DM, ALICE, "where did we leave the deploy?")},
]


class OfflineRequest(BaseRequest):
    """A Bot API transport that never touches the network."""

    async def initialize(self) -> None:
        """Nothing to open."""

    async def shutdown(self) -> None:
        """Nothing to close."""

    @property
    def read_timeout(self) -> float | None:
        """No network, no timeout."""
        return None

    async def do_request(
        self,
        url: str,
        method: str,  # noqa: ARG002  # PTB's signature; every call is a POST
        request_data: RequestData | None = None,
        **_: Any,
    ) -> tuple[int, bytes]:
        """Answer ``getMe`` with the recorded bot; print what would be sent."""
        endpoint = url.rsplit("/", 1)[-1]
        if endpoint == "getMe":
            return 200, json.dumps({"ok": True, "result": BOT}).encode()
        parameters = request_data.parameters if request_data else {}
        print(f"  -> {endpoint}: {parameters.get('text')}")
        sent = message(1000, {"id": parameters.get("chat_id"), "type": "private"}, BOT, "ok")
        return 200, json.dumps({"ok": True, "result": sent}).encode()


async def main() -> None:
    """Run the recorded updates through the application and show what the store kept."""
    with tempfile.TemporaryDirectory() as home:
        async with await AsyncSessionStore.open(home) as store:
            await run(store)


async def run(store: AsyncSessionStore) -> None:
    """Feed the updates to a PTB application whose handler stores each one."""

    async def on_message(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        event = telegram.convert(update, bot_username=context.bot.username)
        if event is None:
            return
        applied = await aapply(store, event)
        key = store.key_for(event.source)
        print(f"{type(event).__name__:<10} {key}  (session {applied.session_id})")
        if update.message is not None and applied.lookup and applied.lookup.created:
            await update.message.reply_text("hello, this is a new conversation")

    request = OfflineRequest()
    application = (
        Application.builder().token("7000001:offline").request(request).updater(None).build()
    )
    application.add_handler(MessageHandler(filters.ALL, on_message))
    async with application:
        for data in UPDATES:
            await application.process_update(Update.de_json(data, application.bot))

    lane = await store.entry("agent:main:telegram:group:-1002285219667:thread:17585")
    print("forum topic, shared by both members:")
    for stored in await store.transcript(lane.session_id):
        print(f"  {stored.sender_name}: {stored.content}")
    dm = await store.entry("agent:main:telegram:dm:42")
    tail = await store.tail(dm.session_id, 5)
    print("DM after the edit and a redelivery:", [m.content for m in tail])
    rollback = await store.search("rollback")
    print("search 'rollback':", [hit.message.platform_message_id for hit in rollback])
    deploy = await store.search("deploy")
    print("search 'deploy':", [hit.message.platform_message_id for hit in deploy])


if __name__ == "__main__":
    asyncio.run(main())
