"""Lane state follows its lane through a key migration (:meth:`SessionStore.migrate_keys`).

Lane state (``StateScope.lane(key)``) is keyed by the lane, so a pass that moves a key moves its
lane state too. It is done at the store level, with ``update_state`` around the pass's plan, in
an order that a crash cannot lose and a re-run finishes:

1. before the plan: every new key's lane state becomes the merge of its contenders' (one
   ``update_state``), and a marker scope next to it (``migration|<lane scope id>``) lists the old
   keys to clear;
2. the plan is applied (entries and records move);
3. after it: the old keys' lane state and the markers are cleared (one ``update_state``).

A crash between 1 and 2 leaves the old keys routed, so the re-run plans the same moves and
writes the same merge again (it is idempotent: the new key's own state ranks below its
contenders', or at its own entry's rank). A crash between 2 and 3 leaves markers whose old keys
have neither an entry nor a record any more: the next pass (dry run included) reports them in
``states_moved`` and a real pass clears them.

A key that is both moving away and receiving (a chain, ``a -> b`` and ``b -> c``) keeps its own
state until the plan is applied: what it receives waits in its marker and replaces its state in
step 3, so step 1 never overwrites state that is still to be copied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import attrs

from hermes_sessions.state import DELETE, StateScope

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from hermes_sessions.protocols import Backend

__all__ = ["LaneMoves", "Rank", "plan_lane_moves"]

Rank = tuple[Any, ...]
"""A contender's precedence: higher wins (compared only within one new key)."""

_MARKER: Final = "migration|"
_FROM: Final = "from"
_VALUE: Final = "value"


def _lane(key: str) -> str:
    return StateScope.lane(key).id


def _marker(key: str) -> str:
    return _MARKER + _lane(key)


@attrs.frozen
class LaneMoves:
    """What one pass does to lane state (computed from one read; nothing written yet)."""

    moved: tuple[tuple[str, str], ...]
    """``(old_key, new_key)`` of every lane whose state moves, this pass or a finished one's."""
    before: dict[str, dict[str, Any]]
    """Changes written before the plan (merged new lanes, and markers)."""
    pending: dict[str, tuple[str, ...]]
    """New key -> old keys to clear, of a marker left by a pass that crashed after its plan."""
    after: tuple[str, ...]
    """The new keys whose markers step 3 settles once this pass's plan is applied."""

    def write_before(self, backend: Backend) -> None:
        """Step 1 (and, first, step 3 of a crashed pass): merge into the new keys, mark."""
        if self.pending:
            _settle(backend, self.pending)
        if self.before:
            backend.update_state(self.before)

    def write_after(self, backend: Backend) -> None:
        """Step 3: clear the old keys and replace chained keys' state, drop the markers."""
        if not self.after:
            return
        found = backend.get_state([_marker(key) for key in self.after])
        _settle(
            backend, {key: tuple(found.get(_marker(key), {}).get(_FROM, ())) for key in self.after}
        )


def _settle(backend: Backend, markers: Mapping[str, tuple[str, ...]]) -> None:
    """Clear the listed old keys' lane state, apply waiting values, and drop the markers."""
    received = set(markers)
    scopes = [_lane(k) for k in {*received, *(o for olds in markers.values() for o in olds)}]
    current = backend.get_state([*scopes, *map(_marker, received)])
    changes: dict[str, dict[str, Any]] = {}
    for new_key, olds in markers.items():
        marker = current.get(_marker(new_key), {})
        for old in olds:
            if old not in received:  # a chained key's own state is replaced, not cleared
                changes[_lane(old)] = dict.fromkeys(current.get(_lane(old), {}), DELETE)
        if _VALUE in marker:
            value: dict[str, Any] = marker[_VALUE]
            gone = dict.fromkeys(current.get(_lane(new_key), {}), DELETE)
            changes[_lane(new_key)] = {**gone, **value}
        changes[_marker(new_key)] = dict.fromkeys(marker, DELETE)
    changes = {scope: delta for scope, delta in changes.items() if delta}
    if changes:
        backend.update_state(changes)


def _finished(marked: Mapping[str, tuple[str, ...]], live: set[str]) -> dict[str, tuple[str, ...]]:
    """The markers of a pass whose plan was applied: every old key is gone, or finished too.

    An old key that is live again is a chained key (it received another lane's entry); its own
    marker tells whether that pass's plan was applied.
    """
    done: dict[str, tuple[str, ...]] = {}
    while True:
        more = {
            key: olds
            for key, olds in marked.items()
            if key not in done and all(old not in live or old in done for old in olds)
        }
        if not more:
            return dict(sorted(done.items()))
        done.update(more)


def plan_lane_moves(
    backend: Backend,
    lanes: Mapping[str, str],
    ranks: Mapping[str, Rank],
    live_keys: Iterable[str],
) -> LaneMoves:
    """The lane-state moves of a pass that moves ``lanes`` (old key -> new key).

    ``ranks`` orders the contenders of each new key: every old key, and a new key that has an
    entry staying where it is. The new key's state is the merge of its contenders' in rank order
    (the highest, the winner, set last, so its values take precedence); the new key's own state
    counts as a contender at its rank, or below all of them when it has none. ``live_keys`` are
    the keys that have an entry or a record before the pass (a marker at one of them whose old
    keys have neither is a crashed pass's, to settle).
    """
    live = set(live_keys)
    targets: dict[str, list[str]] = {}
    for old, new in lanes.items():
        targets.setdefault(new, []).append(old)
    wanted = {*lanes, *targets, *live}
    found = backend.get_state(sorted({_lane(k) for k in wanted} | {_marker(k) for k in live}))
    marked = {
        key: tuple(found[_marker(key)].get(_FROM, ())) for key in live if _marker(key) in found
    }
    pending = _finished(marked, live)
    moved: list[tuple[str, str]] = []
    left = backend.get_state(sorted({_lane(o) for olds in pending.values() for o in olds}))
    moved += [(old, key) for key, olds in pending.items() for old in olds if left.get(_lane(old))]
    before: dict[str, dict[str, Any]] = {}
    after: list[str] = []
    for new_key, sources in sorted(targets.items()):
        holding = sorted(old for old in sources if found.get(_lane(old)))
        if not holding:
            continue
        moved += [(old, new_key) for old in holding]
        own = {} if new_key in lanes else found.get(_lane(new_key), {})
        contenders = sorted(holding, key=lambda k: ranks[k])
        merged: dict[str, Any] = {}
        if new_key in ranks and new_key not in lanes:  # an occupant: its state ranks as it does
            contenders = sorted([*holding, new_key], key=lambda k: ranks[k])
        else:
            merged.update(own)
        for key in contenders:
            merged.update(found.get(_lane(key), {}))
        if new_key in lanes:  # chained: its own state is still to be copied away
            before[_marker(new_key)] = {_FROM: holding, _VALUE: merged}
        else:
            before[_lane(new_key)] = merged
            before[_marker(new_key)] = {_FROM: holding}
        after.append(new_key)
    return LaneMoves(tuple(sorted(moved)), before, pending, tuple(after))
