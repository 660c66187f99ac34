"""The examples in docstrings run and print what they say."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

import hermes_sessions
from extras import FRAMEWORKS_REASON, missing_for_module

PACKAGE = Path(hermes_sessions.__file__).parent
MODULES = sorted(
    ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    for path in PACKAGE.rglob("*.py")
    if path.name not in {"__main__.py", "__init__.py"}
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    """Every ``>>>`` example in the module's docstrings passes."""
    if missing_for_module(name) is not None:
        pytest.skip(FRAMEWORKS_REASON)
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
