"""Key migration on SQLite: a pass against reading what it reads.

A fresh SQLite store holds ``groups`` Feishu groups with four members each (members isolated,
so one key per member) and a DM per member; the migration turns group isolation off, so every
group's four keys collide and merge, and the DMs stay. Measured, on fresh copies of the store:

* the baseline: reading everything a pass reads (``backend.entries()`` and every record);
* ``migrate_keys(..., dry_run=True)``: reading plus planning;
* ``migrate_keys(..., dry_run=False)``: reading, planning and the one transaction that writes.

The ratios (baseline seconds / pass seconds) say how much a pass costs beyond its reads.

    python benchmarks/key_migration.py --quick   # 125 groups, 1,000 keys
    python benchmarks/key_migration.py           # 2,500 groups, 20,000 keys
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from hermes_sessions import KeyPolicy, SessionSource, SessionStore
from hermes_sessions.backends import SQLiteBackend
from hermes_sessions.queries import SessionQuery
from hermes_sessions.testing import FrozenClock

MEMBERS = 4


def build(path: Path, groups: int) -> None:
    """The store: every member of every group has a group key and a DM key.

    Built with ``durability="normal"`` (no fsync per commit) so setting up stays quick; the
    timed passes use the default, ``full``.
    """
    clock = FrozenClock()
    with SessionStore(SQLiteBackend(path, durability="normal"), clock=clock) as store:
        for group in range(groups):
            for member in range(MEMBERS):
                clock.advance(seconds=1)
                user = f"ou_{group}_{member}"
                chat = f"oc_{group}"
                store.get_or_create(
                    SessionSource(platform="feishu", chat_type="group", chat_id=chat, user_id=user)
                )
                store.get_or_create(SessionSource(platform="feishu", chat_id=user, user_id=user))


def timed_read(path: Path) -> float:
    """Seconds to read every entry and record, as a pass does."""
    with SQLiteBackend(path) as backend:
        started = time.perf_counter()
        backend.entries()
        backend.list_sessions(SessionQuery(limit=None))
        return time.perf_counter() - started


def timed_pass(path: Path, *, dry_run: bool) -> tuple[float, int]:
    """Seconds of one migration pass, and how many keys it moved."""
    with SessionStore(SQLiteBackend(path), clock=FrozenClock()) as store:
        started = time.perf_counter()
        report = store.migrate_keys(
            KeyPolicy(), KeyPolicy(group_sessions_per_user=False), dry_run=dry_run
        )
        return time.perf_counter() - started, len(report.moved)


def main() -> None:
    """Build the store once, then time each side on a fresh copy of it (best of two)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small store (CI)")
    groups = 125 if parser.parse_args().quick else 2500
    with tempfile.TemporaryDirectory() as directory:
        original = Path(directory) / "original.db"
        build(original, groups)

        def fresh(name: str) -> Path:
            copy = Path(directory) / f"{name}.db"
            shutil.copyfile(original, copy)
            return copy

        baseline = min(timed_read(fresh(f"read{n}")) for n in range(2))
        dry = min(timed_pass(fresh(f"dry{n}"), dry_run=True)[0] for n in range(2))
        real_runs = [timed_pass(fresh(f"real{n}"), dry_run=False) for n in range(2)]
        real = min(seconds for seconds, _ in real_runs)
        moved = real_runs[0][1]
    keys = groups * MEMBERS * 2
    print(f"store: {keys} keys, {moved} moved by the pass (groups of {MEMBERS} merged)")
    print(f"read everything: {baseline * 1000:.1f} ms")
    print(f"dry run:         {dry * 1000:.1f} ms   ratio {baseline / dry:.2f}")
    print(f"real pass:       {real * 1000:.1f} ms   ratio {baseline / real:.2f}")


if __name__ == "__main__":
    main()
