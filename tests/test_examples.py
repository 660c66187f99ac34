"""Every example script runs to completion and prints what it promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.py"))
EXPECTED = {
    "gateway.py": [
        "It is sunny, 24°C in Hangzhou right now.",
        "(window kept",
        'like "[Ada] hello"',
        "Started a fresh conversation: nothing was said here for 24h.",
        "(closed agent for session",
    ],
    "memory_tools.py": ["tools offered to the model", '"code": "blocked"', '"mode": "discover"'],
}


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda path: path.name)
def test_example_runs(script, tmp_path):
    """The example exits cleanly and its output shows what it demonstrates."""
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env={"HERMES_SESSIONS_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    for expected in EXPECTED.get(script.name, []):
        assert expected in result.stdout


def test_every_example_has_expectations():
    """Each example is listed with what its output must show."""
    assert {path.name for path in EXAMPLES} <= set(EXPECTED)
