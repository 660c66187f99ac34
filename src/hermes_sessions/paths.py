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
"""The environment variable that, when set, names the data directory.

.. versionadded:: 0.1.0
"""


def default_home() -> Path:
    """Return the default data directory (not created here).

    .. versionadded:: 0.1.0
    """
    configured = os.environ.get(HOME_ENV_VAR)
    if configured:
        return Path(configured).expanduser()
    import platformdirs  # noqa: PLC0415  # deferred: importing the package does no I/O or setup

    return platformdirs.user_data_path("hermes-sessions", appauthor=False)


def memories_dir(home: Path | None = None) -> Path:
    """Return the directory of ``MEMORY.md`` and ``USER.md`` under ``home`` (default home).

    .. versionadded:: 0.1.0
    """
    return (home if home is not None else default_home()) / "memories"
