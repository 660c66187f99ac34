"""The reliability suite: every test here is marked ``reliability`` (``-m reliability``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from reliability_support import STRESS_FACTOR


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test of this directory ``reliability`` (and ``slow``: real processes)."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.reliability)
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def scale(request: pytest.FixtureRequest) -> int:
    """How many times larger than in CI this run is (``--stress``: 20)."""
    return STRESS_FACTOR if request.config.getoption("--stress") else 1
