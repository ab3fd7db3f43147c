"""``python -m optimizer.cli``: the ``deltaopt`` console script."""

from optimizer.cli.main import entry

entry()
