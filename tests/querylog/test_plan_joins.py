"""Join-derived filters from Spark plans: an event log's query that left no SQL text derives its fact
scan's key filters from the plan's inner equi-joins, as the SQL path does."""

from __future__ import annotations

import json

import pytest

from querylog.capture import SqlContext
from querylog.importers.eventlog import import_event_log
from querylog.importers.plan_joins import plan_join_keys
from querylog.predicates.attribute import JoinKey
from querylog.records import DerivedFilter
from querylog.store import QueryLogTable
from tests.golden import FIXTURES
from tests.querylog.test_querylog import SPARK4_ALIASES


def _scan(name: str, output: str) -> dict:  # type: ignore[type-arg]
    return {
        "nodeName": "Scan parquet",
        "simpleString": f"FileScan parquet [{output}] Batched: true",
        "metadata": {"Location": f"InMemoryFileIndex(1 paths)[file:/wh/{name}]", "ReadSchema": "struct<>"},
        "children": [],
    }


def _join(kind: str, left: str, right: str, *children: dict) -> dict:  # type: ignore[type-arg]
    return {
        "nodeName": "BroadcastHashJoin",
        "simpleString": f"BroadcastHashJoin [{left}], [{right}], {kind}, BuildRight, false",
        "children": list(children),
    }


def test_keys_are_the_scans_own_columns_on_inner_joins_only():
    fact, part = _scan("lineitem", "l_partkey#1L,l_price#2"), _scan("part", "p_partkey#7L,p_brand#8")
    identity = lambda node: node["metadata"]["Location"].rsplit("/", 1)[-1].rstrip("]")  # noqa: E731
    filters = lambda node: ("p_brand = 'B1'",) if identity(node) == "part" else ()  # noqa: E731
    keys = plan_join_keys(_join("Inner", "l_partkey#1L", "p_partkey#7L", fact, part), identity, filters)
    assert keys == {id(fact): [JoinKey("l_partkey", "part", "p_partkey", ("p_brand = 'B1'",))]}
    assert plan_join_keys(_join("LeftOuter", "l_partkey#1L", "p_partkey#7L", fact, part), identity, filters) == {}
    computed = _join("Inner", "l_partkey#1L", "(p_partkey#7L + 1)", fact, part)  # not the dimension's column
    assert plan_join_keys(computed, identity, filters) == {}
    other = _join("Inner", "l_partkey#1L", "p_partkey#99L", fact, part)  # an id no scan outputs
    assert plan_join_keys(other, identity, filters) == {}


def test_an_event_log_plan_derives_the_fact_scans_key_filters(tmp_path):
    asked: list[JoinKey] = []

    def derive(key: JoinKey) -> tuple[DerivedFilter, ...]:
        asked.append(key)
        return (
            DerivedFilter(
                f"{key.column} <= 99", f"{key.other}.{key.other_column} WHERE {' AND '.join(key.other_filters)}"
            ),
        )

    log = QueryLogTable(str(tmp_path / "log"))
    context = SqlContext(aliases=SPARK4_ALIASES, watched={"lineitem"}, derive=derive)
    report = import_event_log(log, FIXTURES / "eventlog" / "spark4-uncompressed", context)
    assert report.warnings == ()
    assert asked == [JoinKey("l_orderkey", "orders", "o_orderkey", ("o_orderdate < CAST('1995-03-15' AS DATE)",))]
    (joined,) = [r for r in log.read("lineitem") if r.derived]
    assert "l_orderkey <= 99" in joined.filters and len(joined.filters) == 2
    assert joined.derived == (
        DerivedFilter("l_orderkey <= 99", "orders.o_orderkey WHERE o_orderdate < CAST('1995-03-15' AS DATE)"),
    )


