"""Sources and message builders shared by the store's scenario tests (not a test module)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from hermes_sessions import Message, ResetPolicies, ResetPolicy, SessionSource

if TYPE_CHECKING:
    from hermes_sessions.store import SessionStore

DM = SessionSource(platform="feishu", chat_id="ou_lin", user_id="ou_lin", user_name="林晓")
ALICE = SessionSource(platform="feishu", chat_type="group", chat_id="oc_team", user_id="ou_alice")
BOB = SessionSource(platform="feishu", chat_type="group", chat_id="oc_team", user_id="ou_bob")
THREAD_ALICE = attrs.evolve(ALICE, chat_type="thread", thread_id="t_1")
THREAD_BOB = attrs.evolve(BOB, chat_type="thread", thread_id="t_1")


def user(text: str, **fields: object) -> Message:
    """A user message."""
    return Message(role="user", content=text, **fields)  # type: ignore[arg-type]


def reply(text: str) -> Message:
    """An assistant message."""
    return Message(role="assistant", content=text)


def with_policy(store: SessionStore, policy: ResetPolicy) -> SessionStore:
    """The same store with ``policy`` as its default reset policy."""
    return attrs.evolve(store, resets=ResetPolicies(policy))


def inject_before_delete(monkeypatch, store, session_id, action):
    """Run ``action`` once, right before the backend deletes ``session_id`` (however it does).

    The backend class is patched (its instances are slotted); the patch ends with the test.
    """
    kind = type(store.backend)
    apply, delete = kind.apply, kind.delete_session
    pending = [action]

    def run_pending(target: str) -> None:
        if target == session_id and pending:
            pending.pop()()

    def injected_apply(self, plan):
        for dropped, _revision in getattr(plan, "drop", ()):
            run_pending(dropped)
        return apply(self, plan)

    def injected_delete(self, target):
        run_pending(target)
        return delete(self, target)

    monkeypatch.setattr(kind, "apply", injected_apply)
    monkeypatch.setattr(kind, "delete_session", injected_delete)
