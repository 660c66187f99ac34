"""Every public name of the core, text and memory modules says when it was added."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import hermes_sessions
from extras import FRAMEWORKS_REASON
from hermes_sessions.exceptions import MissingDependencyError

PACKAGE = Path(hermes_sessions.__file__).parent
# The modules whose public names carry ``.. versionadded::``; backends/ and testing/ join the
# list as their names get the note.
MODULES = [
    "adapters",
    "aio",
    "clock",
    "closing",
    "exceptions",
    "files",
    "formats",
    "host",
    "ids",
    "integrations.adk",
    "integrations.mcp",
    "integrations.openai_agents",
    "interop",
    "keys",
    "memory",
    "models",
    "options",
    "paths",
    "policy",
    "protocols",
    "queries",
    "results",
    "serde",
    "store",
    "text",
    "threats",
    "titles",
    "tools",
    "state",
    "usage",
    "window",
]


def _documented_names(path: Path) -> dict[str, str]:
    """Map every top-level class, function and variable of ``path`` to its docstring."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    found: dict[str, str] = {}
    for index, node in enumerate(body):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            found[node.name] = ast.get_docstring(node) or ""
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            following = body[index + 1] if index + 1 < len(body) else None
            doc = ""
            if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
                doc = str(following.value.value)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.update((t.id, doc) for t in targets if isinstance(t, ast.Name))
    return found


def _public_names() -> list[tuple[str, str]]:
    """Every (module, name) pair of ``MODULES``' ``__all__``s."""
    return [
        (module, name)
        for module in MODULES
        for name in importlib.import_module(f"hermes_sessions.{module}").__all__
    ]


@pytest.mark.parametrize(("module", "name"), _public_names())
def test_public_names_say_when_they_were_added(module, name):
    """A public name's docstring (or attribute docstring) holds ``.. versionadded::``."""
    package = PACKAGE.joinpath(*module.split("."))
    files = sorted(package.glob("*.py")) if package.is_dir() else [package.with_suffix(".py")]
    documented: dict[str, str] = {}
    for path in files:
        documented.update(_documented_names(path))
    if name not in documented:  # re-exported from another module: look where it is defined
        try:
            defined = getattr(importlib.import_module(f"hermes_sessions.{module}"), name).__module__
        except MissingDependencyError:  # defined beside a framework this run lacks
            pytest.skip(FRAMEWORKS_REASON)
        documented.update(_documented_names(Path(importlib.import_module(defined).__file__)))
    assert ".. versionadded::" in documented[name], f"{module}.{name} has no versionadded note"
