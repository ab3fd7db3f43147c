"""The cost model: fitting it to timed runs, and its price for a job."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from costmodel.cost import DEFAULT_MODEL, CostModel, Run, fit, load
from optimizer.errors import CostModelError

NOW = datetime(2024, 6, 1, tzinfo=UTC)


def test_calibration_recovers_known_coefficients_from_synthetic_timings():
    truth = CostModel(overhead=4.0, base=30.0, per_z=8.0, per_sop=3.0, per_additional=0.5)
    rng = random.Random(2)
    runs = []
    for size in (0.2e9, 0.5e9, 1e9, 2e9):
        for z, sop, add in ((1, 0, 0), (2, 0, 0), (4, 0, 0), (1, 4, 0), (1, 8, 4), (3, 8, 8), (2, 12, 0)):
            seconds = truth.predict(int(size), z, sop, add).seconds * rng.uniform(0.97, 1.03)
            runs.append(Run(int(size), z, sop, add, seconds))
    model = fit(runs)
    for name, expected in (
        ("overhead", 4.0),
        ("base", 30.0),
        ("per_z", 8.0),
        ("per_sop", 3.0),
        ("per_additional", 0.5),
    ):
        assert getattr(model, name) == pytest.approx(expected, rel=0.15, abs=0.3), name
    assert model.r2 is not None and model.r2 > 0.99


def test_cost_grows_with_size_and_features():
    model = DEFAULT_MODEL
    small = model.predict(10**9, 1, 0, 0).seconds
    assert model.predict(2 * 10**9, 1, 0, 0).seconds > small
    assert model.predict(10**9, 3, 0, 0).seconds >= small
    assert model.predict(10**9, 1, 8, 0).seconds >= small
    assert model.predict(10**9, 1, 0, 8).seconds >= small


def test_fit_needs_enough_runs_and_load_rejects_garbage(tmp_path):
    with pytest.raises(CostModelError, match="at least 5"):
        fit([Run(10**9, 1, 0, 0, 10.0)])
    bad = tmp_path / "model.json"
    bad.write_text("{not json")
    with pytest.raises(CostModelError, match="not a cost model"):
        load(bad)
    assert load(tmp_path / "absent.json") is DEFAULT_MODEL
    model = fit([Run(s, z, 0, 0, s / 1e8 + z) for s in (1e8, 2e8, 4e8) for z in (1, 2)])
    model.save(tmp_path / "m.json")
    assert load(tmp_path / "m.json") == model
