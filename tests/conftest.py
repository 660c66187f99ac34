"""Shared test configuration."""

from __future__ import annotations

from hypothesis import settings

# A deadline is a wall-clock limit, and these machines are noisy: never use one.
settings.register_profile("default", deadline=None, print_blob=True)
settings.load_profile("default")

pytest_plugins = ["pytester"]
