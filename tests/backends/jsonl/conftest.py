"""Fixtures of the JSONL backend tests: a data directory and a backend opened on it."""

from __future__ import annotations

import pytest

from hermes_sessions.backends import JSONLBackend


@pytest.fixture
def directory(tmp_path):
    """The data directory of one test (not created yet)."""
    return tmp_path / "data"


@pytest.fixture
def backend(directory):
    """A JSONL backend on ``directory``, closed afterwards."""
    with JSONLBackend(directory) as opened:
        yield opened
