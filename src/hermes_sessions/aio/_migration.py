"""The async twin of :meth:`SessionStore.migrate_keys` (run on the store's executor)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from hermes_sessions.aio._store import AsyncSessionStore
    from hermes_sessions.keys import KeyPolicy
    from hermes_sessions.models import SessionSource
    from hermes_sessions.store import Collisions, KeyMigrationReport

__all__ = ["migrate_keys"]


async def migrate_keys(
    astore: AsyncSessionStore,
    old_policy: KeyPolicy,
    new_policy: KeyPolicy,
    *,
    dry_run: bool = True,
    remap: Callable[[SessionSource], SessionSource] | None = None,
    collisions: Collisions = "merge",
) -> KeyMigrationReport:
    """Async :meth:`SessionStore.migrate_keys` (a dry run by default).

    .. versionadded:: 0.1.0
    """
    return await astore._run(  # noqa: SLF001  # the store's own executor, as its methods use
        astore.store.migrate_keys,
        old_policy,
        new_policy,
        dry_run=dry_run,
        remap=remap,
        collisions=collisions,
    )
