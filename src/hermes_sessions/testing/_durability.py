"""Contract: persistence, private files and several processes (where they apply)."""

from __future__ import annotations

import multiprocessing
from typing import TYPE_CHECKING

from hermes_sessions.exceptions import ConflictError
from hermes_sessions.protocols import Backend, EntryWrite, RotationPlan
from hermes_sessions.testing._support import (
    T0,
    ContractBase,
    entry_for,
    minutes,
    private_mode_problems,
    record,
    run_workers,
    say,
    seed,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

KEY = "agent:main:telegram:dm:1"


def _append_worker(
    factory: Callable[[Path], Backend], directory: Path, count: int, worker: int
) -> None:
    with factory(directory) as backend:
        for n in range(count):
            backend.append_messages(
                "shared", [say(f"{worker}:{n}", platform_message_id=f"{worker}:{n}")]
            )


def _contact_worker(factory: Callable[[Path], Backend], directory: Path, worker: int) -> bool:
    with factory(directory) as backend:
        plan = RotationPlan(
            at=T0,
            create=record(f"p{worker}"),
            entries=[EntryWrite(entry=entry_for(KEY, f"p{worker}"), expected_revision=None)],
        )
        try:
            backend.apply(plan)
        except ConflictError:
            return False
        return True


class DurabilityContract(ContractBase):
    """Persistent backends keep everything across reopen; multi-process ones share safely."""

    def test_everything_survives_reopening(self, reopen: Callable[[], Backend]) -> None:
        """Entries, records, messages, ends and soft deletes are all there after reopening."""
        first = reopen()
        seed(first, "s1", KEY, say("hello", platform_message_id="m1"), title="标题")
        first.record_activity(KEY, minutes(3))
        (extra,) = first.append_messages("s1", [say("gone")])
        first.set_active("s1", [extra.id or 0], active=False)
        seed(first, "s2")
        first.end_session("s2", "idle", at=minutes(4))
        expected = (
            first.get_entry(KEY),
            first.get_session("s1"),
            first.get_session("s2"),
            first.get_messages("s1", include_inactive=True),
        )
        second = reopen()
        assert (
            second.get_entry(KEY),
            second.get_session("s1"),
            second.get_session("s2"),
            second.get_messages("s1", include_inactive=True),
        ) == expected
        (again,) = second.append_messages("s1", [say("hello", platform_message_id="m1")])
        assert again == expected[3][0]

    def test_ids_keep_increasing_after_reopening(self, reopen: Callable[[], Backend]) -> None:
        """Message ids continue above the old ones after a reopen."""
        first = reopen()
        seed(first, "s1")
        before = first.append_messages("s1", [say("a"), say("b")])
        second = reopen()
        (after,) = second.append_messages("s1", [say("c")])
        assert (after.id or 0) > max(m.id or 0 for m in before)

    def test_files_are_private(self, reopen: Callable[[], Backend], data_dir: Path) -> None:
        """Files and directories the backend creates are readable by their owner only."""
        backend = reopen()
        seed(backend, "s1", KEY, say("secret"))
        assert private_mode_problems(data_dir) == []

    def test_processes_appending_lose_nothing(self, multiprocess: Backend, data_dir: Path) -> None:
        """Four processes appending to one session: every message present exactly once."""
        seed(multiprocess, "shared")
        assert run_workers(_append_worker, self.make_backend, data_dir, 25) == [0, 0, 0, 0]
        contents = sorted(str(m.content) for m in multiprocess.get_messages("shared"))
        assert contents == sorted(f"{w}:{n}" for w in range(4) for n in range(25))
        stored = multiprocess.get_session("shared")
        assert stored is not None
        assert stored.message_count == 100

    def test_processes_racing_first_contact_make_one_session(
        self, multiprocess: Backend, data_dir: Path
    ) -> None:
        """Processes racing to create a key's first session: exactly one plan applies."""
        context = multiprocessing.get_context("spawn")
        with context.Pool(4) as pool:
            results = pool.starmap(
                _contact_worker, [(self.make_backend, data_dir, w) for w in range(4)]
            )
        assert results.count(True) == 1
        entry = multiprocess.get_entry(KEY)
        assert entry is not None
        winner = results.index(True)
        assert entry.session_id == f"p{winner}"
        assert all(multiprocess.get_session(f"p{w}") is None for w in range(4) if w != winner)
