"""A griffe extension: reST roles and directives in docstrings become Markdown.

The docstrings are Google style with reST roles (``:class:`x```) and ``.. versionadded::``
lines; mkdocstrings renders Markdown, so each role becomes inline code, each directive a short
sentence, and each doctest a code block.
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


class RstRoles(griffe.Extension):
    """Rewrites each docstring once the object tree is complete."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:  # noqa: ARG002  # griffe's signature
        """Convert the roles and version directives of one object's docstring."""
        if obj.docstring is None:
            return
        text = ROLE.sub(_role, _fence_doctests(obj.docstring.value))
        text = ADDED.sub(r"\1*Added in version \2.*", text)
        obj.docstring.value = CHANGED.sub(r"\1*Changed in version \2.*", text)
