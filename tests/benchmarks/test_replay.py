"""The replay benchmark's machinery at a tiny scale: its invariants, not its figures."""

from __future__ import annotations

import pytest

from benchmarks.replay_bench import STRATEGIES, TABLES, replay
from benchmarks.replay_report import mismatches, render

# 4 batches keep every phase: the halfway runs after batch 2 (count // 2 - 1) and the drifted queries
# arrive with batch 4 ((5 * count + 7) // 8); `python -m benchmarks replay` runs 8
COUNT = 4


@pytest.mark.spark
def test_replay_preserves_rows_is_sound_and_measures_every_strategy(spark, tmp_path):
    result = replay(spark, scale=0.005, count=COUNT, per_batch=2, work=tmp_path, progress=lambda _: None)

    assert mismatches(result) == [], "rows matched over the kept files must equal rows over every file"
    for strategy in STRATEGIES:
        assert result.rows[strategy] == result.rows["none"], f"{strategy} changed the tables' rows"
        batches = {s.batch for s in result.scans if s.strategy == strategy}
        assert batches == set(range(COUNT)), f"{strategy} was not measured on every batch: {sorted(batches)}"
        assert all(t.insert > 0 for t in result.times[strategy]), f"{strategy}: an insert was not timed"
    for name in TABLES:
        assert result.rows["none"][name][0] > 0, f"{name} is empty"
    halfway = result.times["expert z_order"][result.halfway]
    assert halfway.optimize > 0, "the expert's z_order did not run halfway"
    assert result.times["deltaopt optimize"][result.halfway].optimize > 0, "the manual deltaopt run did not run"
    assert len(result.actions) == COUNT * len(TABLES), "the service did not tick once per table per batch"
    assert "0 mismatches" in render(result, []), "the report must state the soundness cross-check"
