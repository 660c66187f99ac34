"""Every example script runs to completion and prints what it promises."""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from extras import FRAMEWORKS_REASON, missing_for_source
from hermes_sessions.backends import authoring
from hermes_sessions.protocols import EntryWrite, RotationPlan
from hermes_sessions.testing import BackendContract
from hermes_sessions.testing._support import T0, entry_for, record

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.py"))
EXPECTED = {
    "custom_backend.py": [
        "read back after reopening: 'hello'",
        "files: ['entries.json', 'sessions/",
    ],
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
    """The example's FileBackend, written from scratch over plain files, passes the whole suite."""

    def make_backend(self, directory):
        """A file backend on the test's fresh directory (reopening reaches the same data)."""
        return custom_backend.FileBackend(directory)


KEY = "agent:main:telegram:dm:1"


def _die_mid_commit(directory):
    """Apply a plan writing two files; the process dies after the journal and the first file."""
    written = []
    replace = authoring.replace_file

    def dying(path, data, **options):
        replace(path, data, **options)
        written.append(path)
        if len(written) == 2:
            os._exit(9)

    authoring.replace_file = dying
    backend = custom_backend.FileBackend(directory)
    write = EntryWrite(entry=entry_for(KEY, "s1"), expected_revision=None)
    backend.apply(RotationPlan(at=T0, create=record("s1"), entries=[write]))


def test_file_backend_finishes_a_commit_a_crash_cut_short(tmp_path):
    """A process killed mid-commit leaves the journal; the next call completes the commit."""
    process = multiprocessing.get_context("spawn").Process(target=_die_mid_commit, args=(tmp_path,))
    process.start()
    process.join()
    assert process.exitcode == 9
    assert (tmp_path / "journal.json").exists()
    assert not (tmp_path / "entries.json").exists()
    with custom_backend.FileBackend(tmp_path) as backend:
        entry = backend.get_entry(KEY)
        assert entry is not None
        assert entry.session_id == "s1"
        assert backend.get_session("s1") is not None
    assert not (tmp_path / "journal.json").exists()


def test_backends_page_walks_through_the_example_as_it_is():
    """docs/backends.md quotes the example verbatim and states its length in lines."""
    page = (EXAMPLES_DIR.parent / "docs" / "backends.md").read_text(encoding="utf-8")
    source = (EXAMPLES_DIR / "custom_backend.py").read_text(encoding="utf-8")
    excerpts = re.findall(
        r"^```py\n# examples/custom_backend.py\n(.*?)^```", page, re.MULTILINE | re.DOTALL
    )
    assert len(excerpts) >= 5
    for excerpt in excerpts:
        for part in excerpt.split("    ...\n"):
            assert part in source
    (stated,) = set(re.findall(r"(\d+) lines", page))
    assert int(stated) == len(source.splitlines())


def test_authoring_module_offers_every_protocol():
    """Everything ``hermes_sessions.protocols`` exports is importable from the authoring module."""
    from hermes_sessions import protocols  # noqa: PLC0415

    missing = set(protocols.__all__) - set(authoring.__all__)
    assert not missing, f"add {sorted(missing)} to hermes_sessions.backends.authoring"
    assert all(hasattr(authoring, name) for name in authoring.__all__)
