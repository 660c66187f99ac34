"""The default home: environment override, platformdirs otherwise, nothing at import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hermes_sessions import default_home
from hermes_sessions.paths import HOME_ENV_VAR, memories_dir


def test_env_var_overrides_the_home(monkeypatch, tmp_path):
    """HERMES_SESSIONS_HOME names the home, with ``~`` expanded."""
    monkeypatch.setenv(HOME_ENV_VAR, str(tmp_path))
    assert default_home() == tmp_path
    monkeypatch.setenv(HOME_ENV_VAR, "~/hs")
    assert default_home() == Path.home() / "hs"


def test_platformdirs_without_the_env_var(monkeypatch, tmp_path):
    """Without the variable, the platform's user data directory is used."""
    monkeypatch.delenv(HOME_ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_home() == tmp_path / "hermes-sessions"


def test_memories_dir_is_under_the_home(tmp_path):
    """Memory files live in ``<home>/memories``."""
    assert memories_dir(tmp_path) == tmp_path / "memories"


def test_import_does_no_io(tmp_path):
    """Importing the package creates nothing and does not even load platformdirs."""
    home = tmp_path / "home"
    code = (
        "import sys, hermes_sessions; "
        "assert 'platformdirs' not in sys.modules, 'platformdirs imported eagerly'"
    )
    env = {"HERMES_SESSIONS_HOME": str(home), "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    assert not home.exists()
