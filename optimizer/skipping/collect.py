"""Which extended statistics a layout keeps per file, and how Spark computes them.

The same specification serves the OPTIMIZE job (aggregated per written file) and the estimator's
virtual files (aggregated per Spark partition of a clustered sample), so the estimate prunes with the
statistics the real table will have.

* min/max/NULL count of every Z and additional Z feature that is not a plain column with Delta
  statistics (timestamp bounds as epoch microseconds of the instant, timestamp_ntz bounds of the wall
  clock: `optimizer.table.stats.ntz_micros`, never through the session's time zone);
* the SOP bit of every SOP and additional SOP feature: 1 when some row of the file satisfies it;
* the exact values of every key column (`listed_columns`: a column a SOP feature lists keys of, as
  join-induced key sets do), where the file holds at most `extended.MAX_KEY_SET` of them. Spark
  collects a file's distinct keys while aggregating it, so the memory this takes is bounded by the
  rows of one file, never by the table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from optimizer.errors import ClusteringError, FeatureError
from optimizer.features import FeatureSet
from optimizer.skipping.extended import KEY_TYPES, MAX_KEY_SET, ExtendedStats, ValueRange, encode_value, key_set
from optimizer.spark_expr import expression_column, predicate_bit, typed_feature
from optimizer.table.stats import has_minmax, ntz_micros
from querylog.predicates.normalize import parse_canonical
from querylog.predicates.tree import column_path

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

MAX_SOP_BITS = 62  # the clustering vector is one signed 64-bit word


@dataclass(frozen=True)
class StatsSpec:
    ranges: tuple[tuple[str, str], ...]  # (expression, Spark type name)
    sop: tuple[str, ...]  # predicates, in bit order
    keys: tuple[tuple[str, str], ...] = ()  # (key column, Spark type name)
    zone: str | None = None  # the session zone Spark computes them in (`skipping.zones`)

    @property
    def key_types(self) -> dict[str, str]:
        return dict(self.keys)

    def aggregates(self) -> dict[str, Column]:
        from pyspark.sql import functions as F

        result: dict[str, Column] = {}
        for i, (expression, type_name) in enumerate(self.ranges):
            value = expression_column(expression)
            low = F.min(value)
            high = F.max(value)
            if type_name == "timestamp":  # the instant
                low = F.unix_micros(low)
                high = F.unix_micros(high)
            elif type_name == "timestamp_ntz":  # the wall clock, whatever the session's zone
                low = ntz_micros(low)
                high = ntz_micros(high)
            result[f"__xmin_{i}"] = low
            result[f"__xmax_{i}"] = high
            result[f"__xnull_{i}"] = F.count(F.lit(1)) - F.count(value)
        for i, predicate in enumerate(self.sop):
            result[f"__sop_{i}"] = F.max(predicate_bit(predicate))
        for i, (column, _) in enumerate(self.keys):
            values = F.collect_set(F.col(f"`{column}`"))
            result[f"__xkeys_{i}"] = F.when(F.size(values) <= MAX_KEY_SET, values)
        return result

    def extended(self, row: Mapping[str, Any], run_id: str) -> ExtendedStats:
        ranges = {}
        for i, (expression, type_name) in enumerate(self.ranges):
            ranges[expression] = ValueRange(
                type_name,
                encode_value(type_name, row[f"__xmin_{i}"], is_max=False),
                encode_value(type_name, row[f"__xmax_{i}"], is_max=True),
                int(row[f"__xnull_{i}"]),
            )
        bits = "".join("1" if row[f"__sop_{i}"] else "0" for i in range(len(self.sop)))
        found = {column: key_set(type_name, row[f"__xkeys_{i}"]) for i, (column, type_name) in enumerate(self.keys)}
        keys = {column: values for column, values in found.items() if values is not None}
        return ExtendedStats(run_id, ranges, self.sop, bits, float_max_includes_nan=True, key_sets=keys, zone=self.zone)


def stats_spec(frame: DataFrame, features: FeatureSet, plain_with_stats: set[str]) -> StatsSpec:
    """The statistics to keep for `features` on `frame`'s schema: ranges only of expressions whose type
    has min/max (`has_minmax`, as Delta's own statistics), computed in the zone of `frame`'s session.
    Raises `ClusteringError` naming a feature that is not allowed, that Spark cannot evaluate, or a Z
    feature whose type has no order."""
    expressions = [
        f.expression
        for f in (*features.z, *features.z_add)
        if not (f.is_plain_column and f.expression in plain_with_stats)
    ]
    sop = tuple(f.predicate for f in (*features.sop, *features.sop_add))
    types = _types_of(frame, [(e, False) for e in expressions] + [(p, True) for p in sop])
    _check_orderable(features, dict(zip(expressions, types[: len(expressions)], strict=True)))
    ranged = [(e, t) for e, t in zip(expressions, types[: len(expressions)], strict=True) if has_minmax(t)]
    schema = {f.name.lower(): (f.name, f.dataType.simpleString()) for f in frame.schema.fields}
    # key sets where queries test keys against lists: IN predicates, and joined features' fact keys
    # (the dimension filters reach the files as key lists, `optimizer.joins`)
    wanted = dict.fromkeys([*listed_columns(sop), *(j.fact_column for j in features.joined)])
    keys = tuple(schema[c] for c in wanted if c in schema and schema[c][1] in KEY_TYPES)
    zone = frame.sparkSession.conf.get("spark.sql.session.timeZone", None)  # what HOUR(ts) etc. are read in
    return StatsSpec(tuple(ranged), sop, keys, zone)


# Types Spark cannot sort, wherever they occur in a type's simpleString (a field named so is followed by ":")
_UNORDERED = re.compile(r"(^|[<,:])(variant($|[>,])|map<)")


def _check_orderable(features: FeatureSet, types: Mapping[str, str]) -> None:
    """Refuse, before any work, a Z feature Spark cannot sort (a VARIANT, a MAP, a struct holding one):
    the layout orders rows by it. Plain columns with Delta statistics are orderable by definition."""
    for feature in features.z:
        type_name = types.get(feature.expression)
        if type_name is not None and _UNORDERED.search(type_name):
            raise ClusteringError(
                f"Z feature {feature.expression!r} is of type {type_name}, which has no order to cluster on; "
                "cast it to a type that has one (e.g. a number or a string)"
            )


def listed_columns(predicates: Sequence[str]) -> list[str]:
    """Lower-cased top-level columns that `predicates` test against a list of constants, in order."""
    found: list[str] = []
    for text in predicates:
        node = parse_canonical(text)
        path = column_path(node.this) if isinstance(node, exp.In) and not node.args.get("query") else None
        if path is not None and len(path) == 1 and path[0].lower() not in found:
            found.append(path[0].lower())
    return found


def _types_of(frame: DataFrame, features: Sequence[tuple[str, bool]]) -> list[str]:
    """Spark type names of (feature text, is predicate) on `frame`'s schema: one analysis for all of
    them; when that fails, feature by feature, to name the one Spark or the allow-list refuses."""
    try:
        columns = [
            (predicate_bit(text) if predicate else expression_column(text)).alias(f"f{i}")
            for i, (text, predicate) in enumerate(features)
        ]
        schema = frame.select(*columns).schema if columns else None
        return [schema[f"f{i}"].dataType.simpleString() for i in range(len(features))] if schema else []
    except Exception:  # Spark or the allow-list refused one: the pass below names it
        pass
    types = []
    for text, predicate in features:
        try:
            types.append(typed_feature(frame, text, as_predicate=predicate)[1])
        except FeatureError as err:
            raise ClusteringError(f"feature {text!r} cannot be evaluated: {err}") from err
    return types


def sop_vector(predicates: Sequence[str]) -> Column:
    """The clustering bit vector of a row: bit k set when the row satisfies predicate k."""
    from pyspark.sql import functions as F

    if len(predicates) > MAX_SOP_BITS:
        raise ClusteringError(f"at most {MAX_SOP_BITS} SOP clustering features, got {len(predicates)}")
    vector = F.lit(0).cast("long")
    for k, predicate in enumerate(predicates):
        vector = vector.bitwiseOR(F.shiftleft(predicate_bit(predicate).cast("long"), k))
    return vector
