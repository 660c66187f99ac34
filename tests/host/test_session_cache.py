"""SessionCache keeps one value per key, evicts each value exactly once, and never serves stale."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.clock import FrozenClock
from hermes_sessions.host import CacheClosedError, SessionCache
from hermes_sessions.models import SessionEntry, SessionSource
from hermes_sessions.store import RotateEvent, SessionStore

START = datetime(2026, 5, 1, tzinfo=UTC)


def entry(key: str, session_id: str = "s1") -> SessionEntry:
    """A routing entry of ``key`` pointing at ``session_id``."""
    return SessionEntry(session_key=key, session_id=session_id, created_at=START, updated_at=START)


@pytest.fixture
def clock():
    """A frozen clock at the start of May 2026."""
    return FrozenClock(START)


@pytest.fixture
def evicted():
    """The values ``on_evict`` received, in order."""
    return []


@pytest.fixture
def cache(clock, evicted):
    """A cache of two values with a ten-minute idle TTL."""
    return SessionCache(
        max_size=2, idle_ttl=timedelta(minutes=10), on_evict=evicted.append, clock=clock
    )


def test_the_least_recently_used_value_goes_first(cache, evicted):
    """Past ``max_size`` the value used longest ago is evicted, and reading counts as use."""
    cache.put(entry("a"), "A")
    cache.put(entry("b"), "B")
    assert cache.get(entry("a")) == "A"
    cache.put(entry("c"), "C")
    assert evicted == ["B"]
    assert ("a" in cache, "b" in cache, "c" in cache) == (True, False, True)


def test_idle_values_expire_after_the_ttl(cache, clock, evicted):
    """A value unused for longer than ``idle_ttl`` is evicted; exactly at the TTL it stays."""
    cache.put(entry("a"), "A")
    clock.advance(minutes=10)
    assert cache.get(entry("a")) == "A"
    clock.advance(minutes=10, seconds=1)
    assert cache.get(entry("a")) is None
    assert evicted == ["A"]


def test_sweep_evicts_idle_values_without_a_lookup(cache, clock, evicted):
    """``sweep`` is the periodic clean-up: it returns how many values it evicted."""
    cache.put(entry("a"), "A")
    cache.put(entry("b"), "B")
    clock.advance(minutes=5)
    cache.get(entry("b"))
    clock.advance(minutes=6)
    assert cache.sweep() == 1
    assert evicted == ["A"]


def test_a_value_built_for_another_session_id_is_never_returned(cache, evicted):
    """After the key rotated elsewhere, the old value is evicted on the next lookup."""
    cache.put(entry("a", "s1"), "agent for s1")
    assert cache.get(entry("a", "s2")) is None
    assert evicted == ["agent for s1"]
    assert cache.get(entry("a", "s1")) is None


def test_replacing_a_value_evicts_the_old_one_once(cache, evicted):
    """Putting a new value evicts the previous one; putting the same object again does not."""
    value = object()
    cache.put(entry("a"), value)
    cache.put(entry("a"), value)
    assert evicted == []
    cache.put(entry("a"), "new")
    assert evicted == [value]


def test_close_evicts_every_value_and_refuses_new_ones(cache, evicted):
    """``close`` hands every value to ``on_evict``; afterwards ``put`` raises."""
    cache.put(entry("a"), "A")
    cache.put(entry("b"), "B")
    cache.close()
    assert sorted(evicted) == ["A", "B"]
    assert len(cache) == 0
    with pytest.raises(CacheClosedError, match="create a new SessionCache"):
        cache.put(entry("c"), "C")
    cache.close()
    assert sorted(evicted) == ["A", "B"]


def test_explicit_eviction(cache, evicted):
    """``evict`` removes one key's value and says whether there was one."""
    cache.put(entry("a"), "A")
    assert cache.evict("a") is True
    assert cache.evict("a") is False
    assert evicted == ["A"]


def test_on_rotate_evicts_early_in_the_rotating_process(clock, evicted):
    """Registered with ``store.on_rotate``, a reset evicts the key's value at once."""
    store = SessionStore(InMemoryBackend(), clock=clock)
    cache = SessionCache(on_evict=evicted.append, clock=clock)
    store.on_rotate(cache.on_rotate)
    source = SessionSource(platform="telegram", chat_id="1")
    lookup = store.get_or_create(source)
    agent = cache.get_or_create(lookup, lambda: "agent-1")
    assert cache.get_or_create(lookup, lambda: "agent-2") == agent
    store.reset(lookup.entry.session_key)
    assert evicted == ["agent-1"]
    cache.on_rotate(
        RotateEvent(session_key="other", old_session_id=None, new_session_id="x", reason="r")
    )
    assert evicted == ["agent-1"]


def test_a_rotation_by_another_host_is_caught_by_the_session_id(clock, evicted):
    """Another store on the same data rotates the key; this cache's lookup gets no stale agent."""
    backend = InMemoryBackend()
    ours, theirs = SessionStore(backend, clock=clock), SessionStore(backend, clock=clock)
    cache = SessionCache(on_evict=evicted.append, clock=clock)
    ours.on_rotate(cache.on_rotate)
    source = SessionSource(platform="telegram", chat_id="1")
    cache.put(ours.get_or_create(source), "old agent")
    theirs.reset(theirs.key_for(source))
    fresh = ours.get_or_create(source)
    assert cache.get(fresh) is None
    assert evicted == ["old agent"]


