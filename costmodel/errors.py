"""The cost model's errors (the package stays below `optimizer`, which re-exports them)."""

from __future__ import annotations


class CostModelError(Exception):
    """A cost model could not be loaded, fitted or applied."""
