"""A griffe extension: reST roles and directives in docstrings become Markdown.

The docstrings are Google style with reST roles (``:class:`x```) and ``.. versionadded::``
lines; mkdocstrings renders Markdown, so each role becomes inline code, each doctest a code block,
``.. versionadded:: X`` a small ``since X`` label beside the object's heading, and
``.. versionchanged::`` a short sentence.
"""

# ruff: noqa: INP001  # loaded by path from mkdocs.yml, not a package

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|meth|func|attr|data|mod|exc|obj):`~?\.?([^`]+)`")
ADDED = re.compile(r"^(\s*)\.\. versionadded::\s*(\S+)\s*$", re.MULTILINE)
CHANGED = re.compile(r"^(\s*)\.\. versionchanged::\s*(\S+)\s*$", re.MULTILINE)


def _fence_doctests(text: str) -> str:
    """Put each doctest (``>>>`` lines and their output, up to a blank line) in a code fence."""
    out: list[str] = []
    inside = False
    for line in text.splitlines():
        stripped = line.lstrip()
        if not inside and stripped.startswith(">>>"):
            indent = line[: len(line) - len(stripped)]
            out.append(f"{indent}```pycon")
            inside = True
        elif inside and not stripped:
            out.append(f"{indent}```")
            inside = False
        out.append(line)
    if inside:
        out.append(f"{indent}```")
    return "\n".join(out)


def _role(match: re.Match[str]) -> str:
    target = match.group(1)
    label = target.rsplit(".", 1)[-1] if "." in target else target
    return f"`{label}`"


FUNCTION = re.compile(r"^<function ([\w.]+) at 0x[0-9a-f]+>$")
MADE = re.compile(r"^(?:<dynamic>|<class '[\w.]+'>)$")


def _made_default(cls: griffe.Class, name: str) -> str | None:
    """``Factory()`` for an attrs field of ``cls`` whose default a factory makes."""
    import attrs  # noqa: PLC0415  # only the documented classes need it

    runtime = griffe.dynamic_import(cls.path)
    field = attrs.fields_dict(runtime).get(name) if attrs.has(runtime) else None
    if field is None or not isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
        return None
    factory = field.default.factory
    return f"{getattr(factory, '__qualname__', type(factory).__name__)}()"


class RstRoles(griffe.Extension):
    """Rewrites each docstring as its object is made, before other extensions parse it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:  # noqa: ARG002  # griffe's signature
        """Convert the roles and version directives of one object's docstring."""
        if obj.docstring is None:
            return
        text = ROLE.sub(_role, _fence_doctests(obj.docstring.value))
        added = ADDED.search(text)
        if added is not None:  # a label beside the heading, not a sentence in every docstring
            obj.labels.add(f"since {added.group(2)}")
            text = ADDED.sub("", text).rstrip()
        obj.docstring.value = CHANGED.sub(r"\1*Changed in version \2.*", text)

    def on_class(self, *, cls: griffe.Class, **kwargs: Any) -> None:  # noqa: ARG002  # griffe's signature
        """Show a made default as a call (``KeyPolicy()``) and a function by its name."""
        if cls.docstring is None:
            return
        for section in cls.docstring.parsed:
            if not isinstance(section, griffe.DocstringSectionParameters):
                continue
            for parameter in section.value:
                shown = str(parameter.value or "")
                if MADE.match(shown):
                    parameter.value = _made_default(cls, parameter.name) or shown
                elif function := FUNCTION.match(shown):
                    parameter.value = function.group(1)
