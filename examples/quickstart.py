"""Quickstart: one conversation lane, from the first message to a search across sessions.

The one idea: a host asks the store which session a message belongs to, appends the turn, and
finds it again later, even after the user started a fresh conversation with ``/new``.
"""

from __future__ import annotations

from hermes_sessions import Message, ResetPolicies, ResetPolicy, SessionSource, SessionStore


def main() -> None:
    """Route two messages of one chat, reset the lane, and search the old conversation."""
    resets = ResetPolicies(ResetPolicy(mode="idle", idle_minutes=120, timezone="Asia/Shanghai"))
    with SessionStore.open(resets=resets) as store:  # SQLite under $HERMES_SESSIONS_HOME
        source = SessionSource(platform="telegram", chat_id="42", user_id="ada")
        for _delivery in range(2):  # the platform sends the same webhook twice
            # Telegram ids are per chat: qualify them with the chat id. Passing the id to the
            # lookup checks for a redelivery before the reset policy could start a new session.
            lookup = store.get_or_create(source, platform_message_id="42:m1")
            if lookup.redelivered is not None:
                print("redelivery: the model is not called again")
                continue
            print(f"session key: {lookup.entry.session_key}")
            question = Message(
                role="user", content="How do I free port 8443?", platform_message_id="42:m1"
            )
            answer = Message(role="assistant", content="Stop the old container that holds it.")
            store.append(lookup.session_id, question, answer)
        print(f"messages stored: {len(store.transcript(lookup.session_id))}")

        fresh = store.reset(lookup.entry.session_key)  # the user typed /new
        print(f"new session: {fresh.session_id != lookup.session_id}")
        for hit in store.search("port"):
            print(f"found in {hit.session.id}: {hit.snippet}")


if __name__ == "__main__":
    main()
