"""The one verdict a decision carries, from the estimate through a re-clustering plan to the tick record.

An estimate says `OPTIMIZE` or `SKIP`; a drift plan `RECLUSTER` or `SKIP`; the tick record refines either
with what happened next (a dry run, a lost race, deferred in the fleet queue, paused, an error). One enum
holds them all so that a value is spelled once, and the JSON of every record reads the same strings.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Verdict"]


class Verdict(StrEnum):
    OPTIMIZE = "optimize"
    OPTIMIZE_DRY_RUN = "optimize (dry run)"
    OPTIMIZE_LOST_RACE = "optimize (lost race)"
    RECLUSTER = "recluster"
    RECLUSTER_DRY_RUN = "recluster (dry run)"
    RECLUSTER_LOST_RACE = "recluster (lost race)"
    DEFERRED = "deferred"  # a job decided, waiting in the fleet queue (rank, slots or budget)
    SKIP = "skip"
    PAUSED = "paused"
    ERROR = "error"

    @property
    def lost_race(self) -> Verdict:
        """The verdict of this job when a concurrent writer won the commit race."""
        return Verdict.RECLUSTER_LOST_RACE if self is Verdict.RECLUSTER else Verdict.OPTIMIZE_LOST_RACE
