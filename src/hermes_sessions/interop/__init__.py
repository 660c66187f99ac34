"""Moving data in and out: Hermes profile import and portable bundles.

* :func:`import_hermes` reads a Hermes Agent profile (``~/.hermes``: ``state.db``,
  ``sessions/sessions.json``, legacy ``sessions/<id>.jsonl`` transcripts, ``memories/``) into any
  backend, read-only on the source (``docs/migrating-from-hermes.md``).
* :func:`export_bundle` / :func:`import_bundle` write and read a versioned JSON Lines bundle
  that moves sessions, messages, routing and memory between backends losslessly
  (``docs/cli.md`` describes the format).
"""

from __future__ import annotations

from hermes_sessions.interop._bundle import (
    BUNDLE_FORMAT,
    BUNDLE_VERSION,
    export_bundle,
    import_bundle,
)
from hermes_sessions.interop._hermes import DEFAULT_MAX_MESSAGE_CHARS, import_hermes
from hermes_sessions.interop._report import BundleReport, HermesImportReport, ImportProblem

__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_VERSION",
    "DEFAULT_MAX_MESSAGE_CHARS",
    "BundleReport",
    "HermesImportReport",
    "ImportProblem",
    "export_bundle",
    "import_bundle",
    "import_hermes",
]
