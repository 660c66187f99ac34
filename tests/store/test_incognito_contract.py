"""The lane router is transparent: with no incognito lane in play it passes the backend suite."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.store import IncognitoPolicy, IncognitoRouter
from hermes_sessions.testing import BackendContract

if TYPE_CHECKING:
    from pathlib import Path


class TestIncognitoRouter(BackendContract):
    """A router over the in-memory backend; its policy names no key the suite uses."""

    def make_backend(self, directory: Path) -> IncognitoRouter:
        """A router whose every call goes to the persistent side."""
        del directory
        policy = IncognitoPolicy(keys={"agent:main:x:dm:ghost"})
        return IncognitoRouter.over(InMemoryBackend(), policy)
