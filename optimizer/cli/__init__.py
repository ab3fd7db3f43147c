"""The ``deltaopt`` command line: the parser and its entry points (`main`), the sub-commands
(`commands`, `service`, `querylog`) and what they share (`common`)."""

from optimizer.cli.main import entry, main

__all__ = ["entry", "main"]
