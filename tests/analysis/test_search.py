"""The benefit-driven feature search (optimizer.analysis.search) with scripted scores."""

from __future__ import annotations

import time

from optimizer.analysis.search import Candidate, Score, best_single, greedy_search, layout_of
from optimizer.features import FeatureSet, SopFeature, ZFeature

POOL = FeatureSet(
    z=(ZFeature("a"), ZFeature("b"), ZFeature("MONTH(d)")),
    sop=(SopFeature("x = 1"), SopFeature("y LIKE '%q%'")),
    z_add=(ZFeature("c"),),
    sop_add=(SopFeature("w = 2"),),
    sop_weights={"x = 1": 3.0, "y LIKE '%q%'": 1.0},
)


def additive(values: dict[str, float], per_feature_cost: float, calls: list[FeatureSet] | None = None):
    """Benefit: the sum of the chosen features' values; cost: a fixed job cost plus one per feature."""

    def score(layout: FeatureSet) -> Score:
        if calls is not None:
            calls.append(layout)
        names = [f.expression for f in layout.z] + [f.predicate for f in layout.sop]
        return Score(sum(values[n] for n in names), 5.0 + per_feature_cost * len(names))

    return score


def test_search_adds_features_while_marginal_benefit_exceeds_marginal_cost():
    values = {"a": 50.0, "b": 3.0, "MONTH(d)": 20.0, "x = 1": 8.0, "y LIKE '%q%'": 0.5}
    result = greedy_search(POOL, additive(values, per_feature_cost=4.0), max_z=4, max_sop=4)
    # a (50 - 9) > 0, then MONTH(d) (+20 - 4), then x = 1 (+8 - 4); b (+3 - 4) and the LIKE do not pay
    assert [c.feature for c in result.chosen] == ["a", "MONTH(d)", "x = 1"]
    assert [f.expression for f in result.features.z] == ["a", "MONTH(d)"]
    assert [f.predicate for f in result.features.sop] == ["x = 1"]
    assert {f.expression for f in result.features.z_add} == {"b", "c"}
    assert {f.predicate for f in result.features.sop_add} == {"y LIKE '%q%'", "w = 2"}
    assert result.features.sop_weights == {"x = 1": 3.0}
    assert "no candidate's marginal benefit exceeds its marginal cost" in result.stopped
    fates = {o.candidate.feature: o for o in result.outcomes}
    assert fates["b"].chosen_in_round is None and fates["b"].marginal_benefit == 3.0
    assert fates["b"].marginal_cost == 4.0 and fates["b"].reason.startswith("dropped")
    assert fates["MONTH(d)"].chosen_in_round == 2
    assert result.score == Score(78.0, 17.0)


def test_search_stops_at_once_when_nothing_pays_and_offers_the_closest():
    values = {"a": 1.0, "b": 2.0, "MONTH(d)": 0.0, "x = 1": 0.5, "y LIKE '%q%'": 0.0}
    result = greedy_search(POOL, additive(values, per_feature_cost=1.0), max_z=4, max_sop=4)
    assert result.chosen == () and result.features.is_empty
    assert result.estimates == 5
    assert best_single(result) == Candidate("z", "b")


def test_lazy_rounds_skip_candidates_whose_bound_cannot_win():
    values = {"a": 50.0, "b": 30.0, "MONTH(d)": 1.0, "x = 1": 0.2, "y LIKE '%q%'": 0.1}
    calls: list[FeatureSet] = []
    result = greedy_search(POOL, additive(values, per_feature_cost=0.5, calls=calls), max_z=4, max_sop=4)
    assert [c.feature for c in result.chosen] == ["a", "b", "MONTH(d)"]
    # round 1 estimates all 5; later rounds stop as soon as the best found beats every remaining bound
    assert result.estimates == len(calls) < 5 + 4 + 3 + 2
    # bounds are round-1 marginal benefits. Round 2: b (+29.5) beats MONTH(d)'s bound 1, one estimate.
    # Round 3: MONTH(d) (+0.5) beats x's bound 0.2. Round 4: x (-0.3) does not beat y's bound 0.1, so
    # y is estimated too; neither pays.
    assert result.estimates == 5 + 1 + 1 + 2


def test_feature_limits_bound_the_search():
    values = {"a": 50.0, "b": 40.0, "MONTH(d)": 30.0, "x = 1": 20.0, "y LIKE '%q%'": 10.0}
    result = greedy_search(POOL, additive(values, per_feature_cost=0.1), max_z=1, max_sop=1)
    assert [c.feature for c in result.chosen] == ["a", "x = 1"]
    fates = {o.candidate.feature: o.reason for o in result.outcomes}
    assert "limit" in fates["b"]


def test_layout_of_keeps_every_unchosen_candidate_for_statistics():
    layout = layout_of(POOL, [Candidate("sop", "y LIKE '%q%'")])
    assert layout.z == () and [f.predicate for f in layout.sop] == ["y LIKE '%q%'"]
    assert {f.expression for f in layout.z_add} == {"a", "b", "MONTH(d)", "c"}
    assert {f.predicate for f in layout.sop_add} == {"x = 1", "w = 2"}


def test_the_time_limit_ends_the_search_after_a_round():
    values = {"a": 50.0, "b": 40.0, "MONTH(d)": 30.0, "x = 1": 20.0, "y LIKE '%q%'": 10.0}
    result = greedy_search(POOL, additive(values, per_feature_cost=0.1), max_z=4, max_sop=4, seconds=0.0)
    assert [c.feature for c in result.chosen] == ["a"]  # round 1 always runs; no second round starts
    assert result.stopped.startswith("time limit")
    assert result.features.z == (ZFeature("a"),)


def test_the_estimate_limit_ends_the_search_after_a_round_whatever_the_time():
    """Round 1 estimates all 5 candidates; with a limit of 5 no second round starts, however fast or slow
    the estimates were: the same scores give the same features on any machine load."""
    values = {"a": 50.0, "b": 40.0, "MONTH(d)": 30.0, "x = 1": 20.0, "y LIKE '%q%'": 10.0}
    results = []
    for delay in (0.0, 0.02):

        def slow(layout: FeatureSet, delay: float = delay) -> Score:
            time.sleep(delay)
            return additive(values, per_feature_cost=0.1)(layout)

        results.append(greedy_search(POOL, slow, max_z=4, max_sop=4, estimates=5))
    for result in results:
        assert [c.feature for c in result.chosen] == ["a"]
        assert result.stopped.startswith("estimate limit: 5 layouts estimated after round 1")
    fates = {o.candidate.feature: o.reason for o in results[0].outcomes}
    assert all(reason.startswith("dropped") for name, reason in fates.items() if name != "a")
    stopped_by_limit = "no further round: the search's estimate limit"
    assert all(reason.endswith(stopped_by_limit) for name, reason in fates.items() if name != "a")
    unlimited = greedy_search(POOL, additive(values, per_feature_cost=0.1), max_z=4, max_sop=4, estimates=64)
    assert len(unlimited.chosen) == 5, "a limit the search never reaches changes nothing"


def test_the_default_search_has_no_clock_in_it():
    """Without a `search_seconds`, the thresholds bound the search by estimates only."""
    from optimizer.config import Thresholds

    assert Thresholds().search_seconds is None and Thresholds().search_estimates == 64
