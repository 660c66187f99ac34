"""Contract: a title is unique per owner, enforced in the write that stores it."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from hermes_sessions.exceptions import TitleConflictError
from hermes_sessions.protocols import RotationPlan
from hermes_sessions.testing._support import (
    T0,
    ContractBase,
    record,
    run_threads,
    run_workers,
    seed,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from hermes_sessions.protocols import Backend

RACERS = 8


def _title_worker(factory: Callable[[Path], Backend], directory: Path, worker: int) -> None:
    """Try to give session ``s<worker>`` the shared title; exit 0 if stored, 3 if refused."""
    with factory(directory) as backend:
        try:
            backend.update_session(f"s{worker}", values={"title": "Plans"})
        except TitleConflictError:
            raise SystemExit(3) from None


def _holders(backend: Backend) -> list[str]:
    found = [backend.get_session(f"s{n}") for n in range(RACERS)]
    return [r.id for r in found if r is not None and r.title is not None]


class TitleContract(ContractBase):
    """Two sessions of one owner never hold one title (compared case- and NFC-insensitively)."""

    def test_a_title_held_by_another_session_of_the_owner_is_refused(
        self, backend: Backend
    ) -> None:
        """update_session and apply(create=...) refuse a clash; other owners are free."""
        seed(backend, "s1", title="Café")
        seed(backend, "s2")
        with pytest.raises(TitleConflictError) as info:
            backend.update_session("s2", values={"title": "CAFE\u0301"})
        assert info.value.other_session_id == "s1"
        with pytest.raises(TitleConflictError):
            backend.apply(RotationPlan(at=T0, create=record("s3", title="café")))
        assert backend.get_session("s3") is None
        seed(backend, "s4", title="Café", user_id="u2")
        backend.update_session("s1", values={"title": "Café"})  # its own title again
        backend.update_session("s1", values={"title": None})
        backend.update_session("s2", values={"title": "café"})

    def test_threads_racing_for_one_title_one_wins(self, backend: Backend) -> None:
        """Eight threads setting one title on eight sessions of one owner: exactly one wins."""
        for n in range(RACERS):
            seed(backend, f"s{n}")
        barrier = threading.Barrier(RACERS)
        refused: list[int] = []

        def work(worker: int) -> None:
            barrier.wait()
            try:
                backend.update_session(f"s{worker}", values={"title": "Plans"})
            except TitleConflictError:
                refused.append(worker)

        run_threads(work, workers=RACERS)
        assert len(_holders(backend)) == 1
        assert len(refused) == RACERS - 1

    def test_processes_racing_for_one_title_one_wins(
        self, multiprocess: Backend, data_dir: Path
    ) -> None:
        """Eight processes setting one title on eight sessions of one owner: exactly one wins."""
        for n in range(RACERS):
            seed(multiprocess, f"s{n}")
        codes = run_workers(_title_worker, self.make_backend, data_dir, workers=RACERS)
        assert (codes.count(0), codes.count(3)) == (1, RACERS - 1)
        assert len(_holders(multiprocess)) == 1
