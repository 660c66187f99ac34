"""The command line entry point."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hermes_sessions import __version__
from hermes_sessions.cli import main


def test_version(capsys):
    """``--version`` prints the package version."""
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert __version__ in capsys.readouterr().out


def test_no_command_prints_help(capsys):
    """Without a command the help text is shown."""
    assert main([]) == 0
    assert "usage: hermes-sessions" in capsys.readouterr().out


def test_module_entry_point():
    """``python -m hermes_sessions`` runs the same command line."""
    result = subprocess.run(
        [sys.executable, "-m", "hermes_sessions", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert __version__ in result.stdout


def test_demo_walkthrough(capsys, tmp_path):
    """The demo plays every step of the script and shows isolation, resets and searches."""
    assert main(["demo", "--backend", "memory", "--home", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for expected in (
        "agent:main:feishu:group:oc_team:ou_alice",
        "agent:main:feishu:group:oc_team:ou_bob",
        "[same session]",
        "previous one ended: idle",
        "/new kubernetes 升级",
        "/resume staging 排查",
        "/undo removed 2 message(s)",
        "search '端': 2 hit(s)",
        "search '端口': 2 hit(s)",
        "search '慢查询': 2 hit(s)",
        ">>>docker<<< >>>compose<<<",
        "Nothing was kept",
    ):
        assert expected in out, expected


def test_demo_on_sqlite_keeps_its_data(capsys, tmp_path):
    """The default demo writes a SQLite store under --home and says where it is."""
    assert main(["demo", "--home", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "sqlite store" in out
    assert "state.db" in out
    assert (tmp_path / "state.db").exists()


def test_demo_refuses_a_used_home(capsys, tmp_path):
    """The demo never writes into a directory that already holds something."""
    (tmp_path / "keep.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(SystemExit) as info:
        main(["demo", "--home", str(tmp_path)])
    assert info.value.code == 2
    assert "not empty" in capsys.readouterr().err


def test_demo_needs_no_test_dependencies(tmp_path):
    """The README's first command installs without extras: the demo must not import pytest."""
    code = (
        "import sys; sys.modules['pytest'] = None; "
        "from hermes_sessions.cli import main; "
        f"raise SystemExit(main(['demo', '--home', {str(tmp_path / 'home')!r}]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "The data is in" in result.stdout
