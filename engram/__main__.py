"""``python -m engram`` runs the CLI."""

from engram.cli.main import main

raise SystemExit(main())
