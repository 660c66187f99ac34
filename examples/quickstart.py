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
        lookup = store.get_or_create(source)
        print(f"session key: {lookup.entry.session_key}")
        store.append(
            lookup.session_id,
            Message(role="user", content="How do I free port 8443?", platform_message_id="m1"),
            Message(role="assistant", content="Stop the old container that holds it."),
        )
        store.append(
            lookup.session_id, Message(role="user", content="dup", platform_message_id="m1")
        )
        print(
            f"messages stored: {len(store.transcript(lookup.session_id))}"
        )  # the redelivery is dropped

        fresh = store.reset(lookup.entry.session_key)  # the user typed /new
        print(f"new session: {fresh.session_id != lookup.session_id}")
        for hit in store.search("port"):
            print(f"found in {hit.session.id}: {hit.snippet}")


if __name__ == "__main__":
    main()
