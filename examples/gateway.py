"""An asyncio chat gateway built from the host helpers, with a fake transport and a fake LLM.

One agent is cached per session (``SessionCache``); every turn tells the model where it is
talking (``session_context_prompt``), sends only the newest whole turns
(``context_window``) converted to the model's wire format (``formats``), and after an automatic
reset tells the user and the model what happened (``reset_notice``) — but never for a webhook
redelivered a day late, which the turn recognises before the reset policy could act. A frozen
clock makes a day pass in an instant. Run it with ``python examples/gateway.py``; it keeps
nothing on disk.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hermes_sessions import AsyncSessionStore, FrozenClock, Message, SessionSource, SessionStore
from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.formats import to_anthropic, to_openai_chat
from hermes_sessions.host import (
    SessionCache,
    context_window,
    is_shared_session,
    prefix_sender,
    reset_notice,
    session_context_prompt,
)
from hermes_sessions.policy import ResetPolicies, ResetPolicy

CLOCK = FrozenClock(datetime(2026, 5, 1, 9, 0, tzinfo=UTC))
RESETS = ResetPolicies(ResetPolicy(mode="idle", idle_minutes=1440))
WINDOW_TOKENS = 400


class FakeTransport:
    """Stands in for a platform adapter: it only prints what the bot sends."""

    async def send(self, source: SessionSource, text: str) -> None:
        """Deliver ``text`` to the chat of ``source``."""
        where = source.chat_name or source.chat_id
        print(f"  -> [{source.platform}:{where}] {text}")


class FakeLLM:
    """A scripted model speaking the Chat Completions format: it calls a tool for weather."""

    async def complete(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """Answer the conversation ``messages`` with one assistant message."""
        last = messages[-1]
        if last["role"] == "tool":
            return {"role": "assistant", "content": f"It is {last['content']} right now."}
        question = str(last["content"])
        if "weather" in question:
            function = {"name": "weather", "arguments": json.dumps({"city": "Hangzhou"})}
            call = {"id": f"call_{len(messages)}", "type": "function", "function": function}
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [call],
            }
        return {"role": "assistant", "content": f"({len(messages)} messages in context) Noted."}


class Agent:
    """Per-session state a real gateway keeps warm: here just the system prompt."""

    def __init__(self, session_id: str, system_prompt: str) -> None:
        self.session_id = session_id
        self.system_prompt = system_prompt

    async def aclose(self) -> None:
        """Release what the agent holds (memory providers, sandboxes)."""
        print(f"  (closed agent for session {self.session_id})")


async def run_tool(call: dict[str, Any]) -> str:
    """Run the one tool the fake model knows."""
    arguments = json.loads(call["function"]["arguments"])
    return f"sunny, 24°C in {arguments['city']}"


class Gateway:
    """Receives messages, keeps sessions, and talks to the model."""

    def __init__(self, store: AsyncSessionStore, llm: FakeLLM, transport: FakeTransport) -> None:
        self.store, self.llm, self.transport = store, llm, transport
        self.agents: SessionCache[Agent] = SessionCache(
            max_size=100, idle_ttl=timedelta(hours=6), on_evict=Agent.aclose, clock=CLOCK
        )
        store.on_rotate(self.agents.on_rotate)

    async def handle(self, source: SessionSource, text: str, message_id: str) -> None:
        """One inbound message, start to finish (``message_id``: the platform's, qualified)."""
        print(f"<- {source.user_name}: {text}")
        async with self.store.turn(source, platform_message_id=message_id) as lookup:
            if lookup.redelivered is not None:  # checked before the idle policy could reset
                print("  (a redelivery: answered already, nothing to do)")
                return
            session_id = lookup.session_id
            if lookup.reset is not None:
                policy = RESETS.for_source(source.platform, source.chat_type)
                notice = reset_notice(lookup.reset, policy, platform=source.platform)
                if notice.user_text is not None:
                    await self.transport.send(source, notice.user_text)
                note = Message(role="system", content=notice.system_note)
                await self.store.append(session_id, note, touch=False)

            async def build() -> Agent:
                prompt = session_context_prompt(source, lookup.entry, key_policy=self.keys)
                return Agent(session_id, prompt)

            agent = await self.agents.aget_or_create(lookup, build)
            if is_shared_session(source, self.keys):
                text = prefix_sender(text, source)
            user = Message(
                role="user",
                content=text,
                sender_id=source.participant,
                platform_message_id=message_id,
            )
            await self.store.append(session_id, user)
            await self.reply(source, agent)

    @property
    def keys(self) -> Any:
        """The store's key policy."""
        return self.store.store.keys

    async def reply(self, source: SessionSource, agent: Agent) -> None:
        """Call the model until it answers in text, running its tool calls."""
        while True:
            recent = await self.store.tail(agent.session_id, 200)
            window = context_window(recent, max_tokens=WINDOW_TOKENS)
            if window.truncated:
                print(f"  (window kept {len(window.messages)} messages, left out {window.omitted})")
            request = [{"role": "system", "content": agent.system_prompt}]
            request += [to_openai_chat(message) for message in window.messages]
            answer = await self.llm.complete(request)
            message = Message(
                role="assistant", content=answer.get("content"), tool_calls=answer.get("tool_calls")
            )
            await self.store.append(agent.session_id, message)
            if not message.tool_calls:
                await self.transport.send(source, str(message.content))
                return
            for call in message.tool_calls:
                result = Message(role="tool", tool_call_id=call["id"], content=await run_tool(call))
                await self.store.append(agent.session_id, result)


async def main() -> None:
    """A short day in the life of the gateway."""
    store = AsyncSessionStore(SessionStore(InMemoryBackend(), clock=CLOCK, resets=RESETS))
    gateway = Gateway(store, FakeLLM(), FakeTransport())
    lin = SessionSource(platform="feishu", chat_id="ou_lin", user_id="ou_lin", user_name="Lin")
    group = {"platform": "telegram", "chat_type": "group", "chat_id": "-100", "thread_id": "7"}
    ada = SessionSource(**group, chat_name="Ops", user_id="1", user_name="Ada")
    bo = SessionSource(**group, chat_name="Ops", user_id="2", user_name="Bo")

    await gateway.handle(lin, "What is the weather like?", "ou_lin:om_1")
    for number in range(8):
        CLOCK.advance(minutes=5)
        note = f"Note number {number}: remember to water the plants. " * 3
        await gateway.handle(lin, note, f"ou_lin:om_n{number}")
    await gateway.handle(ada, "Deploy is done.", "-100:501")
    await gateway.handle(bo, "Thanks! Any weather warnings?", "-100:502")
    lookup = await store.get_or_create(lin)
    print("\nthe system prompt of Lin's agent:")
    agent = gateway.agents.get(lookup)
    print(agent.system_prompt if agent else "(no agent)")
    thread = await store.get_or_create(ada)
    print("\nthe thread's agent, prompted for a shared session:")
    agent = gateway.agents.get(thread)
    print(agent.system_prompt if agent else "(no agent)")
    recent = await store.tail(lookup.session_id, 200)
    anthropic = to_anthropic(context_window(recent, max_messages=6).messages)
    roles = [message["role"] for message in anthropic["messages"]]
    print(f"\nthe newest turns of Lin's session for Anthropic: {roles}")

    print("\nthe next day:")
    CLOCK.advance(timedelta(hours=25))
    await gateway.handle(lin, "What is the weather like?", "ou_lin:om_1")  # redelivered late
    await gateway.handle(lin, "Good morning!", "ou_lin:om_2")
    await gateway.agents.aclose()
    await store.aclose()


if __name__ == "__main__":
    asyncio.run(main())
