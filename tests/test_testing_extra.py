"""``hermes_sessions.testing`` needs the ``testing`` extra, and says so when it is missing."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WITHOUT_PYTEST = """
import sys

sys.modules["pytest"] = None  # what an environment without pytest looks like to an import
from hermes_sessions.exceptions import HermesSessionsError, MissingDependencyError

try:
    import hermes_sessions.testing
except MissingDependencyError as error:
    assert isinstance(error, ImportError) and isinstance(error, HermesSessionsError)
    assert error.name == "pytest" and error.extra == "testing", vars(error)
    print(error)
else:
    raise SystemExit("hermes_sessions.testing imported without pytest")
"""


def test_importing_testing_without_pytest_names_the_extra():
    """Without pytest, the import fails with the library's ImportError naming the extra."""
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_PYTEST], capture_output=True, text=True, check=True
    )
    assert "pip install 'hermes-sessions[testing]'" in result.stdout


def test_the_testing_extra_brings_pytest_and_dev_includes_it():
    """The ``testing`` extra lists pytest, and ``dev`` pulls in ``testing`` by self-reference."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    assert any(requirement.startswith("pytest>=") for requirement in extras["testing"])
    assert f"{project['name']}[testing]" in extras["dev"]
