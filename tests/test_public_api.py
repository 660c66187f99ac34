"""The public surface: every exported name imports, is typed, and is documented."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import hermes_sessions
from extras import missing_for_module

ROOT = Path(__file__).resolve().parent.parent
API_PAGES = sorted((ROOT / "docs" / "api").glob("*.md"))


def test_all_is_unique():
    """``__all__`` has no duplicates (ruff's RUF022 keeps it sorted)."""
    names = hermes_sessions.__all__
    assert len(set(names)) == len(names)


def test_lazy_exports_match_the_type_checking_imports():
    """Every public name is loaded lazily from the module the type checkers are told about."""
    source = Path(hermes_sessions.__file__).read_text(encoding="utf-8")
    tree = ast.parse(source)
    guarded = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
    )
    declared = {
        alias.name: node.module
        for node in guarded.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert declared == hermes_sessions._EXPORTS
    assert set(declared) == set(hermes_sessions.__all__) - {"__version__"}


def test_unknown_names_raise_attribute_error():
    """Looking up a name the package does not export is an AttributeError."""
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = hermes_sessions.nothing_here


def test_dir_lists_the_public_names():
    """``dir(hermes_sessions)`` shows every public name, loaded or not."""
    assert set(hermes_sessions.__all__) <= set(dir(hermes_sessions))


@pytest.mark.parametrize("name", hermes_sessions.__all__)
def test_every_public_name_imports(name):
    """Every name in ``__all__`` is an attribute of the package."""
    assert getattr(hermes_sessions, name) is not None


def _reference_modules() -> set[str]:
    """The modules the generated API reference renders (the ``::: module`` lines of its pages)."""
    text = "\n".join(page.read_text(encoding="utf-8") for page in API_PAGES)
    return set(re.findall(r"^::: ([\w.]+)$", text, re.MULTILINE))


def _public_modules() -> list[str]:
    """Every module and package of the library without a private component in its name."""
    package = Path(hermes_sessions.__file__).parent
    names = []
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if not any(part.startswith("_") for part in parts) and len(parts) > 1:
            names.append(".".join(parts))
    return names


@pytest.mark.parametrize("name", [n for n in hermes_sessions.__all__ if n != "__version__"])
def test_every_public_name_is_documented(name):
    """Every public name has a docstring and is rendered by the generated API reference."""
    obj = getattr(hermes_sessions, name)
    assert inspect.getdoc(obj), f"{name} has no docstring"
    module = hermes_sessions._EXPORTS[name]
    assert module in _reference_modules(), f"add '::: {module}' to its page of docs/api/"
    assert name in importlib.import_module(module).__all__, f"{name} is not in {module}.__all__"


@pytest.mark.parametrize("module", _public_modules())
def test_every_public_module_is_in_the_reference(module):
    """Every public module has a ``::: module`` line on a page of docs/api/ and an ``__all__``."""
    assert module in _reference_modules(), f"add '::: {module}' to its page of docs/api/"
    assert hasattr(importlib.import_module(module), "__all__"), f"{module} needs an __all__"


def test_reference_names_only_real_modules():
    """Every ``:::`` directive of docs/api/ names an importable public module."""
    assert _reference_modules() <= set(_public_modules())


@pytest.mark.parametrize("name", hermes_sessions.__all__)
def test_public_callables_are_annotated(name):
    """Public functions declare their parameter and return types."""
    obj = getattr(hermes_sessions, name)
    if inspect.isfunction(obj):
        signature = inspect.signature(obj)
        assert signature.return_annotation is not inspect.Signature.empty, name
        for parameter in signature.parameters.values():
            assert parameter.annotation is not inspect.Parameter.empty, (name, parameter.name)


def test_py_typed_marker_ships():
    """The package carries the PEP 561 marker."""
    assert (Path(hermes_sessions.__file__).parent / "py.typed").exists()


def test_submodules_import_cleanly():
    """Every module of the package imports on its own."""
    package = Path(hermes_sessions.__file__).parent
    for path in sorted(package.rglob("*.py")):
        if path.name == "__main__.py":
            continue
        module = ".".join(path.relative_to(package.parent).with_suffix("").parts)
        if missing_for_module(module) is None:  # else it needs a framework this run lacks
            importlib.import_module(module.removesuffix(".__init__"))


def test_import_is_light():
    """Importing the package loads no backend driver or optional dependency."""
    code = (
        "import sys, hermes_sessions, hermes_sessions.integrations.adk; "
        "heavy = {'sqlite3', 'psycopg', 'platformdirs', 'filelock', 'google.adk'} "
        "& set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
