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


def test_demo_command_runs(capsys):
    """``demo`` runs and says what it does."""
    assert main(["demo"]) == 0
    assert "demo" in capsys.readouterr().out
