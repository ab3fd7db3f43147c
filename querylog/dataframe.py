"""Recording the table scans of a PySpark DataFrame.

The physical plan is converted with Spark's own ``SparkPlanInfo.fromSparkPlan`` (the structure the
event log serialises), so a DataFrame is read by the same code as an event-log execution: scan
location, read schema, pushed and unambiguous data filters, and the inner equi-joins join-derived
filters come from. Needs classic PySpark (a JVM gateway);
under Spark Connect, record SQL text or import event logs instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from querylog.errors import QueryLogError
from querylog.importers.eventlog import _dimension_filters, scan_filters_from_plan, scan_identity
from querylog.importers.plan_joins import plan_join_keys, scan_nodes
from querylog.predicates.attribute import JoinKey

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from querylog.recorder import Recorder


def _plan_info(spark: Any, plan: Any) -> dict[str, Any]:
    info = spark._jvm.org.apache.spark.sql.execution.SparkPlanInfo.fromSparkPlan(plan)
    return _to_dict(info)


def _to_dict(info: Any) -> dict[str, Any]:
    metadata = {}
    iterator = info.metadata().iterator()
    while iterator.hasNext():
        entry = iterator.next()
        metadata[str(entry._1())] = str(entry._2())
    children = info.children()
    return {
        "nodeName": str(info.nodeName()),
        "simpleString": str(info.simpleString()),
        "metadata": metadata,
        "children": [_to_dict(children.apply(i)) for i in range(children.size())],
    }


def dataframe_scans(df: DataFrame, aliases: Mapping[str, str] | None = None) -> list[tuple[str, list[str], list[str]]]:
    """(table identity, filters as SQL, columns read) for every file scan of `df`'s plan."""
    return [(table_id, filters, columns) for table_id, filters, columns, _ in _scans(df, aliases or {})]


def _scans(df: DataFrame, aliases: Mapping[str, str]) -> list[tuple[str, list[str], list[str], list[JoinKey]]]:
    """`dataframe_scans` with each scan's inner equi-joins with filtered scans (`plan_joins`)."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        raise QueryLogError("recording a DataFrame needs classic PySpark; under Spark Connect record its SQL text")
    plan = _plan_info(df.sparkSession, jdf.queryExecution().sparkPlan())
    identity = partial(scan_identity, aliases)
    joins = plan_join_keys(plan, identity, _dimension_filters)
    scans = []
    for node in scan_nodes(plan):
        filters, columns = scan_filters_from_plan(node)
        scans.append((identity(node), filters, columns, joins.get(id(node), [])))
    return scans


def record_dataframe(recorder: Recorder, df: DataFrame, aliases: Mapping[str, str] | None = None) -> int:
    """Record the scans of `df` (call it where the DataFrame is executed), with their joins: where the
    recorder's context derives, a fact scan joined to a filtered dimension gets its join-derived
    filters as from SQL. Returns scans recorded."""
    scans = _scans(df, aliases or {})
    for table_id, filters, columns, joins in scans:
        recorder.record(table_id, filters, columns, joins=joins)
    return len(scans)
