"""The store under lost races: a competing writer gets in between a read and a write."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import pytest

from hermes_sessions import ResetPolicies, ResetPolicy, SessionSource, SessionStore
from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.exceptions import ConflictError
from hermes_sessions.store._rotations import MAX_ATTEMPTS

if TYPE_CHECKING:
    from collections.abc import Callable

    from hermes_sessions.testing import FrozenClock

LIN = SessionSource(platform="telegram", chat_id="1", user_id="1")


class Interloper:
    """A backend proxy that runs a competing write just before one call of a chosen method."""

    def __init__(self, inner: InMemoryBackend) -> None:
        self.inner = inner
        self.pending: dict[str, list[Callable[[], None]]] = {}

    def before(self, method: str, action: Callable[[], None]) -> None:
        """Run ``action`` once, right before the next call of ``method``."""
        self.pending.setdefault(method, []).append(action)

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        actions = self.pending.get(name)
        if not actions or not callable(target):
            return target

        def interfered(*args: Any, **kwargs: Any) -> Any:
            if actions:
                actions.pop(0)()
            return target(*args, **kwargs)

        return interfered


@pytest.fixture
def racing(clock: FrozenClock) -> tuple[SessionStore, SessionStore, Interloper]:
    """Our store on a racing backend, and a rival store writing to the same data."""
    inner = InMemoryBackend()
    proxy = Interloper(inner)
    resets = ResetPolicies(ResetPolicy(mode="idle", idle_minutes=30))
    ours = SessionStore(proxy, clock=clock, resets=resets)  # type: ignore[arg-type]
    rival = SessionStore(inner, clock=clock, resets=resets)
    return ours, rival, proxy


def test_first_contact_lost_to_another_process(racing):
    """If another writer creates the key's first session first, we join that session."""
    ours, rival, proxy = racing
    theirs: list[str] = []
    proxy.before("apply", lambda: theirs.append(rival.get_or_create(LIN).session_id))
    lookup = ours.get_or_create(LIN)
    assert lookup.session_id == theirs[0]
    assert not lookup.created
    assert len(ours.list_sessions().items) == 1


def test_reset_lost_to_another_process(racing, clock):
    """If another writer rotates an expired key first, we use its new session."""
    ours, rival, proxy = racing
    old = ours.get_or_create(LIN).session_id
    clock.advance(hours=1)
    theirs: list[str] = []
    proxy.before("apply", lambda: theirs.append(rival.get_or_create(LIN).session_id))
    lookup = ours.get_or_create(LIN)
    assert lookup.session_id == theirs[0] != old
    assert not lookup.created


@pytest.mark.parametrize(
    ("operation", "method"),
    [
        (lambda store, key: store.suspend(key), "put_entry"),
        (lambda store, key: store.reset(key), "apply"),
        (lambda store, key: store.branch(key), "apply"),
        (lambda store, key: store.resume(key, "old one"), "apply"),
    ],
    ids=["suspend", "reset", "branch", "resume"],
)
def test_key_operations_retry_after_a_concurrent_write(racing, operation, method):
    """Key operations that lose a compare-and-swap re-read the entry and succeed."""
    ours, rival, proxy = racing
    first = ours.get_or_create(LIN)
    key = first.entry.session_key
    ours.set_title(first.session_id, "old one")
    ours.reset(key)
    proxy.before(method, lambda: rival.touch(key) and rival.mark_resume_pending(key, "rival"))
    result = operation(ours, key)
    entry = ours.entry(key)
    # 1: first contact, 2: our reset, 3: the rival's write, 4: our retried write
    assert (first.entry.revision, entry.revision) == (1, 4)
    assert result.session_key == key


def test_erase_user_survives_a_concurrent_entry_write(racing):
    """Erasure re-reads an entry that moved on and still deletes it."""
    ours, rival, proxy = racing
    key = ours.get_or_create(LIN).entry.session_key
    proxy.before("delete_entry", lambda: rival.mark_resume_pending(key, "rival"))
    report = ours.erase_user(LIN.platform, "1")
    assert report.entries == (key,)
    assert ours.backend.get_entry(key) is None


def test_rebuild_routing_skips_keys_recreated_meanwhile(racing):
    """If another writer recreates an entry during a rebuild, the rebuild leaves it alone."""
    ours, rival, proxy = racing
    lookup = ours.get_or_create(LIN)
    entry = lookup.entry
    ours.backend.delete_entry(entry.session_key, expected_revision=entry.revision)
    proxy.before(
        "put_entry",
        lambda: rival.backend.put_entry(
            attrs.evolve(entry, suspended=True), expected_revision=None
        ),
    )
    assert ours.rebuild_routing() == 0
    assert ours.entry(entry.session_key).suspended


def test_a_branch_that_loses_every_race_names_the_revisions(racing):
    """After 16 lost races the branch raises ConflictError with the real revisions and count."""
    ours, rival, proxy = racing
    ours.get_or_create(LIN)
    key = ours.key_for(LIN)
    for _ in range(MAX_ATTEMPTS):
        proxy.before("apply", lambda: rival.reset(key))
    with pytest.raises(ConflictError) as info:
        ours.branch(key)
    final = rival.entry(key).revision
    assert info.value.attempts == MAX_ATTEMPTS
    assert (info.value.expected_revision, info.value.actual_revision) == (final - 1, final)
    assert f"expected revision {final - 1}, found revision {final}" in str(info.value)
    assert "16 times in a row" in str(info.value)
    assert "None" not in str(info.value)


def test_compression_renumbers_when_its_title_is_taken_meanwhile(racing):
    """Another writer takes the lineage's next title first: compression takes the one after."""
    ours, rival, proxy = racing
    session_id = ours.get_or_create(LIN).session_id
    ours.set_title(session_id, "Plans")
    other = rival.get_or_create(attrs.evolve(LIN, chat_id="2")).session_id
    proxy.before("apply", lambda: rival.set_title(other, "Plans #2"))
    child = ours.compress(session_id, [], holder="worker-1")
    assert (rival.session(other).title, child.title) == ("Plans #2", "Plans #3")
