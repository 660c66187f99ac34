"""A Discord gateway on discord.py, run offline on recorded gateway events.

Recorded gateway dispatches (``GUILD_CREATE``, ``MESSAGE_CREATE``, ``MESSAGE_UPDATE``,
``MESSAGE_DELETE``) go through discord.py's own parsers, the table its websocket hands every
dispatch to, so the client's cache, ``Message`` objects and ``on_message`` /
``on_message_edit`` / ``on_message_delete`` events are the library's own. No login happens:
the client is never started, and replies are printed instead of sent. (The parser table,
``client._connection.parsers``, is discord.py's internal one: there is no public way to feed
it offline.) Each listener converts its message with ``hermes_sessions.adapters.discord`` and
performs it with ``await aapply`` on an ``AsyncSessionStore``, so nothing blocks the client's
event loop. Run it with ``python examples/gateway_discord.py``; it works in a temporary
directory.
"""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

import discord

from hermes_sessions import AsyncSessionStore
from hermes_sessions.adapters import InboundEvent, aapply
from hermes_sessions.adapters import discord as adapter

BOT_ID = 1180000000000000555
GUILD, GENERAL, FORUM, POST = (
    "1180000000000000999",
    "1180000000000000100",
    "1180000000000000200",
    "1180000000000000300",
)
NELLY = {
    "id": "80351110224678912",
    "username": "nelly",
    "discriminator": "0",
    "global_name": "Nelly",
    "avatar": None,
}
SAM = {
    "id": "80351110224678913",
    "username": "sam",
    "discriminator": "0",
    "global_name": "Sam",
    "avatar": None,
}


def message(
    number: int, channel: str, author: dict[str, Any], content: str, **more: Any
) -> dict[str, Any]:
    """A recorded ``MESSAGE_CREATE`` payload in the guild."""
    return {
        "id": str(1180000000000001000 + number),
        "channel_id": channel,
        "guild_id": GUILD,
        "author": author,
        "content": content,
        "timestamp": "2026-05-12T01:00:00+00:00",
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": False,
        "type": 0,
        **more,
    }


GUILD_CREATE = {
    "id": GUILD,
    "name": "Hermes",
    "member_count": 2,
    "roles": [],
    "emojis": [],
    "features": [],
    "members": [],
    "channels": [
        {"id": GENERAL, "type": 0, "name": "general", "position": 0, "permission_overwrites": []},
        {"id": FORUM, "type": 15, "name": "help", "position": 1, "permission_overwrites": []},
    ],
    "threads": [
        {
            "id": POST,
            "type": 11,
            "name": "crash on start",
            "parent_id": FORUM,
            "owner_id": NELLY["id"],
            "guild_id": GUILD,
            "message_count": 2,
            "member_count": 2,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": "2026-05-12T01:00:00+00:00",
            },
        }
    ],
}
FIRST = message(1, GENERAL, NELLY, f"<@{BOT_ID}> is the build green?")
EVENTS = [
    ("GUILD_CREATE", GUILD_CREATE),
    ("MESSAGE_CREATE", FIRST),
    ("MESSAGE_CREATE", message(2, POST, NELLY, "crash on start, see the trace")),
    ("MESSAGE_CREATE", message(3, POST, SAM, "same here since 2.1")),
    (
        "MESSAGE_UPDATE",
        {
            **FIRST,
            "content": f"<@{BOT_ID}> is the deploy green?",
            "edited_timestamp": "2026-05-12T01:01:00+00:00",
        },
    ),
    ("MESSAGE_DELETE", {"id": FIRST["id"], "channel_id": GENERAL, "guild_id": GUILD}),
]


async def main() -> None:
    """Feed the recorded dispatches to the client's parsers and show what the store kept."""
    with tempfile.TemporaryDirectory() as home:
        async with await AsyncSessionStore.open(home) as store:
            await run(store)


async def run(store: AsyncSessionStore) -> None:
    """Let discord.py parse every dispatch; its listeners store what each one means."""
    client = discord.Client(intents=discord.Intents.none())

    async def perform(event: InboundEvent | None) -> None:
        if event is None:
            return
        applied = await aapply(store, event)
        print(f"{type(event).__name__:<10} {store.key_for(event.source)}")
        if applied.lookup is not None and applied.lookup.created:
            print("  -> would reply: hello, this is a new conversation")

    @client.event
    async def on_message(msg: discord.Message) -> None:
        await perform(adapter.convert(msg, bot_user_id=BOT_ID))

    @client.event
    async def on_message_edit(_before: discord.Message, after: discord.Message) -> None:
        await perform(adapter.convert(after, bot_user_id=BOT_ID))

    @client.event
    async def on_message_delete(msg: discord.Message) -> None:
        await perform(adapter.convert(msg, deleted=True, bot_user_id=BOT_ID))

    await client._async_setup_hook()  # noqa: SLF001  # the loop a login would set up
    parsers = client._connection.parsers  # noqa: SLF001  # what the websocket feeds
    for name, data in EVENTS:
        before = asyncio.all_tasks()
        parsers[name](data)
        await asyncio.gather(*(asyncio.all_tasks() - before))  # the listeners discord.py scheduled

    post = await store.entry(f"agent:main:discord:thread:{FORUM}:thread:{POST}")
    transcript = await store.transcript(post.session_id)
    print("the forum post, shared:", [(m.sender_name, m.content) for m in transcript])
    print("search 'deploy' after the deletion:", await store.search("deploy"))
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
