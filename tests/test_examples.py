"""Every example script runs to completion and prints what it promises."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from extras import FRAMEWORKS_REASON, missing_for_source
from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.testing import BackendContract

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.py"))
EXPECTED = {
    "custom_backend.py": ["satisfies Backend: True", "'append_messages': 1", "'apply': 1"],
    "migrate_from_hermes.py": [
        "imported sessions: ['20260512_092000_d3553b7a'], keys: ['agent:main:telegram:dm:42']",
        "memory entries: 1, problems: []",
        "transcript: ['端口冲突了', '先停旧容器']",
        "second import adds: []",
    ],
    "quickstart.py": [
        "agent:main:telegram:dm:42",
        "redelivery: the model is not called again",
        "messages stored: 2",
        ">>>port<<< 8443",
    ],
    "search_cjk.py": [
        "'书'",
        "['飞书机器人今天部署好了']",
        "['東京のサーバーを再起動しました']",
        "'docker OR podman -helm'     -> ['We deploy with docker compose on Friday']",
        "a hostile query never raises: []",
    ],
    "gateway.py": [
        "It is sunny, 24°C in Hangzhou right now.",
        "(window kept",
        'like "[Ada] hello"',
        "Started a fresh conversation: nothing was said here for 24h.",
        "(a redelivery: answered already, nothing to do)",
        "(closed agent for session",
    ],
    "openai_agents_session.py": [
        "turn 2: You asked about the staging port.",
        "the model saw 5 items on turn 2",
        "6 messages, 1 tool call",
        "after clear_session: []",
        "old session ended: session_reset",
    ],
    "adk_session.py": [
        "agent: You asked about the staging port.",
        "the model saw 5 contents on turn 2",
        "events stored: 6",
        "state: {'app:region': 'eu', 'user:language': 'zh'}",
        "user state: {'language': 'zh'}",
        "search 'staging': ['assistant', 'user']",
        "after delete: None",
    ],
    "mcp_server.py": [
        "tools: ['session_search', 'memory']",
        "search '部署': ['staging >>>部署<<< uses port 8443']",
        "memory add: True",
        "resources: 1",
    ],
    "memory_tools.py": ["tools offered to the model", '"code": "blocked"', '"mode": "discover"'],
    "gateway_dingtalk.py": [
        "agent:main:dingtalk:group:cid_group:zhang ['今天谁值班？']",
        "ack 200 for frame3",
    ],
    "gateway_discord.py": [
        "NewMessage agent:main:discord:thread:1180000000000000200:thread:1180000000000000300",
        "[('Nelly', 'crash on start, see the trace'), ('Sam', 'same here since 2.1')]",
        "Retract    agent:main:discord:group:",
        "search 'deploy' after the deletion: []",
    ],
    "gateway_feishu.py": [
        "NewMessage agent:main:feishu:group:oc_group:thread:omt_1",
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
    if missing_for_source(script.read_text(encoding="utf-8")) is not None:
        pytest.skip(FRAMEWORKS_REASON)
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


def _load_example(name):
    """Import an example script as a module, registered so its classes pickle by name."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES_DIR / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


custom_backend = _load_example("custom_backend")


class TestCustomBackendExample(BackendContract):
    """The example's CountingBackend around the in-memory backend passes the conformance suite."""

    def make_backend(self, directory):
        """A counting wrapper around a fresh in-memory backend."""
        del directory
        return custom_backend.CountingBackend(InMemoryBackend())


def test_counting_backend_counts_only_writes():
    """Reads pass through uncounted; each write method call is counted once."""
    backend = custom_backend.CountingBackend(InMemoryBackend())
    assert backend.get_entry("agent:main:cli:dm:x") is None
    assert not backend.writes
    backend.delete_session("missing")
    assert backend.writes == {"delete_session": 1}
