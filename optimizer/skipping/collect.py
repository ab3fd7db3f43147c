"""Which extended statistics a layout keeps per file, and how Spark computes them.

The same specification serves the OPTIMIZE job (aggregated per written file) and the estimator's
virtual files (aggregated per Spark partition of a clustered sample), so the estimate prunes with the
statistics the real table will have.

* min/max/NULL count of every Z and additional Z feature that is not a plain column with Delta
  statistics (timestamps aggregated as epoch microseconds);
* the SOP bit of every SOP and additional SOP feature: 1 when some row of the file satisfies it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from optimizer.errors import ClusteringError, FeatureError
from optimizer.features import FeatureSet
from optimizer.skipping.extended import ExtendedStats, ValueRange, encode_value
from optimizer.spark_expr import expression_column, predicate_bit, typed_feature

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

MAX_SOP_BITS = 62  # the clustering vector is one signed 64-bit word


@dataclass(frozen=True)
class StatsSpec:
    ranges: tuple[tuple[str, str], ...]  # (expression, Spark type name)
    sop: tuple[str, ...]  # predicates, in bit order

    def aggregates(self) -> dict[str, Column]:
        from pyspark.sql import functions as F

        result: dict[str, Column] = {}
        for i, (expression, type_name) in enumerate(self.ranges):
            value = expression_column(expression)
            if type_name in ("timestamp", "timestamp_ntz"):
                value = F.unix_micros(value.cast("timestamp"))
            result[f"__xmin_{i}"] = F.min(value)
            result[f"__xmax_{i}"] = F.max(value)
            result[f"__xnull_{i}"] = F.count(F.lit(1)) - F.count(value)
        for i, predicate in enumerate(self.sop):
            result[f"__sop_{i}"] = F.max(predicate_bit(predicate))
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
        return ExtendedStats(run_id, ranges, self.sop, bits, float_max_includes_nan=True)


def stats_spec(frame: DataFrame, features: FeatureSet, plain_with_stats: set[str]) -> StatsSpec:
    """The statistics to keep for `features` on `frame`'s schema. Raises `ClusteringError` naming a
    feature that is not allowed or that Spark cannot evaluate."""
    expressions = [
        f.expression
        for f in (*features.z, *features.z_add)
        if not (f.is_plain_column and f.expression in plain_with_stats)
    ]
    sop = tuple(f.predicate for f in (*features.sop, *features.sop_add))
    types = _types_of(frame, [(e, False) for e in expressions] + [(p, True) for p in sop])
    return StatsSpec(tuple(zip(expressions, types[: len(expressions)], strict=True)), sop)


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
