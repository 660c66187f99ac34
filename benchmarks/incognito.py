"""What incognito lanes cost: persisted turns through the lane router, and incognito turns.

A turn is a checked gateway turn: ``get_or_create(source)``, ``seen(key, platform_message_id)``
and one ``append`` of the user message and the reply. Two comparisons, each against a baseline
taken in the same run, alternating rounds (the better of two per side):

* **persisted lanes**: turns on a SQLite store with an ``IncognitoPolicy`` (a predicate that
  matches none of the keys, plus one incognito key) against the same turns on a store without
  one. The router adds one in-memory lookup per call about a session; the target is a ratio of
  at least 0.9.
* **incognito lanes**: turns of incognito lanes on that store (held in the overlay) against the
  persisted turns of the same store: an incognito turn writes nothing to disk, so it must not
  cost more (target: at least 1.0). For reference, the same turns on a plain ``InMemoryBackend``
  store are printed too: an incognito turn still reads the persisted app and user state from
  SQLite, which a pure in-memory store does not, so that ratio is below 1 by design.

Run ``python benchmarks/incognito.py`` (2,000 turns per round) or ``--quick`` for a smoke run.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from hermes_sessions import (
    IncognitoPolicy,
    KeyPolicy,
    Message,
    ResetPolicies,
    ResetPolicy,
    SessionSource,
    SessionStore,
)
from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.backends.sqlite import SQLiteBackend

NEVER = ResetPolicies(ResetPolicy(mode="none"))
KEYS = 200
WARM_UP = 50


def source(number: int, *, hidden: bool = False) -> SessionSource:
    """The conversation of key ``number`` (an incognito one if ``hidden``)."""
    chat = f"{'secret' if hidden else 'chat'}{number}"
    return SessionSource(platform="telegram", chat_id=chat, user_id=str(number))


def policy() -> IncognitoPolicy:
    """Incognito: every ``secret`` chat, and one named key."""
    named = KeyPolicy().build(source(KEYS + 1, hidden=True))
    return IncognitoPolicy(keys={named}, match=lambda s: s.chat_id.startswith("secret"))


def turns_per_second(store: SessionStore, turns: int, seed: int, *, hidden: bool) -> float:
    """Checked turns per second on ``store`` over ``KEYS`` keys."""
    rng = random.Random(seed)
    picks = [rng.randrange(KEYS) for _ in range(turns + WARM_UP)]
    start = time.perf_counter()
    for n, number in enumerate(picks):
        if n == WARM_UP:
            start = time.perf_counter()
        lookup = store.get_or_create(source(number, hidden=hidden))
        message_id = f"{seed}-{n}"
        if store.seen(lookup.entry.session_key, message_id) is not None:
            raise AssertionError("a fresh message was reported as seen")
        store.append(
            lookup.session_id,
            Message(role="user", content=f"question {n} 部署", platform_message_id=message_id),
            Message(role="assistant", content=f"answer {n}"),
        )
    return turns / (time.perf_counter() - start)


def sqlite_store(path: Path, *, incognito: bool) -> SessionStore:
    """A SQLite store (normal durability: the comparison is of the routing, not of fsync)."""
    backend = SQLiteBackend(path, durability="normal")
    return SessionStore(backend, resets=NEVER, incognito=policy() if incognito else None)


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, for CI smoke tests")
    args = parser.parse_args()
    turns = 300 if args.quick else 2_000
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        plain, routed = [], []
        for r in (0, 1):
            with sqlite_store(folder / f"plain{r}.db", incognito=False) as store:
                plain.append(turns_per_second(store, turns, seed=r, hidden=False))
            with sqlite_store(folder / f"routed{r}.db", incognito=True) as store:
                routed.append(turns_per_second(store, turns, seed=r, hidden=False))
        ratio = max(routed) / max(plain)
        print(
            f"persisted lanes: {max(routed):7,.0f} turns/s with an incognito policy, "
            f"{max(plain):7,.0f} without; ratio {ratio:.2f} (target >= 0.9)"
        )
        memory, hidden = [], []
        for r in (0, 1):
            with SessionStore(InMemoryBackend(), resets=NEVER) as store:
                memory.append(turns_per_second(store, turns, seed=r, hidden=True))
            with sqlite_store(folder / f"hidden{r}.db", incognito=True) as store:
                hidden.append(turns_per_second(store, turns, seed=r, hidden=True))
        ratio = max(hidden) / max(routed)
        print(
            f"incognito lanes: {max(hidden):7,.0f} turns/s in the overlay of a SQLite store, "
            f"{max(routed):7,.0f} for its persisted lanes; ratio {ratio:.2f} (target >= 1.0); "
            f"a plain in-memory store {max(memory):7,.0f} (ratio {max(hidden) / max(memory):.2f}, "
            "reference only: the incognito turn reads app and user state from disk)"
        )


if __name__ == "__main__":
    main()
