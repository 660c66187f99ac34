"""Lane state around a key migration's plan: chains, and re-runs after a crash."""

from __future__ import annotations

from typing import Any

from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.state import StateScope
from hermes_sessions.store._lane_moves import plan_lane_moves

CHAIN = {"a": "b", "b": "c"}  # b moves away and receives a's lane
RANKS = {"a": (1,), "b": (1,)}


def lanes_of(backend: InMemoryBackend) -> dict[str, dict[str, Any]]:
    """The lane state of a, b and c (empty ones included)."""
    scopes = {key: StateScope.lane(key).id for key in "abc"}
    found = backend.get_state(list(scopes.values()))
    return {key: found.get(scope, {}) for key, scope in scopes.items()}


def seeded() -> InMemoryBackend:
    """A backend whose lanes a and b hold a state of their own."""
    backend = InMemoryBackend()
    backend.update_state({StateScope.lane("a").id: {"from": "a"}})
    backend.update_state({StateScope.lane("b").id: {"from": "b", "only_b": 1}})
    return backend


def test_a_chained_key_hands_its_state_on_and_takes_the_one_it_receives():
    """With a -> b and b -> c, c gets b's state, b gets a's (b's own keys gone), a is cleared."""
    backend = seeded()
    moves = plan_lane_moves(backend, CHAIN, RANKS, live_keys={"a", "b"})
    assert moves.moved == (("a", "b"), ("b", "c"))
    moves.write_before(backend)
    assert lanes_of(backend)["b"] == {"from": "b", "only_b": 1}  # kept until the plan is applied
    moves.write_after(backend)
    assert lanes_of(backend) == {"a": {}, "b": {"from": "a"}, "c": {"from": "b", "only_b": 1}}


def test_a_re_run_settles_a_chain_whose_plan_was_applied():
    """After a crash past the plan, the next pass finds both markers finished and settles them."""
    backend = seeded()
    plan_lane_moves(backend, CHAIN, RANKS, live_keys={"a", "b"}).write_before(backend)
    rerun = plan_lane_moves(backend, {}, {}, live_keys={"b", "c"})  # a has gone, b and c live
    assert rerun.moved == (("a", "b"), ("b", "c"))
    rerun.write_before(backend)
    assert lanes_of(backend) == {"a": {}, "b": {"from": "a"}, "c": {"from": "b", "only_b": 1}}
    assert plan_lane_moves(backend, {}, {}, live_keys={"b", "c"}).moved == ()


def test_a_re_run_after_a_crash_before_the_plan_ends_the_same():
    """A crash before the plan leaves the old keys live: the pass is planned and written again."""
    backend = seeded()
    plan_lane_moves(backend, CHAIN, RANKS, live_keys={"a", "b"}).write_before(backend)
    again = plan_lane_moves(backend, CHAIN, RANKS, live_keys={"a", "b"})
    assert again.pending == {}
    again.write_before(backend)
    again.write_after(backend)
    assert lanes_of(backend) == {"a": {}, "b": {"from": "a"}, "c": {"from": "b", "only_b": 1}}
