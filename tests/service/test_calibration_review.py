"""Issue 47, reviewed: the table's realised / estimated factor is read soundly from a state file, the
feature search weighs the same calibrated benefit against the same cost as the layouts it feeds, and
`deltaopt estimate` weighs what the service's tick weighs, naming the raw figure beside it."""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime

import pytest

from costmodel.benefit import BenefitEstimate, Calibration
from costmodel.cost import CostEstimate
from optimizer.config import Thresholds
from optimizer.estimate import layouts
from optimizer.features import FeatureSet, ZFeature
from optimizer.service.state import StateStore, TableState
from tests.service.test_calibration import HALF
from tests.service.test_service import log_queries, service  # noqa: F401 - the fixture

GAIN = {"a": 40.0, "b": 8.0}  # the raw benefit each feature's layout adds
FIXED, PER_FEATURE = 5.0, 2.0  # the cost of a job, and of each feature it lays out


def test_a_state_file_whose_sums_are_not_finite_numbers_gives_no_factor(tmp_path, caplog):
    path = StateStore(tmp_path).path("events")
    totals = {"jobs": 5, "scans": 50, "estimated": float("nan"), "estimated_realised": 4.0, "estimated_jobs": 5}
    path.write_text(json.dumps({"table": "events", "realised": totals}))  # json writes NaN as Python reads it
    with caplog.at_level(logging.WARNING):
        loaded = StateStore(tmp_path).load("events").realised
    assert loaded.calibration(3) is None
    warned = [r.getMessage() for r in caplog.records if "not a finite number" in r.getMessage()]
    assert len(warned) == 1 and str(path) in warned[0]  # one line naming the problem and the file


def _priced(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each layout's raw benefit is the sum of its features' gains, its cost FIXED + PER_FEATURE each."""

    def benefit(replay, snapshot, layout, sample, **_):  # type: ignore[no-untyped-def]
        value = sum(GAIN[f.expression] for f in layout.z)
        return BenefitEstimate(10, 70.0, 8e6, 2e6, 10e6, 6.0, value, 5000, 4, 0.1, benefit_skipping=value)

    def cost(model, new_bytes, layout):  # type: ignore[no-untyped-def]
        return CostEstimate(FIXED + PER_FEATURE * len(layout.z), 0.0, len(layout.z), 0, 0, {})

    monkeypatch.setattr(layouts, "layout_benefit", benefit)
    monkeypatch.setattr(layouts, "layout_cost", cost)


def _searched(calibration: Calibration | None) -> tuple[str, ...]:
    pool = FeatureSet(z=(ZFeature("a"), ZFeature("b")))
    found = layouts.search_features(
        None, None, None, pool, thresholds=Thresholds(), cost_model=None, new_bytes=1, calibration=calibration
    )
    return tuple(f.expression for f in found.features.z)


def test_the_feature_search_weighs_the_calibrated_benefit_as_the_layouts_do(monkeypatch):
    """Raw, b's marginal benefit (8) pays its marginal cost (2); at the table's factor 0.25 it adds 2,
    which does not: the search must not choose, on raw figures, a feature the verdict's scale rejects."""
    _priced(monkeypatch)
    assert _searched(None) == ("a", "b")
    assert _searched(Calibration(0.25, 4)) == ("a",)
    assert _searched(Calibration(4.0, 4)) == ("a", "b")


@pytest.mark.spark
def test_deltaopt_estimate_weighs_the_benefit_the_service_would_and_labels_it(service, capsys):  # noqa: F811
    """An operator who asks `deltaopt estimate` why the service skipped a table sees the verdict the
    service's tick weighs (the table's factor, from its state) with the raw estimate named beside it."""
    from optimizer.cli import main

    ctx, table_path, tmp_path = service
    config = str(tmp_path / "deltaopt.yaml")
    ctx.state.save(TableState("events", realised=HALF))
    log_queries(table_path + "_querylog", now=datetime.now(UTC))  # the CLI decides on the real clock
    assert main(["estimate", "--config", config, "--json"]) == 0
    decision = json.loads(capsys.readouterr().out)
    calibration = decision["benefit"]["calibration"]
    assert calibration["factor"] == 0.5 and calibration["jobs"] == 4
    assert decision["benefit"]["benefit"] == pytest.approx(calibration["raw_benefit"] * 0.5, abs=1e-3)
    assert "x0.50, this table's realised/estimated over 4 jobs" in decision["reason"]
    assert main(["estimate", "--config", config]) == 0
    text = capsys.readouterr().out  # a second estimate, on a clock that moved: its own figures
    raw = re.search(r"estimate ([\d.]+) x0\.50, this table's realised/estimated over 4 jobs", text)
    scaled = re.search(r"calibrated: ([\d.]+) cluster-s \(x0\.50, this table's realised/estimated over 4", text)
    assert raw is not None and scaled is not None, text
    assert f"  benefit: {raw[1]} cluster-s = " in text  # the estimate's own figure, what its parts add up to
    assert float(scaled[1]) == pytest.approx(float(raw[1]) * 0.5, abs=0.1)
