"""A Telegram gateway on aiogram, run offline on recorded updates.

Recorded updates go through aiogram's own dispatch, ``Dispatcher.feed_update``, as polling or a
webhook would deliver them, and nothing is sent (the handlers print their reply instead of
calling ``message.answer``). Each handler converts the aiogram ``Message`` with
``hermes_sessions.adapters.telegram`` and performs it with ``await aapply`` on an
``AsyncSessionStore`` (nothing blocks aiogram's event loop): a new message is appended, an
edited one re-indexed. Run it with ``python examples/gateway_telegram_aiogram.py``;
it works in a temporary directory.
"""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

from aiogram import Bot, Dispatcher, Router
from aiogram.types import Message, Update

from hermes_sessions import AsyncSessionStore
from hermes_sessions.adapters import aapply, telegram

ALICE = {"id": 42, "is_bot": False, "first_name": "Alice"}
DM = {"id": 42, "first_name": "Alice", "type": "private"}
GROUP = {"id": -1001234567890, "title": "Ops", "type": "supergroup"}


def message(number: int, chat: dict[str, Any], text: str, **more: Any) -> dict[str, Any]:
    """A Bot API message from Alice."""
    return {
        "message_id": number,
        "date": 1778547600,
        "chat": chat,
        "from": ALICE,
        "text": text,
    } | more


UPDATES = [
    {"update_id": 1, "message": message(7, DM, "how do I rotate the staging keys?")},
    {"update_id": 2, "message": message(55, GROUP, "@hermes_bot is the freeze on?")},
    {
        "update_id": 3,
        "edited_message": message(7, DM, "how do I rotate the prod keys?", edit_date=1778547700),
    },
]


async def main() -> None:
    """Feed the recorded updates to the dispatcher and show what the store kept."""
    with tempfile.TemporaryDirectory() as home:
        async with await AsyncSessionStore.open(home) as store:
            await run(store)


async def run(store: AsyncSessionStore) -> None:
    """Dispatch every update; the handler stores what it means."""
    router = Router()

    @router.message()
    @router.edited_message()
    async def on_message(msg: Message) -> None:
        event = telegram.convert(msg, bot_username="hermes_bot")
        if event is None:
            return
        applied = await aapply(store, event)
        print(f"{type(event).__name__:<10} {store.key_for(event.source)}")
        if applied.lookup is not None and applied.lookup.created:
            print("  -> would answer: hello, this is a new conversation")

    dispatcher = Dispatcher()
    dispatcher.include_router(router)
    bot = Bot(token="7000001:offline")  # noqa: S106  # a placeholder; nothing is sent
    try:
        for data in UPDATES:
            await dispatcher.feed_update(bot, Update.model_validate(data, context={"bot": bot}))
    finally:
        await bot.session.close()

    dm = await store.entry("agent:main:telegram:dm:42")
    print("DM transcript:", [m.content for m in await store.transcript(dm.session_id)])
    group = await store.entry("agent:main:telegram:group:-1001234567890:42")
    print(
        "group lane (the bot mention stripped):",
        [m.content for m in await store.transcript(group.session_id)],
    )
    prod = await store.search("prod")
    print("search 'prod':", [hit.message.platform_message_id for hit in prod])
    staging = await store.search("staging")
    print("search 'staging':", [hit.message.platform_message_id for hit in staging])


if __name__ == "__main__":
    asyncio.run(main())
