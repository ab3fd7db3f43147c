"""Choose clustering features by estimated benefit: a greedy search over the analyser's candidates.

The analyser (with ``selection: benefit``) only pre-filters: changing literals, a minimum share of the
scans, correlation graphs that leave one primary per correlated group. This search then builds the
layout one feature at a time. Each round estimates, for every remaining candidate, the layout "chosen
so far + that candidate" (benefit by replaying the workload on virtual files of the sample, cost from
the cost model) and keeps the candidate with the highest **marginal net** (marginal benefit minus
marginal cost). It stops when no candidate's marginal benefit pays for its marginal cost, or at the
feature limits. The empty layout is the start: no job, no cost, no benefit.

Rounds are *lazy* (Minoux's accelerated greedy): a candidate's marginal *benefit* from an earlier round
is taken as an upper bound on its marginal net now (marginal costs are never negative: the cost model's
coefficients are), and candidates are estimated in order of their bounds until the best one found
beats every remaining bound. (The marginal net itself is no bound: the first feature also pays the
job's fixed cost, later ones do not.) Adding a feature to a layout rarely
makes another one more useful to skip on, so this saves most estimates; where it does (two SOP
predicates that only pay together) the search may stop early, which costs benefit, never data.

Every candidate's fate (the round it was chosen in, or its last marginal figures when dropped) is
returned for the decision record, with the search's own time and number of estimates. The search is
bounded by a number of estimates (`search_estimates`), not by time, so a decision does not depend on
how loaded the machine was; a wall-clock bound (`search_seconds`) is the operator's option.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from optimizer.features import FeatureSet, SopFeature, ZFeature


@dataclass(frozen=True)
class Candidate:
    kind: str  # "z" (an expression) or "sop" (a whole predicate)
    feature: str


@dataclass(frozen=True)
class Score:
    """One layout's estimate: benefit and cost in the same units (cluster seconds)."""

    benefit: float
    cost: float

    @property
    def net(self) -> float:
        return self.benefit - self.cost


# Estimates one layout; the search never looks inside.
Scorer = Callable[[FeatureSet], Score]


