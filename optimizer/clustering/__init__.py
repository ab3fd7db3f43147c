"""The layout: SOP clustering (C1), SOP id ordering (C2), Z-order (C3), and the OPTIMIZE job."""

from optimizer.clustering.job import OptimizeResult, optimize

__all__ = ["OptimizeResult", "optimize"]
