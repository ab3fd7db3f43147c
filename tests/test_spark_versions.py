"""What deltaopt needs of PySpark on every supported Spark line (issue 46): Arrow collection without
4.0's ``toArrow``, an API gap reported as an error rather than as every candidate "not evaluable",
and the Delta engine jar named for the installed PySpark."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from optimizer import delta_jars
from optimizer.errors import SparkRuntimeError


@pytest.mark.parametrize(
    ("pyspark", "installed", "scala", "coordinates"),
    [
        ("3.5.9", None, "2.12", "delta-spark_2.12:3.3.3"),
        ("3.5.9", "3.2.1", "2.12", "delta-spark_2.12:3.2.1"),
        ("3.5.1", "3.3.2", "2.13", "delta-spark_2.13:3.3.2"),  # Dataproc Serverless 2.2: Spark 3.5 on Scala 2.13
        ("4.0.5", "4.0.1", "2.13", "delta-spark_2.13:4.0.1"),
        ("4.0.5", None, "2.13", "delta-spark_2.13:4.0.1"),
        ("4.1.1", "4.3.1", "2.13", "delta-spark_4.1_2.13:4.3.1"),
        ("4.1.4", None, "2.13", "delta-spark_4.1_2.13:4.3.1"),
        ("4.2.0", "4.4.0", "2.13", "delta-spark_4.2_2.13:4.4.0"),
    ],
)
def test_the_delta_jar_follows_the_installed_pyspark(pyspark, installed, scala, coordinates):
    release = delta_jars.delta_release(pyspark, installed)
    assert f"{delta_jars.artifact(release, pyspark, scala)}:{release}" == coordinates


@pytest.mark.parametrize(("pyspark", "installed"), [("3.4.1", None), ("4.3.0", None), ("4.1.1", "4.0.1")])
def test_a_pyspark_outside_the_matrix_is_refused_up_front(pyspark, installed):
    with pytest.raises(SparkRuntimeError, match=r"supported: Spark 3\.5 \+ Delta 3\.2/3\.3 \(Scala 2\.12\)"):
        delta_jars.delta_release(pyspark, installed)


def test_the_cached_jar_check_follows_the_artifact_name(tmp_path, monkeypatch):
    jars = tmp_path / "jars"
    jars.mkdir()
    monkeypatch.setenv(delta_jars.JARS_ENV, str(tmp_path))
    monkeypatch.setattr(delta_jars, "pyspark_version", lambda: "4.1.1")
    monkeypatch.setattr(delta_jars.metadata, "version", lambda name: {"delta-spark": "4.3.1"}[name])
    monkeypatch.setattr(delta_jars, "scala_binary", lambda: "2.13")
    names = ["io.delta_delta-spark_2.13-4.3.1.jar", "io.delta_delta-storage-4.3.1.jar", "org.x_y-1.jar"]
    for name in names:
        (jars / name).touch()
    assert delta_jars.cached_jars() is None  # the unsuffixed jar is built for Spark 4.2: not this session's
    (jars / "io.delta_delta-spark_4.1_2.13-4.3.1.jar").touch()
    found = [p.name for p in delta_jars.cached_jars() or []]
    assert found == sorted(["io.delta_delta-spark_4.1_2.13-4.3.1.jar", *names[1:]])
    assert delta_jars.coordinates() == "io.delta:delta-spark_4.1_2.13:4.3.1"


@pytest.fixture
def typed_frame(spark):
    from pyspark.sql.types import (
        ArrayType,
        DateType,
        DecimalType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    schema = StructType(
        [
            StructField("id", LongType()),
            StructField("at", TimestampType()),
            StructField("day", DateType()),
            StructField("amount", DecimalType(18, 3)),
            StructField("tags", MapType(StringType(), StringType())),
            StructField("items", ArrayType(LongType())),
            StructField("inner", StructType([StructField("s", StringType())])),
        ]
    )
    at, day = dt.datetime(2024, 1, 1, 3, 4, 5, 123456), dt.date(2024, 2, 1)
    rows = [(i, at, day, Decimal(f"{i}.125"), {"k": str(i)}, [i], (str(i),)) for i in range(5)]
    return spark.createDataFrame([*rows, (9, None, None, None, None, None, None)], schema)


@pytest.mark.spark
@pytest.mark.parametrize("rows", [None, 0, 3])
def test_arrow_collection_is_the_table_to_arrow_gives(typed_frame, rows):
    from optimizer.spark_arrow import to_arrow

    frame = typed_frame if rows is None else typed_frame.limit(rows)
    ours, spark_own = to_arrow(frame), frame.toArrow()
    assert ours.schema == spark_own.schema
    assert ours.equals(spark_own)
    assert ours.num_rows == (6 if rows is None else rows)


@pytest.mark.spark
def test_a_session_that_cannot_collect_arrow_is_an_error_not_every_candidate_unevaluable(spark, monkeypatch):
    from pyspark.sql.classic.dataframe import DataFrame

    from optimizer.analysis.sample import evaluate

    sample = spark.range(50).selectExpr("id", "id % 5 AS x")
    for missing in ("toArrow", "_collect_as_arrow"):  # as on a Spark Connect client of 3.5
        for cls in DataFrame.__mro__:
            if missing in vars(cls):
                monkeypatch.delattr(cls, missing)
    with pytest.raises(SparkRuntimeError, match=r"cannot collect a .* DataFrame as Arrow: it has neither toArrow"):
        evaluate(sample, ["x"], ["x = 1"])
