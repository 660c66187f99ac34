"""The async store's coroutine callbacks, run on its event loop from the worker threads.

``on_rotate`` coroutines start as tasks after the rotation (``aclose`` waits for them);
``before_rotate`` coroutines are waited for by the rotating worker thread, so the rotation goes
ahead only once they finished. What they raise is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

__all__ = ["LoopCallbacks"]

logger = logging.getLogger("hermes_sessions.aio._store")

Coroutine = Callable[[Any], Awaitable[None]]


@attrs.define(eq=False)
class LoopCallbacks:
    """The loop the async store runs on, and the callback tasks still running there."""

    loop: asyncio.AbstractEventLoop | None = None
    tasks: set[asyncio.Future[None]] = attrs.field(factory=set)

    def capture(self) -> None:
        """Remember the running loop, if this is called from one."""
        with contextlib.suppress(RuntimeError):  # registered outside a running loop
            self.loop = asyncio.get_running_loop()

    def _usable(self, hook: str, callback: object) -> asyncio.AbstractEventLoop | None:
        loop = self.loop
        if loop is None or loop.is_closed():
            logger.warning("%s coroutine %r dropped: no running event loop", hook, callback)
            return None
        return loop

    def later(self, callback: Coroutine, hook: str) -> Callable[[Any], None]:
        """A plain callback starting ``callback`` as a task on the loop."""

        def on_loop(event: object) -> None:
            loop = self._usable(hook, callback)
            if loop is not None:
                loop.call_soon_threadsafe(self.start, callback, event)

        return on_loop

    def waited(self, callback: Coroutine, hook: str) -> Callable[[Any], None]:
        """A plain callback running ``callback`` on the loop and waiting for it to finish.

        It raises what the coroutine raised. Called on the loop's own thread, which cannot
        wait, it starts a task instead and warns.
        """

        def wait_on_loop(event: object) -> None:
            loop = self._usable(hook, callback)
            if loop is None:
                return
            try:
                on_loop_thread = asyncio.get_running_loop() is loop
            except RuntimeError:
                on_loop_thread = False
            if on_loop_thread:
                logger.warning(
                    "%s coroutine %r started without waiting: the store ran on the event "
                    "loop's thread (use the AsyncSessionStore's coroutines)",
                    hook,
                    callback,
                )
                self.start(callback, event)
                return
            asyncio.run_coroutine_threadsafe(_awaited(callback, event), loop).result()

        return wait_on_loop

    def start(self, callback: Coroutine, event: object) -> None:
        """Start ``callback(event)`` as a task on the running loop, logging what it raises."""
        task: asyncio.Future[None] = asyncio.ensure_future(callback(event))
        self.tasks.add(task)
        task.add_done_callback(functools.partial(self._done, callback, event))

    def _done(self, callback: object, event: object, task: asyncio.Future[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error(
                "rotation callback %r failed for %s", callback, event, exc_info=task.exception()
            )

    async def drain(self) -> None:
        """Wait for the callback tasks still running."""
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)


async def _awaited(callback: Coroutine, event: object) -> None:
    await callback(event)
