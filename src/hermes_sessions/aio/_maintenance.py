"""The retention schedule of :meth:`AsyncSessionStore.start_maintenance`.

One task per store runs a retention pass, hands its report to ``on_report``, then waits
``every`` before the next one, until it is cancelled (``aclose`` does). A failing pass is logged
and retried after the interval; it never ends the schedule.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from hermes_sessions.exceptions import InvalidArgumentError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from hermes_sessions.store import RetentionPolicy, RetentionReport

__all__ = ["check_schedule", "run_schedule"]

logger = logging.getLogger(__name__)

_sleep = asyncio.sleep
"""How the schedule waits between passes (the tests drive it through this)."""


def check_schedule(
    every: timedelta, policy: RetentionPolicy | None, running: asyncio.Task[None] | None
) -> None:
    """Refuse a schedule without a positive interval or a policy, or beside a running one."""
    if every <= timedelta(0):
        raise InvalidArgumentError(
            f"start_maintenance(every) must be a positive timedelta, got {every}"
        )
    if policy is None:
        raise InvalidArgumentError(
            "start_maintenance needs a policy, or a store opened with retention="
        )
    if running is not None and not running.done():
        raise RuntimeError("maintenance already runs on this store; cancel its task first")


async def run_schedule(
    run_pass: Callable[[], Awaitable[RetentionReport]],
    every: timedelta,
    on_report: Callable[[RetentionReport], object] | None,
) -> None:
    """Run ``run_pass`` now and then every ``every``, until cancelled."""
    while True:
        try:
            report = await run_pass()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("scheduled retention pass failed; the next one runs in %s", every)
        else:
            logger.info(
                "retention removed %d session(s), about %d bytes",
                len(report.removed),
                report.bytes,
            )
            if on_report is not None:
                try:
                    on_report(report)
                except Exception:
                    logger.exception("retention on_report callback %r failed", on_report)
        await _sleep(every.total_seconds())
