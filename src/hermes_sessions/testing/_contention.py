"""Contract: store commands racing on one key from several processes stay correct."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_sessions.models import SessionSource
from hermes_sessions.queries import SessionQuery
from hermes_sessions.store import SessionStore
from hermes_sessions.testing._support import ContractBase, run_threads, run_workers, say

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from hermes_sessions.protocols import Backend

SOURCE = SessionSource(platform="telegram", chat_id="c1", user_id="u1")
WORKERS = 8
ROUNDS = 15


def _key(store: SessionStore) -> str:
    return store.key_for(SOURCE)


def _branch_worker(
    factory: Callable[[Path], Backend], directory: Path, rounds: int, worker: int
) -> None:
    """Append to the key's current session, then branch it, ``rounds`` times."""
    with SessionStore(factory(directory)) as store:
        key = _key(store)
        for n in range(rounds):
            session_id = store.entry(key).session_id
            store.append(session_id, say(f"{worker}:{n}@{session_id}"))
            store.branch(key)


def _check_branches(backend: Backend, branches: int, appends: int) -> None:
    """Every branch made a child; each child's copied messages are a prefix of its parent's."""
    page = backend.list_sessions(SessionQuery(limit=None))
    records = {s.record.id: s.record for s in page.items}
    transcripts = {
        session_id: [str(m.content) for m in backend.get_messages(session_id)]
        for session_id in records
    }
    children = [r for r in records.values() if r.parent_session_id is not None]
    assert len(children) == branches
    originals = 0
    for child in children:
        mine = [c.endswith(f"@{child.id}") for c in transcripts[child.id]]
        copied = mine.index(True) if True in mine else len(mine)
        assert not any(mine[:copied]), child.id
        assert all(mine[copied:]), f"{child.id}: copies after its own messages"
        parent = transcripts[child.parent_session_id or ""]
        assert transcripts[child.id][:copied] == parent[:copied], child.id
    for session_id, contents in transcripts.items():
        originals += sum(c.endswith(f"@{session_id}") for c in contents)
    assert originals == appends


class ContentionContract(ContractBase):
    """``/branch`` racing appends and other branches on one key: every branch succeeds."""

    def test_threads_branching_one_key_all_succeed(self, backend: Backend) -> None:
        """Eight threads appending and branching on one key: no branch gives up."""
        store = SessionStore(backend)
        key = _key(store)
        store.get_or_create(SOURCE)
        failures: list[BaseException] = []

        def work(worker: int) -> None:
            try:
                for n in range(ROUNDS):
                    session_id = store.entry(key).session_id
                    store.append(session_id, say(f"{worker}:{n}@{session_id}"))
                    store.branch(key)
            except Exception as error:  # noqa: BLE001  # reported by the assertion below
                failures.append(error)

        run_threads(work, workers=WORKERS)
        assert failures == [], [f"{type(f).__name__}: {f}" for f in failures]
        _check_branches(backend, WORKERS * ROUNDS, WORKERS * ROUNDS)

    def test_processes_branching_one_key_all_succeed(
        self, multiprocess: Backend, data_dir: Path
    ) -> None:
        """Eight processes appending and branching on one key: every branch succeeds.

        Each child's copied messages are a prefix of its parent's transcript.
        """
        SessionStore(multiprocess).get_or_create(SOURCE)
        codes = run_workers(_branch_worker, self.make_backend, data_dir, ROUNDS, workers=WORKERS)
        assert codes == [0] * WORKERS
        _check_branches(multiprocess, WORKERS * ROUNDS, WORKERS * ROUNDS)
