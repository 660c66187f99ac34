"""Fixtures the adapter tests share."""

from __future__ import annotations

import sys

import pytest


@pytest.fixture(scope="module", autouse=True)
def close_lark_loop():
    """Close the event loop ``import lark_oapi`` creates at import time, once a module ends."""
    yield
    loop = getattr(sys.modules.get("lark_oapi.ws.client"), "loop", None)
    if loop is not None and not loop.is_running() and not loop.is_closed():
        loop.close()
