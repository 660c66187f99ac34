"""Contract: the routing index (compare-and-swap entries, activity, lifecycle)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from hermes_sessions.exceptions import BackendClosedError, ConflictError, SessionNotFoundError
from hermes_sessions.models import SessionSource
from hermes_sessions.protocols import Backend, Capabilities
from hermes_sessions.testing._support import T0, ContractBase, entry_for, evolve, minutes, seed

KEY = "agent:main:telegram:dm:1"
OTHER = "agent:main:telegram:dm:2"


class RoutingContract(ContractBase):
    """Routing entries, compare-and-swap, activity, and the backend's lifecycle."""

    # -- lifecycle ---------------------------------------------------------------------------------

    def test_declares_capabilities(self, backend: Backend) -> None:
        """The backend says what it can do."""
        assert isinstance(backend.capabilities(), Capabilities)

    def test_is_a_backend(self, backend: Backend) -> None:
        """The backend satisfies the Backend protocol at run time."""
        assert isinstance(backend, Backend)

    def test_closed_backend_refuses_every_call(self, backend: Backend) -> None:
        """After close, reads and writes raise BackendClosedError."""
        seed(backend, "s1", KEY)
        backend.close()
        for call in (
            lambda: backend.get_entry(KEY),
            lambda: backend.get_session("s1"),
            backend.entries,
            lambda: backend.get_messages("s1"),
            lambda: backend.end_session("s1", "idle", at=T0),
        ):
            with pytest.raises(BackendClosedError):
                call()

    def test_close_is_idempotent(self, backend: Backend) -> None:
        """Closing twice is harmless."""
        backend.close()
        backend.close()

    def test_is_a_context_manager(self, backend: Backend) -> None:
        """Leaving a ``with`` block closes the backend."""
        with backend as entered:
            assert entered is backend
        with pytest.raises(BackendClosedError):
            backend.get_entry(KEY)

    # -- compare-and-swap --------------------------------------------------------------------------

    def test_missing_entry_is_none(self, backend: Backend) -> None:
        """Looking up an unknown key returns None."""
        assert backend.get_entry(KEY) is None

    def test_new_entry_gets_revision_one(self, backend: Backend) -> None:
        """A first write expecting no entry stores revision 1, whatever the entry said."""
        seed(backend, "s1")
        stored = backend.put_entry(entry_for(KEY, "s1", revision=41), expected_revision=None)
        assert stored.revision == 1
        assert backend.get_entry(KEY) == stored

    def test_creating_an_existing_entry_conflicts(self, backend: Backend) -> None:
        """Expecting no entry when one exists raises ConflictError with both revisions."""
        seed(backend, "s1", KEY)
        with pytest.raises(ConflictError) as info:
            backend.put_entry(entry_for(KEY, "s1"), expected_revision=None)
        assert (info.value.key, info.value.expected_revision) == (KEY, None)
        assert info.value.actual_revision == 1

    def test_matching_revision_updates(self, backend: Backend) -> None:
        """A write naming the current revision succeeds and bumps it."""
        seed(backend, "s1", KEY)
        seed(backend, "s2")
        stored = backend.put_entry(entry_for(KEY, "s2"), expected_revision=1)
        assert (stored.session_id, stored.revision) == ("s2", 2)

    def test_stale_revision_conflicts_and_writes_nothing(self, backend: Backend) -> None:
        """A write based on an old revision fails and leaves the entry as it was."""
        seed(backend, "s1", KEY)
        seed(backend, "s2")
        backend.put_entry(entry_for(KEY, "s1", suspended=True), expected_revision=1)
        with pytest.raises(ConflictError):
            backend.put_entry(entry_for(KEY, "s2"), expected_revision=1)
        entry = backend.get_entry(KEY)
        assert entry is not None
        assert (entry.session_id, entry.suspended, entry.revision) == ("s1", True, 2)

    def test_entry_must_point_at_an_existing_session(self, backend: Backend) -> None:
        """An entry naming an unknown session is refused: keys never dangle."""
        with pytest.raises(SessionNotFoundError):
            backend.put_entry(entry_for(KEY, "nowhere"), expected_revision=None)
        assert backend.get_entry(KEY) is None

    def test_delete_with_current_revision(self, backend: Backend) -> None:
        """Deleting with the current revision removes the entry."""
        seed(backend, "s1", KEY)
        backend.delete_entry(KEY, expected_revision=1)
        assert backend.get_entry(KEY) is None
        assert backend.entries(session_id="s1") == []

    def test_delete_with_stale_revision_or_missing_conflicts(self, backend: Backend) -> None:
        """Deleting with a stale revision, or a missing entry, raises ConflictError."""
        seed(backend, "s1", KEY)
        with pytest.raises(ConflictError):
            backend.delete_entry(KEY, expected_revision=7)
        with pytest.raises(ConflictError):
            backend.delete_entry(OTHER, expected_revision=1)
        assert backend.get_entry(KEY) is not None

    def test_entry_fields_round_trip(self, backend: Backend) -> None:
        """Every field of an entry is stored as given (apart from the revision)."""
        seed(backend, "s1")
        origin = SessionSource(
            platform="feishu",
            chat_type="group",
            chat_id="oc_1",
            user_id="ou_1",
            user_id_alt="on_1",
            thread_id="t1",
            chat_name="团队",
            user_name="林晓",
            scope_id="tenant",
        )
        entry = evolve(
            entry_for(KEY, "s1", at=minutes(1)),
            origin=origin,
            display_name="林晓 @ 团队",
            platform="feishu",
            chat_type="group",
            suspended=True,
            resume_pending=True,
            resume_reason="restart",
            last_prompt_tokens=1234,
            updated_at=minutes(2),
            pending_reset="retention",
        )
        stored = backend.put_entry(entry, expected_revision=None)
        assert stored == evolve(entry, revision=1)
        assert backend.get_entry(KEY) == stored

    def test_entries_lists_in_key_order(self, backend: Backend) -> None:
        """entries() returns every entry sorted by key."""
        seed(backend, "s1", OTHER)
        seed(backend, "s2", KEY)
        assert [e.session_key for e in backend.entries()] == sorted([KEY, OTHER])

    def test_entries_of_a_session(self, backend: Backend) -> None:
        """entries(session_id=...) returns exactly the keys pointing at that session."""
        seed(backend, "s1", KEY)
        backend.put_entry(entry_for(OTHER, "s1"), expected_revision=None)
        seed(backend, "s2", "agent:main:x:dm:3")
        assert [e.session_key for e in backend.entries(session_id="s1")] == [KEY, OTHER]
        assert backend.entries(session_id="unknown") == []

    def test_concurrent_compare_and_swap_has_one_winner(self, backend: Backend) -> None:
        """Threads racing to update from the same revision: exactly one succeeds."""
        seed(backend, "s1", KEY)
        for n in range(8):
            seed(backend, f"t{n}")
        barrier = threading.Barrier(8)
        wins: list[str] = []

        def race(n: int) -> None:
            barrier.wait()
            try:
                backend.put_entry(entry_for(KEY, f"t{n}"), expected_revision=1)
            except ConflictError:
                return
            wins.append(f"t{n}")

        threads = [threading.Thread(target=race, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        entry = backend.get_entry(KEY)
        assert entry is not None
        assert len(wins) == 1
        assert (entry.session_id, entry.revision) == (wins[0], 2)

    # -- activity ----------------------------------------------------------------------------------

    def test_activity_moves_forward_only(self, backend: Backend) -> None:
        """Recording activity advances updated_at but never moves it back."""
        seed(backend, "s1", KEY)
        backend.record_activity(KEY, minutes(10))
        backend.record_activity(KEY, minutes(5))
        entry = backend.get_entry(KEY)
        assert entry is not None
        assert entry.updated_at == minutes(10)

    def test_activity_keeps_the_revision(self, backend: Backend) -> None:
        """Activity does not bump the revision, so it never breaks a concurrent CAS."""
        seed(backend, "s1", KEY)
        backend.record_activity(KEY, minutes(10), last_prompt_tokens=900)
        entry = backend.get_entry(KEY)
        assert entry is not None
        assert (entry.revision, entry.last_prompt_tokens) == (1, 900)
        backend.put_entry(evolve(entry, suspended=True), expected_revision=1)

    def test_activity_on_a_missing_key(self, backend: Backend) -> None:
        """Recording activity for an unknown key returns None and creates nothing."""
        assert backend.record_activity(KEY, T0) is None
        assert backend.get_entry(KEY) is None

    def test_activity_returns_the_entry(self, backend: Backend) -> None:
        """record_activity returns the entry as stored after the update."""
        seed(backend, "s1", KEY)
        entry = backend.record_activity(KEY, T0 + timedelta(hours=1))
        assert entry == backend.get_entry(KEY)
