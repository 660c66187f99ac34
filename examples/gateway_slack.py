"""A Slack gateway on slack-bolt, run offline on recorded Events API requests.

Recorded event bodies go through bolt's own dispatch, ``App.dispatch(BoltRequest(...))``, the
call its HTTP and Socket Mode adapters make for every request. Authorisation is a local
function (no ``auth.test`` call) and request signing is off, so nothing touches the network;
replies are printed instead of posted. Each listener converts its event with
``hermes_sessions.adapters.slack`` and performs it with ``apply``: a message in a DM thread, its
edit (re-indexed) and its deletion (gone from search). Run it with
``python examples/gateway_slack.py``; it works in a temporary directory.
"""

from __future__ import annotations

import json
import tempfile
from http import HTTPStatus
from typing import Any

from slack_bolt import App, BoltContext, BoltRequest
from slack_bolt.authorization import AuthorizeResult

from hermes_sessions import SessionStore
from hermes_sessions.adapters import Edit, InboundEvent, apply, slack

DM, ROOT = "D024BE91L", "1778547600.000100"


def body(event: dict[str, Any]) -> str:
    """An Events API request body around ``event``."""
    return json.dumps({"type": "event_callback", "team_id": "T0001", "event": event})


def dm(ts: str, text: str, **more: Any) -> dict[str, Any]:
    """A message from Alice in her DM with the bot."""
    return {
        "type": "message",
        "channel": DM,
        "channel_type": "im",
        "user": "UALICE",
        "ts": ts,
        "text": text,
        **more,
    }


REQUESTS = [
    body(dm(ROOT, "how do I rotate the keys?")),
    body(dm("1778547700.000200", "and the second step?", thread_ts=ROOT)),
    body(
        {
            "type": "app_mention",
            "channel": "C0LAN2Q65",
            "user": "UALICE",
            "ts": "1778547800.000300",
            "text": "<@UBOT> who is on call?",
        }
    ),
    body(
        {
            "type": "message",
            "subtype": "message_changed",
            "channel": DM,
            "channel_type": "im",
            "message": dm("1778547700.000200", "and the third step?", thread_ts=ROOT),
            "previous_message": dm("1778547700.000200", "and the second step?", thread_ts=ROOT),
        }
    ),
    body(
        {
            "type": "message",
            "subtype": "message_deleted",
            "channel": DM,
            "channel_type": "im",
            "deleted_ts": "1778547700.000200",
            "previous_message": dm("1778547700.000200", "and the third step?", thread_ts=ROOT),
        }
    ),
]


def authorize(
    enterprise_id: str | None,
    team_id: str | None,
    user_id: str | None,  # noqa: ARG001  # bolt passes it by name
) -> AuthorizeResult:
    """Who the bot is, without asking Slack."""
    return AuthorizeResult(
        enterprise_id=enterprise_id,
        team_id=team_id,
        bot_user_id="UBOT",
        bot_id="BBOT",
        bot_token="xoxb-offline",  # noqa: S106  # a placeholder; nothing is sent
    )


def main() -> None:
    """Dispatch the recorded requests through the app and show what the store kept."""
    with tempfile.TemporaryDirectory() as home, SessionStore.open(home) as store:
        app = App(
            signing_secret="offline",  # noqa: S106  # signature checks are off below
            authorize=authorize,
            request_verification_enabled=False,
            process_before_response=True,
        )

        def perform(event: InboundEvent | None) -> None:
            if event is None:
                return
            applied = apply(store, event)
            print(f"{type(event).__name__:<10} {store.key_for(event.source)}")
            if applied.lookup is not None and applied.lookup.created:
                print("  -> would post: hello, this is a new conversation")
            if isinstance(event, Edit):
                print(f"  search 'third step': {len(store.search('third step'))} hit(s)")

        @app.event("message")
        def on_message(body: dict[str, Any], context: BoltContext) -> None:
            perform(slack.convert(body, bot_user_id=context.bot_user_id))

        @app.event("app_mention")
        def on_mention(body: dict[str, Any], context: BoltContext) -> None:
            perform(slack.convert(body, bot_user_id=context.bot_user_id))

        for raw in REQUESTS:
            request = BoltRequest(body=raw, headers={"content-type": ["application/json"]})
            assert app.dispatch(request).status == HTTPStatus.OK  # noqa: S101  # the example's own check

        print("search 'third step' after the deletion:", store.search("third step"))
        thread = store.entry(f"agent:main:slack:dm:{DM}:{ROOT}")
        kept = store.transcript(thread.session_id, include_inactive=True)
        print(
            "the DM thread keeps the deleted message inactive:",
            [(m.content, m.active) for m in kept],
        )


if __name__ == "__main__":
    main()
