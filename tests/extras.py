"""What this test run can reach besides the core: a PostgreSQL server and the frameworks.

The README's test command installs the ``dev`` extra only. The tests that need a PostgreSQL server
(``HERMES_SESSIONS_TEST_PG_DSN``) or the bot and agent frameworks (the ``frameworks`` extra) skip
without them, each with one reason saying how to get it, and the coverage gate then leaves out the
library modules that only those tests exercise (``tests/conftest.py``). CI has both, so there every
test runs and the whole package is gated.
"""

from __future__ import annotations

import ast
import importlib.util
from functools import cache

import pytest

from pg_support import SKIP_REASON as SERVER_REASON
from pg_support import test_dsn

FRAMEWORKS_REASON = (
    "needs the bot and agent frameworks the tests run against: "
    "pip install -e '.[frameworks]' (CI installs them)"
)

# The top-level import name of every framework of the ``frameworks`` extra.
FRAMEWORKS = frozenset(
    {
        "agents",
        "aiogram",
        "dingtalk_stream",
        "discord",
        "google.adk",
        "lark_oapi",
        "mcp",
        "slack_bolt",
        "slack_sdk",
        "telegram",
    }
)

# Library modules that import a framework (or the PostgreSQL driver and server) when loaded,
# with what they need: only the tests that have it can run them.
NEEDS = {
    "hermes_sessions.integrations.openai_agents": "agents",
    "hermes_sessions.integrations._adk_service": "google.adk",
    "hermes_sessions.integrations.mcp": "mcp",
    "hermes_sessions.cli._mcp": "mcp",
}

# Library code that only the tests needing a framework or the server exercise: left out of the
# coverage gate where they cannot run.
ONLY_EXERCISED_WITH = {
    "server": ("*/hermes_sessions/backends/postgres/*",),
    **{need: (f"*/{module.replace('.', '/')}.py",) for module, need in NEEDS.items()},
}


@cache
def has_framework(name: str) -> bool:
    """Whether the framework ``name`` (an import name of :data:`FRAMEWORKS`) is installed."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # the parent package of a dotted name is missing
        return False


def has_server() -> bool:
    """Whether a PostgreSQL server is named for the tests (and its driver installed)."""
    return test_dsn() is not None


def available(need: str) -> bool:
    """Whether ``need`` (``"server"`` or a framework's import name) is there."""
    return has_server() if need == "server" else has_framework(need)


def framework(name: str) -> object:
    """Import the framework ``name``, or skip the test saying how to install it."""
    if not has_framework(name):
        pytest.skip(FRAMEWORKS_REASON)
    return importlib.import_module(name)


def missing_for_module(module: str) -> str | None:
    """The framework a library module needs and this run lacks, if any."""
    need = NEEDS.get(module)
    return need if need is not None and not has_framework(need) else None


def missing_for_source(source: str) -> str | None:
    """The first framework that ``source`` needs and this run lacks, if any.

    A framework is needed when the Python source imports it, or a library module that needs it.
    """
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None and not node.level:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        for name in names:
            need = NEEDS.get(name) or next(
                (f for f in FRAMEWORKS if name == f or name.startswith(f + ".")), None
            )
            if need is not None and not has_framework(need):
                return need
    return None


def skip_reason(need: str) -> str:
    """The one reason a test that needs ``need`` gives when it skips."""
    return SERVER_REASON if need == "server" else FRAMEWORKS_REASON
