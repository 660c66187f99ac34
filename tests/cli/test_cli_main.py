"""The command line entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


def _hints(output: str) -> list[str]:
    """The command lines the demo suggests at its end."""
    tail = output.split("Try the command line on it:\n", 1)[1]
    return [line.strip() for line in tail.splitlines() if line.strip()]


@pytest.mark.parametrize("started", ["script", "module"])
def test_demo_hints_paste_as_they_are(tmp_path, started):
    """Each command the demo suggests runs as printed, with the program off PATH (issue 32)."""
    script = Path(sys.executable).with_name("hermes-sessions")
    if started == "script" and not script.exists():
        pytest.skip("the hermes-sessions script is not installed beside this interpreter")
    program = [str(script)] if started == "script" else [sys.executable, "-m", "hermes_sessions"]
    environment = {**os.environ, "PATH": "/usr/bin:/bin"}  # not the venv: as after the README
    home = tmp_path / "demo home"  # a space: the hints must quote
    result = subprocess.run(
        [*program, "demo", "--home", str(home)],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
        cwd=tmp_path,
    )
    hints = _hints(result.stdout)
    assert len(hints) == 3
    for hint in hints:
        assert not hint.startswith("hermes-sessions ")  # not on PATH: the bare name would fail
        ran = subprocess.run(
            ["/bin/sh", "-c", hint],
            check=False,
            capture_output=True,
            text=True,
            env=environment,
            cwd=tmp_path,
        )
        assert ran.returncode == 0, (hint, ran.stderr)
        assert ran.stdout


def test_demo_hints_use_the_bare_name_when_on_path(tmp_path):
    """When the shell finds the program on PATH, the hints use its bare name."""
    script = Path(sys.executable).with_name("hermes-sessions")
    if not script.exists():
        pytest.skip("the hermes-sessions script is not installed beside this interpreter")
    environment = {**os.environ, "PATH": f"{script.parent}:/usr/bin:/bin"}
    result = subprocess.run(
        ["hermes-sessions", "demo", "--home", str(tmp_path / "home")],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
    )
    assert all(hint.startswith("hermes-sessions --home ") for hint in _hints(result.stdout))
