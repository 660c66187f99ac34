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
    "gateway_dingtalk.py": [
        "agent:main:dingtalk:group:cid_group:zhang ['今天谁值班？']",
        "ack 200 for frame3",
    ],
    "gateway_discord.py": [
        "NewMessage agent:main:discord:thread:1180000000000000200:1180000000000000300",
        "[('Nelly', 'crash on start, see the trace'), ('Sam', 'same here since 2.1')]",
        "Retract    agent:main:discord:group:",
        "search 'deploy' after the deletion: []",
    ],
    "gateway_feishu.py": [
        "NewMessage agent:main:feishu:group:oc_group:omt_1",
        "on_wang: 我也想知道  (reply to om_1)",
        "on_lin: 回滚到哪个版本",
    ],
    "gateway_slack.py": [
        "NewMessage agent:main:slack:dm:D024BE91L:1778547600.000100",
        "search 'third step': 1 hit(s)",
        "search 'third step' after the deletion: []",
    ],
    "gateway_telegram_aiogram.py": [
        "NewMessage agent:main:telegram:group:-1001234567890:42",
        "['is the freeze on?']",
        "search 'prod': ['42:7']",
        "search 'staging': []",
    ],
    "gateway_telegram_ptb.py": [
        "-> sendMessage: hello, this is a new conversation",
        "  Alice: release notes?\n  Bob: and the changelog",
        "DM after the edit and a redelivery: ['where did we leave the rollback?']",
        "search 'deploy': []",
    ],
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
