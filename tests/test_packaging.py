"""The wheel a cluster installs: it must not bring its own Spark or Delta onto a runtime that has them."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNTIME_OWNED = {"pyspark", "delta-spark"}  # what Databricks Runtime (and any Spark cluster) provides
DBR_SPARK = {"17": "4.0"}  # Databricks Runtime major -> its Apache Spark line (17.3 LTS: Spark 4.0)


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower()


def test_the_base_requirements_leave_spark_and_delta_to_the_runtime():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not {_name(r) for r in project["dependencies"]} & RUNTIME_OWNED
    embedded = {_name(r) for r in project["optional-dependencies"]["embedded"]}
    assert embedded == RUNTIME_OWNED  # the embedded Spark is one extra away


def test_the_job_spec_targets_a_runtime_with_the_spark_line_deltaopt_is_built_for():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pyspark = next(r for r in project["optional-dependencies"]["embedded"] if _name(r) == "pyspark")
    line = re.search(r">=(\d+\.\d+)", pyspark).group(1)  # type: ignore[union-attr]
    spec = json.loads((ROOT / "deploy" / "databricks-job.json").read_text())
    versions = [c["new_cluster"]["spark_version"] for c in spec["job_clusters"]]
    assert versions and all(DBR_SPARK[v.split(".")[0]] == line and "scala2.13" in v for v in versions)
    (task,) = spec["tasks"]
    assert (
        task["python_wheel_task"]["entry_point"] == "deltaopt" and "--config" in task["python_wheel_task"]["parameters"]
    )