@dataclass
class CandidateOutcome:
    candidate: Candidate
    chosen_in_round: int | None = None
    marginal_benefit: float | None = None  # at its last estimate
    marginal_cost: float | None = None
    estimates: int = 0
    reason: str = "not estimated"

    def as_dict(self) -> dict[str, object]:
        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 4)

        return {
            "kind": self.candidate.kind,
            "feature": self.candidate.feature,
            "chosen": self.chosen_in_round is not None,
            "round": self.chosen_in_round,
            "marginal_benefit": rounded(self.marginal_benefit),
            "marginal_cost": rounded(self.marginal_cost),
            "estimates": self.estimates,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class SearchResult:
    features: FeatureSet  # the chosen layout; every other candidate keeps statistics only
    score: Score
    outcomes: tuple[CandidateOutcome, ...]
    estimates: int
    seconds: float
    stopped: str  # why the search ended
    chosen: tuple[Candidate, ...] = field(default_factory=tuple)

    @property
    def chosen_names(self) -> list[str]:
        """The chosen candidates as the record and the CLI write them (``z: x``, in the order chosen)."""
        return [f"{c.kind}: {c.feature}" for c in self.chosen]

    def as_dict(self) -> dict[str, Any]:
        return {
            "chosen": self.chosen_names,
            "benefit": round(self.score.benefit, 4),
            "cost": round(self.score.cost, 4),
            "estimates": self.estimates,
            "seconds": round(self.seconds, 3),
            "stopped": self.stopped,
            "candidates": [o.as_dict() for o in self.outcomes],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchResult:
        """The search read back from a decision record: every figure it keeps (`as_dict` of the result
        gives the record again); `features` is the chosen layout alone (the record keeps no pool)."""
        chosen = tuple(Candidate(*str(name).split(": ", 1)) for name in data.get("chosen") or [])
        outcomes = tuple(
            CandidateOutcome(
                Candidate(str(c["kind"]), str(c["feature"])),
                c.get("round"),
                c.get("marginal_benefit"),
                c.get("marginal_cost"),
                int(c.get("estimates", 0)),
                str(c.get("reason", "not estimated")),
            )
            for c in data.get("candidates") or []
        )
        return cls(
            layout_of(FeatureSet(), chosen),
            Score(float(data["benefit"]), float(data["cost"])),
            outcomes,
            int(data["estimates"]),
            float(data["seconds"]),
            str(data["stopped"]),
            chosen,
        )


def layout_of(pool: FeatureSet, chosen: Sequence[Candidate]) -> FeatureSet:
    """`chosen` clustered (Z features in the order chosen); the rest of `pool` keeps statistics only."""
    z = [c.feature for c in chosen if c.kind == "z"]
    sop = [c.feature for c in chosen if c.kind == "sop"]
    return FeatureSet(
        z=tuple(ZFeature(e) for e in z),
        sop=tuple(SopFeature(p) for p in sop),
        z_add=tuple(f for f in (*pool.z, *pool.z_add) if f.expression not in z),
        sop_add=tuple(f for f in (*pool.sop, *pool.sop_add) if f.predicate not in sop),
        sop_weights={p: w for p, w in pool.sop_weights.items() if p in sop},
        curve=pool.curve,  # the pool's curve: a liquid table's is Delta's (`estimate.liquid`)
    )


def greedy_search(
    pool: FeatureSet,
    score: Scorer,
    *,
    max_z: int,
    max_sop: int,
    estimates: int | None = None,
    seconds: float | None = None,
) -> SearchResult:
    """Add the pool's Z and SOP candidates (`pool.z`, `pool.sop`) one at a time while the best one's
    marginal benefit exceeds its marginal cost, within `max_z` and `max_sop` features. No round starts
    once `estimates` layouts have been estimated (every estimate costs Spark jobs; the first round
    always runs whole, every candidate estimated once, so the bound counts it too): a bound that gives
    the same features for the same inputs however loaded the machine is. `seconds`, when given, is a
    wall-clock bound too (the layout chosen so far stands), which makes the choice depend on the load."""
    started = time.perf_counter()
    candidates = [Candidate("z", f.expression) for f in pool.z] + [Candidate("sop", f.predicate) for f in pool.sop]
    search = _Search(pool, score, {c: CandidateOutcome(c) for c in candidates})
    stopped = "no candidates"
    round_ = 0
    while True:
        remaining = [c for c in candidates if c not in search.chosen and _room(c, search.chosen, max_z, max_sop)]
        if not remaining:
            stopped = "every candidate chosen or the feature limits reached" if candidates else stopped
            break
        if round_ and estimates is not None and search.estimates >= estimates:
            stopped = (
                f"estimate limit: {search.estimates} layouts estimated after round {round_} (limit {estimates}); "
                "the features chosen so far stand"
            )
            break
        if round_ and seconds is not None and time.perf_counter() - started > seconds:
            stopped = f"time limit: {seconds:g} s spent after round {round_}; the features chosen so far stand"
            break
        round_ += 1
        if not search.round(remaining, round_):
            stopped = f"round {round_}: no candidate's marginal benefit exceeds its marginal cost"
            break
    limit = next((kind for kind in ("estimate limit", "time limit") if stopped.startswith(kind)), None)
    _explain_unchosen(search.outcomes, search.chosen, max_z, max_sop, limit=limit)
    return SearchResult(
        layout_of(pool, search.chosen),
        search.current,
        tuple(search.outcomes[c] for c in candidates),
        search.estimates,
        time.perf_counter() - started,
        stopped,
        tuple(search.chosen),
    )


@dataclass
class _Search:
    """The greedy search's state between rounds: what is chosen, its score, and each candidate's bound
    (its marginal benefit when last estimated; marginal benefits only shrink as features are added)."""

    pool: FeatureSet
    score: Scorer
    outcomes: dict[Candidate, CandidateOutcome]
    chosen: list[Candidate] = field(default_factory=list)
    current: Score = Score(0.0, 0.0)
    estimates: int = 0
    bounds: dict[Candidate, float] = field(default_factory=dict)

    def round(self, remaining: list[Candidate], round_: int) -> bool:
        """One lazy round: estimate candidates in order of their bounds until none can beat the best;
        choose the best when its marginal net is positive (True), else choose nothing (False)."""
        best: tuple[Candidate, Score] | None = None
        for candidate in sorted(remaining, key=lambda c: -self.bounds.get(c, math.inf)):
            bound = self.bounds.get(candidate, math.inf)
            if bound <= 0:
                break  # it (and every one after it) cannot pay: marginal net <= marginal benefit <= 0
            if best is not None and best[1].net - self.current.net >= bound:
                break  # no remaining candidate can beat the best one found (lazy greedy)
            result = self.score(layout_of(self.pool, [*self.chosen, candidate]))
            self.estimates += 1
            outcome = self.outcomes[candidate]
            outcome.estimates += 1
            outcome.marginal_benefit = result.benefit - self.current.benefit
            outcome.marginal_cost = result.cost - self.current.cost
            self.bounds[candidate] = outcome.marginal_benefit
            if best is None or result.net > best[1].net:
                best = (candidate, result)
        if best is None or best[1].net - self.current.net <= 0:
            return False
        candidate, self.current = best
        self.chosen.append(candidate)
        outcome = self.outcomes[candidate]
        outcome.chosen_in_round = round_
        outcome.reason = (
            f"chosen in round {round_}: marginal benefit {outcome.marginal_benefit:.2f} > "
            f"marginal cost {outcome.marginal_cost:.2f}"
        )
        return True


def _explain_unchosen(
    outcomes: Mapping[Candidate, CandidateOutcome],
    chosen: list[Candidate],
    max_z: int,
    max_sop: int,
    *,
    limit: str | None,
) -> None:
    """Each candidate left out says why: never estimated (the search's `limit`, or a full kind), a full
    kind, or its last marginal net."""
    for candidate, outcome in outcomes.items():
        if outcome.chosen_in_round is not None:
            continue
        if outcome.marginal_benefit is None or outcome.marginal_cost is None:
            outcome.reason = "not estimated: " + (f"the search's {limit}" if limit else "the feature limit of its kind")
        elif not _room(candidate, chosen, max_z, max_sop):
            outcome.reason = "dropped: the feature limit of its kind was reached"
        else:
            net = outcome.marginal_benefit - outcome.marginal_cost
            outcome.reason = (
                f"dropped: marginal benefit {outcome.marginal_benefit:.2f} vs marginal cost "
                f"{outcome.marginal_cost:.2f} (net {net:+.2f}) when last estimated"
            )
            if limit and net > 0:  # it might have paid: the search stopped before another round
                outcome.reason += f"; no further round: the search's {limit}"


def best_single(result: SearchResult) -> Candidate | None:
    """When nothing was chosen: the candidate whose single-feature layout came closest to paying
    (every estimate was then a first-round one, of a single-feature layout)."""
    if result.chosen:
        return None
    singles = [o for o in result.outcomes if o.estimates]  # estimated: marginal figures are set
    if not singles:
        return None
    top = max(singles, key=lambda o: (o.marginal_benefit or 0.0) - (o.marginal_cost or 0.0))
    return top.candidate


def _room(candidate: Candidate, chosen: Sequence[Candidate], max_z: int, max_sop: int) -> bool:
    used = sum(1 for c in chosen if c.kind == candidate.kind)
    return used < (max_z if candidate.kind == "z" else max_sop)
