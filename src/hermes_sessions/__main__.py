"""``python -m hermes_sessions`` runs the command line."""

from hermes_sessions.cli import main

raise SystemExit(main())
