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
        ("4.1.1", "4.2.0", "2.13", "delta-spark_4.1_2.13:4.2.0"),  # Fabric Runtime 2.0, Dataproc 3.0
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
    monkeypatch.setenv(delta_jars.JARS_ENV, str(tmp_path))
    monkeypatch.setattr(delta_jars, "pyspark_version", lambda: "4.1.1")
    monkeypatch.setattr(delta_jars.metadata, "version", lambda name: {"delta-spark": "4.3.1"}[name])
    monkeypatch.setattr(delta_jars, "scala_binary", lambda: "2.13")
    jars = delta_jars.delta_home() / "jars"
    jars.mkdir(parents=True)
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


def collected(row) -> dict:
    """`row` as Arrow's ``to_pylist`` gives it: timestamps as UTC instants, maps as key/value pairs."""
    values = row.asDict(recursive=True)
    if values["at"] is not None:
        values["at"] = values["at"].astimezone(dt.UTC)
    if values["tags"] is not None:
        values["tags"] = list(values["tags"].items())
    return values


@pytest.mark.spark
@pytest.mark.parametrize("rows", [None, 0, 3])
def test_arrow_collection_is_the_table_to_arrow_gives(typed_frame, rows):
    from optimizer.spark_arrow import to_arrow

    frame = typed_frame if rows is None else typed_frame.limit(rows)
    ours = to_arrow(frame)
    if hasattr(frame, "toArrow"):  # PySpark 4: the table Spark's own method gives
        spark_own = frame.toArrow()
        assert ours.schema == spark_own.schema
        assert ours.equals(spark_own)
    else:  # PySpark 3.5: the rows `collect` gives (its naive timestamps are the process's local time)
        assert ours.to_pylist() == [collected(row) for row in frame.collect()]
    assert ours.num_rows == (6 if rows is None else rows)


@pytest.mark.spark
def test_a_session_that_cannot_collect_arrow_is_an_error_not_every_candidate_unevaluable(spark, monkeypatch):
    from optimizer.analysis.sample import evaluate

    sample = spark.range(50).selectExpr("id", "id % 5 AS x")
    for missing in ("toArrow", "_collect_as_arrow"):  # as on a Spark Connect client of 3.5
        for cls in type(sample).__mro__:
            if missing in vars(cls):
                monkeypatch.delattr(cls, missing)
    with pytest.raises(SparkRuntimeError, match=r"cannot collect a .* DataFrame as Arrow: it has neither toArrow"):
        evaluate(sample, ["x"], ["x = 1"])


def test_two_delta_releases_sharing_one_cache_keep_their_jars_apart(tmp_path, monkeypatch):
    """Spark 4.1 pairs with Delta 4.2 and 4.3, whose poms pull different third-party jars: a cache shared by
    two environments (or one switched between them) must not put 4.2's jars on 4.3's classpath."""
    monkeypatch.setenv(delta_jars.JARS_ENV, str(tmp_path))
    monkeypatch.setattr(delta_jars, "pyspark_version", lambda: "4.1.1")
    monkeypatch.setattr(delta_jars, "scala_binary", lambda: "2.13")
    monkeypatch.setattr(delta_jars, "without_spark_modules", sorted)
    for release, extra in (("4.2.0", "io.unitycatalog_unitycatalog-client-0.4.1.jar"), ("4.3.1", "x_y-1.jar")):
        monkeypatch.setattr(
            delta_jars.metadata, "version", lambda name, release=release: {"delta-spark": release}[name]
        )
        jars = delta_jars.delta_home() / "jars"
        jars.mkdir(parents=True)
        for name in (f"io.delta_delta-spark_4.1_2.13-{release}.jar", f"io.delta_delta-storage-{release}.jar", extra):
            (jars / name).touch()
    assert [p.name for p in delta_jars.cached_jars() or []] == [
        "io.delta_delta-spark_4.1_2.13-4.3.1.jar",
        "io.delta_delta-storage-4.3.1.jar",
        "x_y-1.jar",
    ]


def test_a_session_on_a_pyspark_outside_the_matrix_is_refused_before_it_starts(monkeypatch):
    """With `spark.delta: auto` a Delta that fails to load falls back to delta-rs; an unsupported PySpark does
    not: it is refused, naming the matrix, before any session starts."""
    from optimizer.config import SparkSettings
    from optimizer.runtime import build_session

    monkeypatch.setattr(delta_jars, "pyspark_version", lambda: "4.3.0")
    started = []
    monkeypatch.setattr("optimizer.runtime._start", lambda *args: started.append(args))
    with pytest.raises(SparkRuntimeError, match=r"PySpark 4\.3\.0 is not supported; supported: Spark 3\.5"):
        build_session(SparkSettings(master="local[1]"))
    assert started == []