def test_a_recorded_dataframe_join_derives_the_fact_scans_key_filters(spark, tmp_path):
    """Live recording of DataFrame code: the fact scan joined to a filtered dimension gets the same
    join-derived filters as the SQL path (the dimension named by its path in the plan)."""
    import pyarrow as pa
    from deltalake import write_deltalake
    from pyspark.sql import functions as F

    from optimizer.joins import JoinDeriver
    from querylog.dataframe import record_dataframe
    from querylog.recorder import Recorder

    part = str(tmp_path / "part")
    write_deltalake(
        part, pa.table({"p_partkey": pa.array(range(40), pa.int64()), "p_brand": [f"B{k % 4}" for k in range(40)]})
    )
    fact = str(tmp_path / "lineitem")
    spark.range(400).select((F.col("id") % 40).alias("l_partkey"), F.col("id").alias("l_price")).write.parquet(fact)
    brand = spark.read.parquet(part).where(F.col("p_brand") == "B1")
    df = spark.read.parquet(fact).join(brand, F.col("l_partkey") == F.col("p_partkey")).select("l_price")
    log = QueryLogTable(str(tmp_path / "log"))
    context = SqlContext(watched={"lineitem"}, derive=JoinDeriver(spark, {"part": part}))
    with Recorder(log, tmp_path / "spill", context=context) as recorder:
        assert record_dataframe(recorder, df, {fact: "lineitem"}) == 2
    (scan,) = log.read("lineitem")
    keys = ", ".join(str(k) for k in range(1, 40, 4))
    assert f"l_partkey IN ({keys})" in scan.filters
    assert {d.via for d in scan.derived} == {"part.p_partkey WHERE p_brand = 'B1'"}


def plan_scan(path: str, output: str, schema: str, pushed: str = "") -> dict:  # type: ignore[type-arg]
    """A file scan node of `path` outputting `output` (``a#1L,b#2``), with its read schema and pushed filters."""
    return {
        "nodeName": "Scan parquet",
        "simpleString": f"FileScan parquet [{output}] Batched: true",
        "metadata": {
            "Location": f"InMemoryFileIndex(1 paths)[file:{path}]",
            "ReadSchema": f"struct<{schema}>",
            "PushedFilters": f"[{pushed}]",
        },
        "children": [],
    }


def inner_join(left: str, right: str, *children: dict) -> dict:  # type: ignore[type-arg]
    return _join("Inner", left, right, *children)


def execution_line(
    execution_id: int,
    plan: dict,  # type: ignore[type-arg]
    description: str = "count at NativeMethodAccessorImpl.java:0",
) -> str:
    """An event log's SQL execution start whose plan is `plan`; by default without SQL text (a DataFrame
    action's `description`)."""
    return json.dumps(
        {
            "Event": "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart",
            "executionId": execution_id,
            "description": description,
            "time": 1_700_000_000_000 + execution_id,
            "sparkPlanInfo": plan,
        }
    )


@pytest.mark.parametrize(
    "description",
    ["count at NativeMethodAccessorImpl.java:0", "SELECT * FROM brand_view"],
    ids=["no-sql-text", "sql-text-reading-no-watched-table"],
)
def test_sql_less_executions_on_one_dimension_derive_in_one_pass(spark, tmp_path, description):
    """Executions captured from their plans are prefetched with the SQL texts: two DataFrame queries (or
    two statements whose text reads no watched table, a view: captured from the plan too) filtering one
    dimension differently cost one Spark pass over it, not one per key at capture."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from optimizer.joins import JoinDeriver

    part = str(tmp_path / "part")
    write_deltalake(
        part, pa.table({"p_partkey": pa.array(range(40), pa.int64()), "p_brand": [f"B{k % 4}" for k in range(40)]})
    )
    fact = str(tmp_path / "lineitem")
    lines = []
    for number, brand in enumerate(("B1", "B2")):
        fact_scan = plan_scan(fact, "l_partkey#1L,l_price#2L", "l_partkey:bigint,l_price:bigint")
        brand_filter = f"IsNotNull(p_brand), EqualTo(p_brand,{brand})"
        part_scan = plan_scan(part, "p_partkey#7L,p_brand#8", "p_partkey:bigint,p_brand:string", brand_filter)
        plan = inner_join("l_partkey#1L", "p_partkey#7L", fact_scan, part_scan)
        lines.append(execution_line(number, plan, description))
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join(lines) + "\n")
    deriver = JoinDeriver(spark, {"part": part})
    log = QueryLogTable(str(tmp_path / "log"))
    context = SqlContext(aliases={fact: "lineitem"}, watched={"lineitem"}, derive=deriver)
    report = import_event_log(log, events, context)
    assert report.warnings == ()
    scans = sorted(log.read("lineitem"), key=lambda r: r.ts)
    assert [{d.via for d in s.derived} for s in scans] == [
        {"part.p_partkey WHERE p_brand = 'B1'"},
        {"part.p_partkey WHERE p_brand = 'B2'"},
    ]
    assert f"l_partkey IN ({', '.join(str(k) for k in range(2, 40, 4))})" in scans[1].filters
    assert deriver.evaluated == 1, "both executions' keys in one batched pass over part"
