"""``aapply``: adapter events performed on an AsyncSessionStore, on every backend."""

from __future__ import annotations

import ast
import asyncio
import json
from pathlib import Path

import pytest

from hermes_sessions import AsyncSessionStore, InvalidArgumentError
from hermes_sessions.adapters import aapply, apply, slack, telegram

PAYLOADS = Path(__file__).parent / "payloads"
EXAMPLES = Path(__file__).parents[2] / "examples"


def load(name):
    """A payload file from ``payloads/``."""
    return json.loads((PAYLOADS / f"{name}.json").read_text(encoding="utf-8"))


def run(coroutine):
    """Run one coroutine on a fresh event loop."""
    return asyncio.run(coroutine)


def test_a_new_message_goes_through_the_async_store(store):
    """``aapply`` creates the session, appends, and reports the lookup, like ``apply``."""

    async def scenario():
        astore = AsyncSessionStore(store)
        event = telegram.convert(load("telegram_private"))
        first = await aapply(astore, event)
        again = await aapply(astore, event)
        return first, again

    first, again = run(scenario())
    assert first.lookup is not None
    assert first.lookup.created
    assert first.message is not None
    assert first.message.platform_message_id == "42:7"
    assert again.session_id == first.session_id
    assert again.message == first.message
    assert len(store.transcript(first.session_id)) == 1


def test_edits_and_recalls_go_through_the_async_store(store):
    """An edit re-indexes and a recall soft-deletes; neither creates a session."""

    async def scenario():
        astore = AsyncSessionStore(store)
        stray = await aapply(astore, telegram.convert(load("telegram_edited")))
        stored = await aapply(astore, telegram.convert(load("telegram_private")))
        edited = await aapply(astore, telegram.convert(load("telegram_edited")))
        posted = await aapply(astore, slack.convert(load("slack_dm_thread")))
        recalled = await aapply(astore, slack.convert(load("slack_message_deleted")))
        return stray, stored, edited, posted, recalled

    stray, stored, edited, posted, recalled = run(scenario())
    assert (stray.session_id, stray.message) == (None, None)
    assert edited.message is not None
    assert edited.message.content == "where did we leave the rollback?"
    assert [hit.message.id for hit in store.search("rollback")] == [stored.message.id]
    assert recalled.message is not None
    assert recalled.message.id == posted.message.id
    assert not recalled.message.active


def test_apply_on_an_async_store_says_to_await_aapply(store):
    """The blocking ``apply`` refuses an AsyncSessionStore with a message naming ``aapply``."""
    astore = AsyncSessionStore(store)
    with pytest.raises(InvalidArgumentError, match="aapply"):
        apply(astore, telegram.convert(load("telegram_private")))
    assert store.backend.entries() == []


def test_aapply_on_a_blocking_store_says_to_use_apply(store):
    """``aapply`` refuses a blocking SessionStore instead of failing on a missing await."""
    with pytest.raises(InvalidArgumentError, match="apply"):
        run(aapply(store, telegram.convert(load("telegram_private"))))


def _calls_in_async_functions(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.func.id
        for function in ast.walk(tree)
        if isinstance(function, ast.AsyncFunctionDef)
        for node in ast.walk(function)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.name)
def test_asyncio_examples_never_call_the_blocking_apply(path):
    """Inside a coroutine the examples use ``await aapply(...)``, never ``apply(...)``."""
    assert "apply" not in _calls_in_async_functions(path)
