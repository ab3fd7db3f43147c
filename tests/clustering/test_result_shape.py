"""The JSON an OPTIMIZE run gives (`OptimizeResult.as_dict`: the CLI's ``--json``, read back by remote
executors) keeps its shape whoever lays the table out: deltaopt's layout and a liquid table's Delta
OPTIMIZE (issue 50 made the result typed; the JSON must not change). Golden files hold the keys in their
order, the committer and the shape, not the numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optimizer.clustering.job import optimize
from optimizer.features import FeatureSet
from optimizer.table import open_table
from tests.clustering.liquid import append, liquid_table
from tests.golden import check_golden, json_shape

pytestmark = pytest.mark.spark

WANTED = FeatureSet.from_dict({"z": ["b"], "sop": ["a IN (1, 2)"]})


def _lines(record: dict) -> list[str]:
    """The top-level and ``output`` keys in order, who committed, and the shape of every value."""
    return [
        f"# keys: {', '.join(record)}",
        f"# output keys: {', '.join(record['output'])}",
        f"# committed_by: {record['committed_by']}",
        *json_shape(record),
    ]


def _record(spark, path: str) -> dict:
    result = optimize(spark, open_table(path), WANTED, 16_000)
    assert result.version is not None  # a run that committed: every section is filled
    return json.loads(json.dumps(result.as_dict(), default=str))


def test_a_deltaopt_layout_run_gives_the_same_json(spark, tmp_path: Path):
    path = str(tmp_path / "plain")
    spark.sql(f"CREATE TABLE delta.`{path}` (a INT, b BIGINT) USING delta")
    for start in (0, 600, 1200):
        append(spark, path, start)
    check_golden("records/optimize-result-deltaopt.txt", _lines(_record(spark, path)))


def test_a_liquid_run_by_delta_gives_the_same_json(spark, tmp_path: Path):
    path = liquid_table(spark, str(tmp_path / "liquid"))
    check_golden("records/optimize-result-delta-liquid.txt", _lines(_record(spark, path)))