def test_a_rotation_event_for_the_current_session_keeps_the_value(cache, evicted):
    """An event whose new id is the cached one (the value was built after it) evicts nothing."""
    cache.put(entry("a", "s2"), "A")
    cache.on_rotate(
        RotateEvent(session_key="a", old_session_id="s1", new_session_id="s2", reason="idle")
    )
    assert evicted == []


def test_a_failing_on_evict_is_logged_and_the_value_still_leaves(clock, caplog):
    """An exception in ``on_evict`` is logged; eviction goes on."""

    def explode(_value):
        raise RuntimeError("boom")

    cache = SessionCache(on_evict=explode, clock=clock)
    cache.put(entry("a"), "A")
    cache.close()
    assert "on_evict callback" in caplog.text
    assert len(cache) == 0


def test_threads_racing_evict_every_value_exactly_once(clock):
    """Eight threads putting, reading and evicting at once: each value is evicted once."""
    counts: Counter[str] = Counter()
    lock = threading.Lock()

    def count(value):
        with lock:
            counts[value] += 1

    cache = SessionCache(max_size=5, on_evict=count, clock=clock)
    made: list[str] = []
    barrier = threading.Barrier(8)

    def work(worker):
        barrier.wait()
        for step in range(300):
            key = f"k{step % 7}"

            def build(value=f"{worker}-{step}"):
                with lock:
                    made.append(value)
                return value

            cache.get_or_create(entry(key, f"s{step % 3}"), build)
            if step % 11 == 0:
                cache.evict(key)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cache.close()
    assert sorted(counts) == sorted(made)
    assert set(counts.values()) == {1}


def test_racing_builders_keep_one_value_and_evict_the_other(clock, evicted):
    """When a value appears while the factory ran, the first one kept wins."""
    cache = SessionCache(on_evict=evicted.append, clock=clock)

    def factory():
        cache.put(entry("a"), "first")
        return "second"

    assert cache.get_or_create(entry("a"), factory) == "first"
    assert evicted == ["second"]


def test_async_on_evict_runs_on_the_loop_and_aclose_waits(clock):
    """A coroutine ``on_evict`` runs on the captured loop; ``aclose`` waits for it."""
    closed: list[str] = []

    async def close_agent(value):
        await asyncio.sleep(0)
        closed.append(value)

    async def main():
        cache = SessionCache(on_evict=close_agent, clock=clock)
        agent = await cache.aget_or_create(entry("a"), _make("agent"))
        assert await cache.aget_or_create(entry("a"), _make("other")) == agent
        cache.put(entry("b"), "b-agent")
        await cache.aclose()
        return cache

    asyncio.run(main())
    assert sorted(closed) == ["agent", "b-agent"]


def _make(value):
    async def factory():
        return value

    return factory


def test_async_on_evict_from_another_thread_runs_on_the_loop(clock):
    """An eviction in a worker thread schedules the coroutine on the cache's loop."""
    seen: list[tuple[str, bool]] = []

    async def main():
        loop_thread = threading.get_ident()

        async def close_agent(value):
            seen.append((value, threading.get_ident() == loop_thread))

        cache = SessionCache(on_evict=close_agent, clock=clock)
        cache.put(entry("a"), "agent")
        await asyncio.to_thread(cache.evict, "a")
        await cache.aclose()

    asyncio.run(main())
    assert seen == [("agent", True)]


def test_async_on_evict_failures_are_logged(clock, caplog):
    """An exception in an async ``on_evict`` is logged, not raised from ``aclose``."""

    async def explode(_value):
        raise RuntimeError("boom")

    async def main():
        cache = SessionCache(on_evict=explode, clock=clock)
        cache.put(entry("a"), "agent")
        await cache.aclose()

    asyncio.run(main())
    assert "async on_evict callback failed" in caplog.text


def test_an_async_on_evict_needs_a_loop(clock):
    """Made outside a running loop without ``loop=``, an async callback is refused."""

    async def close_agent(_value):
        return None

    with pytest.raises(ValueError, match="needs an event loop"):
        SessionCache(on_evict=close_agent, clock=clock)


@pytest.mark.parametrize(
    ("option", "value"),
    [("max_size", 0), ("max_size", True), ("idle_ttl", timedelta(0)), ("idle_ttl", 5)],
)
def test_bad_settings_are_rejected(option, value):
    """Sizes and TTLs are checked at construction, with a message naming the setting."""
    with pytest.raises(ValueError, match=option):
        SessionCache(**{option: value})


def test_without_a_ttl_values_never_expire_and_repr_is_short(clock):
    """``idle_ttl=None`` keeps values however long they are idle."""
    cache = SessionCache(idle_ttl=None, clock=clock)
    cache.put(entry("a"), "A")
    clock.advance(days=365)
    assert cache.get(entry("a")) == "A"
    assert repr(cache) == "<SessionCache 1/128>"
