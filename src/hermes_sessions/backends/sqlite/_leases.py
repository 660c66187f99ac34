"""Statements on the ``leases`` table: exclusive, expiring claims on a named resource."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_sessions.backends.sqlite._rows import to_us

if TYPE_CHECKING:
    import sqlite3
    from datetime import datetime

__all__ = ["acquire", "release"]


def acquire(
    connection: sqlite3.Connection, resource: str, holder: str, *, until: datetime, now: datetime
) -> bool:
    """Take or renew ``holder``'s lease on ``resource`` until ``until``, unless another holds it."""
    row = connection.execute(
        "SELECT holder, expires_at FROM leases WHERE resource = ?", (resource,)
    ).fetchone()
    if row is not None and row[0] != holder and row[1] > to_us(now):
        return False
    connection.execute(
        "INSERT OR REPLACE INTO leases (resource, holder, expires_at) VALUES (?, ?, ?)",
        (resource, holder, to_us(until)),
    )
    return True


def release(connection: sqlite3.Connection, resource: str, holder: str) -> None:
    """Release ``holder``'s lease on ``resource`` (nothing if another holds it)."""
    connection.execute("DELETE FROM leases WHERE resource = ? AND holder = ?", (resource, holder))
