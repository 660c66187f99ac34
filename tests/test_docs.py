"""The documentation runs: every Python block in README.md and docs/*.md executes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from extras import FRAMEWORKS_REASON, missing_for_source

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_python_blocks_run(document, tmp_path, monkeypatch):
    """The Python blocks of a document run in order, in one namespace, without error."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HERMES_SESSIONS_HOME", str(tmp_path / "home"))
    blocks = BLOCK.findall(document.read_text(encoding="utf-8"))
    if any(missing_for_source(block) is not None for block in blocks):
        pytest.skip(FRAMEWORKS_REASON)
    namespace: dict[str, object] = {"__name__": f"doc_{document.stem}"}
    for number, block in enumerate(blocks, 1):
        code = compile(block, f"{document.name}[block {number}]", "exec")
        exec(code, namespace)  # noqa: S102  # our own documentation


def test_readme_quickstart_twice_stores_the_turn_once(tmp_path, monkeypatch):
    """Run the README quickstart twice on one home: the second run is a redelivery (issue 11)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HERMES_SESSIONS_HOME", str(tmp_path / "home"))
    quickstart = BLOCK.findall((ROOT / "README.md").read_text(encoding="utf-8"))[0]
    for run in range(2):
        exec(compile(quickstart, f"README.md[run {run}]", "exec"), {"__name__": "quickstart"})  # noqa: S102
    from hermes_sessions import SessionStore  # noqa: PLC0415  # after the runs, on their home

    with SessionStore.open() as store:
        (item,) = store.list_sessions().items
        assert [m.role for m in store.transcript(item.record.id)] == ["user", "assistant"]
