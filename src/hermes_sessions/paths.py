"""Where hermes-sessions keeps its data by default.

The default home is ``$HERMES_SESSIONS_HOME`` if set, else the user data directory that
platformdirs picks for ``hermes-sessions`` (``~/.local/share/hermes-sessions`` on Linux). Nothing
is resolved or created at import time: these are functions, called when a store is opened.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

__all__ = ["HOME_ENV_VAR", "default_home", "memories_dir"]

HOME_ENV_VAR: Final = "HERMES_SESSIONS_HOME"


def default_home() -> Path:
    """Return the default data directory (not created here)."""
    configured = os.environ.get(HOME_ENV_VAR)
    if configured:
        return Path(configured).expanduser()
    import platformdirs  # noqa: PLC0415  # deferred: importing the package does no I/O or setup

    return platformdirs.user_data_path("hermes-sessions", appauthor=False)


def memories_dir(home: Path | None = None) -> Path:
    """Return the directory of ``MEMORY.md`` and ``USER.md`` under ``home`` (default home)."""
    return (home if home is not None else default_home()) / "memories"
