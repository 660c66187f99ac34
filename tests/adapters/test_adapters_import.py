"""Importing an adapter imports no bot framework."""

from __future__ import annotations

import subprocess
import sys

import pytest

from extras import FRAMEWORKS_REASON

FRAMEWORKS = {
    "aiogram",
    "aiohttp",
    "dingtalk_stream",
    "discord",
    "lark_oapi",
    "pydantic",
    "slack_bolt",
    "slack_sdk",
    "telegram",
}
MODULES = ["dingtalk", "discord", "feishu", "slack", "telegram"]


def imported_modules(statement):
    """Top-level names of every module ``python -X importtime`` reports for ``statement``."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement],
        capture_output=True,
        text=True,
        check=True,
    )
    names = set()
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    assert "hermes_sessions" in names
    return names


@pytest.mark.parametrize("module", MODULES)
def test_an_adapter_imports_no_framework(module):
    """``python -X importtime -c 'import hermes_sessions.adapters.<platform>'`` shows none."""
    names = imported_modules(f"import hermes_sessions.adapters.{module}")
    assert not FRAMEWORKS & names


def test_the_frameworks_are_visible_to_the_check():
    """The check would notice: importing a framework shows up in the same report."""
    pytest.importorskip("slack_sdk", reason=FRAMEWORKS_REASON)
    names = imported_modules("import hermes_sessions, slack_sdk")
    assert "slack_sdk" in names
