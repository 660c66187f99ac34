"""An OpenAI Agents SDK agent whose history lives in a hermes-sessions store.

A scripted model stands in for the LLM (the SDK's own ``agents.testing.ScriptedModel``), so the
example runs offline: two turns with a tool call, then ``clear_session`` starting the lane
afresh while the old conversation stays searchable. Run it with
``python examples/openai_agents_session.py`` (needs the ``openai-agents`` extra).
"""

from __future__ import annotations

import asyncio
import tempfile

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from hermes_sessions import SessionStore
from hermes_sessions.integrations.openai_agents import AgentsSession


@function_tool
def port_of(service: str) -> str:
    """The port a service listens on."""
    return {"staging": "8443"}.get(service, "unknown")


async def main(store: SessionStore) -> None:
    """Two turns on one lane, then a fresh start on the same lane."""
    model = ScriptedModel(
        [
            [function_call("port_of", {"service": "staging"}, call_id="call_1")],
            [assistant_message("Staging listens on 8443.")],
            [assistant_message("You asked about the staging port.")],
        ]
    )
    agent = Agent(name="ops", instructions="Answer briefly.", model=model, tools=[port_of])
    session = AgentsSession("ops-chat-42", store)

    first = await Runner.run(agent, "Which port does staging use?", session=session)
    second = await Runner.run(agent, "What did I just ask?", session=session)
    print("turn 1:", first.final_output)
    print("turn 2:", second.final_output)
    print("the model saw", len(model.last_call.input), "items on turn 2")

    record = store.session(store.entry(session.key).session_id)
    print(f"key {session.key}: {record.message_count} messages, {record.tool_call_count} tool call")
    print("search 'staging':", len(store.search("staging")), "hits")

    old = record.id
    await session.clear_session()  # a new session on the lane; the old one is kept
    print("after clear_session:", await session.get_items())
    print("old session ended:", store.session(old).end_reason)


if __name__ == "__main__":
    set_tracing_disabled(disabled=True)
    with tempfile.TemporaryDirectory() as home, SessionStore.open(home) as opened:
        asyncio.run(main(opened))
