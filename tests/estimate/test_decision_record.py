"""The decision record as JSON, value by value: typed sections must serialise exactly as the dicts did.

The golden file holds three decisions of one table (too little new data; no clustering feature; an
optimize with the feature search, layouts compared, key statistics and scans outside the window), keys
in the order `as_dict` yields them, every run of digits masked: a renamed key, a moved section or a
changed string fails it, a changed number does not.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from costmodel.cost import CostModel
from optimizer.analysis.search import SearchResult
from optimizer.config import Thresholds
from optimizer.estimate.record import AnalysisSummary, KeyStatistics, ListedCandidate
from optimizer.service.logged import LoggedDecision, LoggedJob
from tests.estimate.workloads import NOW, records
from tests.golden import check_golden, masked


@pytest.mark.spark
def test_a_decisions_json_keeps_its_keys_and_values(spark, tmp_path):
    from pyspark.sql import functions as F

    from optimizer.analysis import TableContext
    from optimizer.estimate.decision import estimate
    from optimizer.table import open_table
    from querylog.store import QueryLogTable

    table = open_table(str(tmp_path / "t"))
    frame = (
        spark.range(40000)
        .withColumn("x", (F.col("id") * 7919) % 1000)
        .withColumn("pad", F.sha2(F.col("id").cast("string"), 256))
    )
    # only `id` collects min/max: the clustering key `x` needs the property change (key_statistics)
    table.create(spark, frame.repartition(8), configuration={"delta.dataSkippingNumIndexedCols": "1"})
    log = QueryLogTable(str(tmp_path / "t_querylog"))
    log.append([r for v in range(0, 1000, 25) for r in records(f"x = {v}", count=3)])
    log.append(records("x = 3", count=2, age=timedelta(days=30)))  # outside the 7-day window
    thresholds = Thresholds(
        min_new_bytes=1, target_file_size=200_000, sample_rows=20000, min_comparison_points=3, cost_per_mb_read=1.0
    )
    cheap = CostModel(overhead=1.0, base=10.0, per_z=1.0, per_sop=1.0, per_additional=0.1)

    too_little = estimate(TableContext(spark, table, "t", log, Thresholds(min_new_bytes=10**12), NOW, cheap))
    unqueried = estimate(TableContext(spark, table, "unqueried", log, thresholds, NOW, cheap))
    chosen = estimate(TableContext(spark, table, "t", log, thresholds, NOW, cheap))
    assert chosen.action == "optimize" and chosen.key_statistics is not None, chosen.reason
    text = json.dumps([d.as_dict() for d in (too_little, unqueried, chosen)], indent=1, default=str)
    check_golden("records/decision-values.txt", masked(text, str(tmp_path)))
    # what the benchmarks read back from records gives the same sections again
    record = json.loads(json.dumps(chosen.as_dict(), default=str))
    assert AnalysisSummary.from_dict(record["analysis"]) == chosen.analysis
    assert SearchResult.from_dict(record["search"]).as_dict() == record["search"]
    assert KeyStatistics.from_dict(record["key_statistics"]) == chosen.key_statistics


def test_sections_read_back_from_records_of_earlier_versions():
    """A record without the later keys still reads: an analysis without malformed rows or joins, a
    search of one dropped candidate, and a decision-log line holding the tick's time under "seconds"."""
    analysis = AnalysisSummary.from_dict({"scans": 4, "candidates": [{"feature": "x", "role": "z", "reason": "r"}]})
    assert analysis == AnalysisSummary(4, 0, 0, (ListedCandidate("x", "z", "r"),), {})
    assert "candidates_not_listed" not in analysis.as_dict()
    search = {
        "chosen": ["sop: a = 1"],
        "benefit": 2.5,
        "cost": 1.25,
        "estimates": 2,
        "seconds": 0.5,
        "stopped": "round 2: none pays",
        "candidates": [
            {
                "kind": "z",
                "feature": "b",
                "chosen": False,
                "round": None,
                "marginal_benefit": 0.1,
                "marginal_cost": 0.3,
                "estimates": 1,
                "reason": "dropped",
            },
        ],
    }
    read = SearchResult.from_dict(search)
    assert read.chosen_names == ["sop: a = 1"] and [f.predicate for f in read.features.sop] == ["a = 1"]
    assert read.as_dict() == search
    old = {"ts": "2024-05-01T12:00:00+00:00", "table": "t", "action": "skip", "reason": "r", "seconds": 2.0}
    line = LoggedDecision.from_dict(old)
    assert (line.version, line.job, line.features) == ("?", None, None)
    job = LoggedDecision.from_dict({**old, "job": {"executor": "local", "files_in": 3}}).job
    assert job == LoggedJob("local", None, files_in=3)
    # a layout this version cannot read whole (a newer curve) still prints its Z and SOP; a missing list reads None
    newer = LoggedDecision.from_dict({**old, "features": {"z": ["x"], "curve": "from-a-later-version"}}).features
    assert newer is not None and newer.line() == "features: z=['x'] sop=None"
