"""Shared test configuration: Hypothesis settings and stores on every backend."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from extras import ONLY_EXERCISED_WITH, available, skip_reason
from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.backends.jsonl import JSONLBackend
from hermes_sessions.backends.sqlite import SQLiteBackend
from hermes_sessions.backends.sqlite import _connections as sqlite_connections
from hermes_sessions.store import SessionStore
from hermes_sessions.testing import FrozenClock
from pg_support import drop_schemas, open_pg, schema_prefix, test_dsn

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from hermes_sessions.protocols import Backend

pytest_plugins = ["pytester"]


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--stress``: run the reliability suite (tests/reliability) 20 times larger."""
    parser.addoption(
        "--stress",
        action="store_true",
        help="run the reliability suite 20x larger (more processes' operations, more kills)",
    )


def _missing() -> list[str]:
    """What this run lacks (``"server"``, framework import names), in a fixed order."""
    return sorted(need for need in ONLY_EXERCISED_WITH if not available(need))


def pytest_configure(config: pytest.Config) -> None:
    """Leave out of the coverage gate the code that only unrunnable tests exercise (issue 32).

    Without a PostgreSQL server (or a framework), the tests that need it skip, and the library
    code that only they run (``extras.ONLY_EXERCISED_WITH``) is not counted; everything else is
    gated as strictly as when they run. pytest-cov reports from the controlling process, whose
    ``Coverage`` objects the ``_cov`` plugin's controller holds (``cov``, the object pytest-cov's
    ``cov`` fixture gives, and under xdist ``combining_cov``).
    """
    controller = getattr(config.pluginmanager.getplugin("_cov"), "cov_controller", None)
    omitted = [pattern for need in _missing() for pattern in ONLY_EXERCISED_WITH[need]]
    # Under xdist the controller reports from a second object that combines the workers' data.
    for name in ("cov", "combining_cov"):
        coverage = getattr(controller, name, None)
        if coverage is not None and omitted:
            already = coverage.get_option("report:omit") or []
            coverage.set_option("report:omit", [*already, *omitted])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say once which tests could not run here, why, and what the coverage gate left out."""
    missing = _missing()
    if not missing or getattr(terminalreporter.config, "workerinput", None) is not None:
        return
    reasons = dict.fromkeys(skip_reason(need) for need in missing)
    terminalreporter.section("not run here")
    for reason in reasons:
        terminalreporter.write_line(f"skipped: {reason}")
    if getattr(terminalreporter.config.pluginmanager.getplugin("_cov"), "cov_controller", None):
        left_out = ", ".join(p for need in missing for p in ONLY_EXERCISED_WITH[need])
        terminalreporter.write_line(f"left out of the coverage gate: {left_out}")


# A deadline is a wall-clock limit, and these machines are noisy: never use one.
settings.register_profile("default", deadline=None, print_blob=True)
settings.load_profile("default")

# -- stores on every backend -----------------------------------------------------------------------


START = datetime(2026, 5, 12, 1, 0, tzinfo=UTC)  # 09:00 in Shanghai

BACKENDS: dict[str, Callable[[Path], Backend]] = {
    "memory": lambda _path: InMemoryBackend(),
    "sqlite": lambda path: SQLiteBackend(path / "state.db"),
    "jsonl": lambda path: JSONLBackend(path / "sessions"),
}
if test_dsn() is not None:  # the PostgreSQL server of CI (HERMES_SESSIONS_TEST_PG_DSN)
    BACKENDS["pg"] = open_pg


@pytest.fixture(scope="session", autouse=True)
def _postgres_schemas() -> Iterator[None]:
    """Drop every PostgreSQL schema this test session created, when it ends."""
    prefix = schema_prefix()
    yield
    if test_dsn() is not None:
        drop_schemas(prefix)


@pytest.fixture(params=sorted(BACKENDS))
def make_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Backend]:
    """A factory opening the parametrised backend on this test's data directory."""
    factory = BACKENDS[request.param]
    return lambda: factory(tmp_path / "data")


@pytest.fixture
def clock() -> FrozenClock:
    """A clock frozen at 2026-05-12 01:00 UTC."""
    return FrozenClock(START)


@pytest.fixture
def store(make_backend: Callable[[], Backend], clock: FrozenClock) -> Iterator[SessionStore]:
    """A session store on each backend, with a frozen clock."""
    with SessionStore(make_backend(), clock=clock) as opened:
        yield opened


@pytest.fixture
def commits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ``COMMIT`` of every SQLite write transaction, counted at the crash point after it."""
    seen: list[str] = []
    original = sqlite_connections.crashpoints.reached

    def count(point: str) -> None:
        if point == "sqlite.after_commit":
            seen.append(point)
        original(point)

    monkeypatch.setattr(sqlite_connections.crashpoints, "reached", count)
    return seen
