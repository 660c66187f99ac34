"""A Google ADK agent whose sessions, events and state live in a hermes-sessions store.

A scripted model stands in for the LLM (a small ``BaseLlm`` subclass that replays answers), so
the example runs offline: two turns through ADK's ``Runner``, a tool that writes ``user:`` and
``temp:`` state, then the stored session read back, searched and deleted. Run it with
``python examples/adk_session.py`` (needs the ``adk`` extra).
"""

from __future__ import annotations

import asyncio
import tempfile
from typing import TYPE_CHECKING

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.tools.tool_context import ToolContext  # noqa: TC002  # ADK reads the hint
from google.genai import types

from hermes_sessions import SessionStore
from hermes_sessions.integrations.adk import HermesSessionService

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator

    from google.adk.models.llm_request import LlmRequest

APP = "ops"


class ScriptedLlm(BaseLlm):
    """Replays one scripted reply per model call, and remembers how many events it was shown."""

    replies: list[types.Part]
    seen: list[int] = []  # noqa: RUF012  # pydantic copies the default per instance

    async def generate_content_async(
        self,
        llm_request: LlmRequest,
        stream: bool = False,  # noqa: FBT001, FBT002  # BaseLlm's signature
    ) -> AsyncGenerator[LlmResponse, None]:
        """The next scripted reply as the model's answer."""
        del stream
        self.seen.append(len(llm_request.contents))
        part = self.replies[len(self.seen) - 1]
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def remember_language(language: str, tool_context: ToolContext) -> str:
    """Remember the user's language (user state) and a scratch value for this turn only."""
    tool_context.state["user:language"] = language
    tool_context.state["temp:checked"] = True
    return f"noted: {language}"


def text(event_text: str) -> types.Content:
    """A user message."""
    return types.Content(role="user", parts=[types.Part(text=event_text)])


async def main(store: SessionStore) -> None:
    """Two turns on one ADK session, then the session as the store holds it."""
    model = ScriptedLlm(
        model="scripted",
        replies=[
            types.Part.from_function_call(name="remember_language", args={"language": "zh"}),
            types.Part(text="好的, I will answer in Chinese. Staging listens on 8443."),
            types.Part(text="You asked about the staging port."),
        ],
    )
    agent = LlmAgent(name="ops", model=model, tools=[remember_language])
    service = HermesSessionService(store)
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    session = await service.create_session(
        app_name=APP, user_id="42", session_id="ops-chat", state={"app:region": "eu"}
    )

    for question in ["I speak Chinese. Which port does staging use?", "What did I just ask?"]:
        async for event in runner.run_async(
            user_id="42", session_id=session.id, new_message=text(question)
        ):
            if event.is_final_response() and event.content and event.content.parts:
                print("agent:", event.content.parts[0].text)
    print("the model saw", model.seen[-1], "contents on turn 2")

    stored = await service.get_session(app_name=APP, user_id="42", session_id=session.id)
    if stored is None:
        raise SystemExit("the session was not stored")
    print("events stored:", len(stored.events))
    print("state:", dict(sorted(stored.state.items())))
    print("user state:", await service.get_user_state(app_name=APP, user_id="42"))
    hits = store.search("staging")
    print("search 'staging':", sorted({hit.message.role for hit in hits}))

    await service.delete_session(app_name=APP, user_id="42", session_id=session.id)
    print(
        "after delete:",
        await service.get_session(app_name=APP, user_id="42", session_id="ops-chat"),
    )


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as home, SessionStore.open(home) as opened:
        asyncio.run(main(opened))
