"""The store's natural search mode: paging, order, lineage, common terms, errors, async."""

from __future__ import annotations

import asyncio

import pytest

from hermes_sessions import AsyncSessionStore, Message, SessionSource
from hermes_sessions.exceptions import InvalidArgumentError
from hermes_sessions.store import _natural


def chat(store, name: str, *lines: str) -> str:
    """A session of ``name``'s chat holding ``lines`` as user messages; its id."""
    session_id = store.get_or_create(SessionSource(platform="cli", chat_id=name)).session_id
    store.append(session_id, *(Message(role="user", content=line) for line in lines))
    return session_id


def test_an_unknown_mode_is_refused(store):
    """A mode other than exact or natural raises, naming both."""
    with pytest.raises(InvalidArgumentError, match="'exact' or 'natural'"):
        store.search("docker", mode="fuzzy")


def test_a_common_term_is_looked_up_again_inside_the_leaders(store, monkeypatch):
    """A term with more hits than are read still counts for the best candidate sessions."""
    monkeypatch.setattr(_natural, "PER_TERM", 3)
    for number in range(6):
        chat(store, f"noise{number}", "staging is fine", "staging again")
    answer = chat(store, "answer", "the zebrafish pipeline", "broke on staging")
    match, *weak = store.search("zebrafish pipeline staging", mode="natural")
    assert not any(other.confident for other in weak)
    assert match.session.id == answer
    assert match.matched == "all words"
    assert match.confident


def test_order_newest_sorts_confident_sessions_by_activity(store, clock):
    """order="newest" lists the confident sessions newest first."""
    first = chat(store, "a", "quokka migration plan")
    clock.advance(minutes=5)
    second = chat(store, "b", "quokka migration done")
    ranked = store.search("quokka migration", mode="natural", order="newest")
    assert [m.session.id for m in ranked] == [second, first]
    oldest = store.search("quokka migration", mode="natural", order="oldest")
    assert [m.session.id for m in oldest] == [first, second]


def test_lineage_grouping_keeps_one_session_per_conversation(store):
    """group="lineage" offers a compressed conversation once."""
    source = SessionSource(platform="cli", chat_id="long")
    old = chat(store, "long", "axolotl feeding schedule")
    summary = [Message(role="user", content="axolotl feeding summary")]
    tip = store.compress(old, summary, holder="worker")
    found = store.search("axolotl feeding", mode="natural")
    assert {m.session.id for m in found} == {old, tip.id}
    grouped = store.search("axolotl feeding", mode="natural", group="lineage")
    assert len(grouped) == 1
    assert store.get_or_create(source).session_id == tip.id


def test_the_async_store_searches_naturally(store):
    """AsyncSessionStore.search takes the mode too."""
    answer = chat(store, "a", "the narwhal deployment failed")

    async def ask() -> list[str]:
        async_store = AsyncSessionStore(store)
        found = await async_store.search("why did narwhal deploy fail", mode="natural")
        hits = await async_store.search("narwhal")
        assert [hit.session.id for hit in hits] == [answer]
        return [match.session.id for match in found]

    assert asyncio.run(ask()) == [answer]
