"""The cut tree the workload asks of a layout (`clustering.cuts`), built on the estimate's sample from the
replay's queries: their Z-shaped conjuncts on plain columns (the layout's Z columns, and any other column
the workload compares with literals), literals typed as the sample's values of the column.

A literal is taken only where Spark's comparison and Python's agree on it (`skipping.values.constant`,
as pruning reads it): numbers with numeric columns (as a double for a floating column, so both sides
compare the same double), strings with strings, dates with dates, timestamps with an offset with
timestamp columns. Anything else (an offset-less timestamp whose instant depends on the reader's zone,
a string compared with a number, a timestamp_ntz column) is no comparison point, never an error.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from optimizer.analysis.workload import readable_z_shape
from optimizer.clustering.cut_growth import Comparison, Scan, build_tree
from optimizer.cut_tree import MAX_LEAVES, CutTree, fits_spark_decimal
from optimizer.estimate.replay import Query
from optimizer.features import FeatureSet, ZFeature
from optimizer.skipping.values import ZONE_META, Unknown, constant
from optimizer.spark_arrow import to_arrow
from querylog.predicates.normalize import parse_canonical, sql

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

MAX_ROWS = 100_000  # sampled rows the tree is grown on (evenly spaced past it)


def workload_cuts(
    sample: DataFrame,
    features: FeatureSet,
    queries: Sequence[Query],
    files: int,
    *,
    partitions: int = 1,
    partition_columns: Sequence[str] = (),
    row_groups: int = 1,
) -> CutTree | None:
    """The cut tree for `features` laid out into `files` files over `partitions` table partitions (about
    a file per leaf and partition, a leaf at least half one, at most `MAX_LEAVES`: files mix neither
    partitions nor leaves, so every partition holding every leaf writes partitions x leaves files, and
    leaves are budgeted `files // partitions`), or None where there is none to price: fewer than two curve
    dimensions (rows are then sorted by the one column's value: files are already ranges of it, and a
    tree only moves their ends; on a one-column layout with 40 point filters it priced 0.02% better,
    churn rather than a layout), no query comparing a plain column with a literal the column's values
    compare with, or no cut skipping anything (a single leaf). With `row_groups` (per file) above one,
    the tree grows on past its file cuts with row-group cuts (`CutTree.row_group`): up to `row_groups`
    times as many leaves in all (at most `MAX_LEAVES`), each at least half a row group."""
    files //= max(partitions, 1)
    if files < 2 or features.curve_dimensions < 2:
        return None
    partitioned = {c.lower() for c in partition_columns}  # files never mix partitions: nothing to cut
    by_lower = {c.lower(): c for c in sample.columns if c.lower() not in partitioned}
    wanted = [c for c in _compared(features, queries) if c.lower() in by_lower]
    if not wanted:
        return None
    table = to_arrow(sample.select(*[sample[by_lower[c.lower()]] for c in wanted]))
    spark_types = [sample.schema[by_lower[c.lower()]].dataType for c in wanted]
    kinds = {
        c: kind
        for c, field, spark_type in zip(wanted, table.schema, spark_types, strict=True)
        if (kind := arrow_family(field.type)) and getattr(spark_type, "collation", "UTF8_BINARY") == "UTF8_BINARY"
    }  # a collated string orders its own way, not as Python and the job's check (`cuts.check_cut_types`) do
    step = max(1, -(-table.num_rows // MAX_ROWS))
    values = {c: table.column(i).to_pylist()[::step] for i, c in enumerate(wanted) if c in kinds}
    return tree_of(values, kinds, queries, files, row_groups)


def tree_of(
    values: Mapping[str, Sequence[Any]], kinds: Mapping[str, str], queries: Sequence[Query], files: int, row_groups: int
) -> CutTree | None:
    """The tree `workload_cuts` grows over sampled `values` (column -> one value per row, `kinds` their
    literal families) for `files` files of `row_groups` row groups each (of one partition); None where no
    cut skips anything. The offline race (`benchmarks.race_offline`) grows its trees here too."""
    scans = [Scan(q.weight, comparisons(q, kinds)) for q in queries]
    rows = len(next(iter(values.values()), ()))
    if not rows or not any(s.comparisons for s in scans):
        return None
    leaves = files * max(row_groups, 1)
    within = (min(leaves, MAX_LEAVES), rows // (2 * leaves)) if row_groups > 1 else None
    coarse = (min(files, MAX_LEAVES), max(1, rows // (2 * files)))
    tree = build_tree(values, scans, max_leaves=coarse[0], min_leaf_rows=coarse[1], row_groups=within)
    return None if tree.is_leaf else tree


def _compared(features: FeatureSet, queries: Sequence[Query]) -> list[str]:
    """The plain columns the queries compare with literals (before the sample is read at all): the Z
    features' first, then the others (a recurring ``l_shipmode IN ('MAIL', 'SHIP')`` or ``l_quantity < 9``
    on a column no curve orders) in the order the workload first uses them. A tree cuts where its cuts
    skip most, so a column the curve leaves out costs the Z columns' cuts only where it pays more."""
    used: dict[str, None] = {}
    for query in queries:
        for conjunct in query.predicate.conjuncts:
            shape = readable_z_shape(sql(conjunct))
            if shape is not None and shape.op != "startswith" and ZFeature(shape.expression).is_plain_column:
                used.setdefault(shape.expression, None)
    plain = [f.column for f in features.z if f.is_plain_column and f.column in used]
    return list(dict.fromkeys([*plain, *used]))


def _shape(text: str, columns: set[str] | Mapping[str, str]) -> Any:
    shape = readable_z_shape(text)
    return shape if shape is not None and shape.expression in columns and shape.op != "startswith" else None


def arrow_family(kind: pa.DataType) -> str | None:
    """The literal family (`skipping.values.literal_family`) an Arrow column's values compare with; None:
    no cuts."""
    import pyarrow as pa

    if pa.types.is_floating(kind):
        return "double"
    if pa.types.is_integer(kind) or pa.types.is_decimal(kind):
        return "number"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return "string"
    if pa.types.is_date32(kind):
        return "date"
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        return "timestamp"
    return None


def comparisons(query: Query, kinds: Mapping[str, str]) -> tuple[Comparison, ...]:
    """The query's Z-shaped conjuncts on the `kinds` columns with literals typed for them."""
    found = []
    for conjunct in query.predicate.conjuncts:
        shape = _shape(sql(conjunct), kinds)
        if shape is None:
            continue
        typed = [_typed(point, kinds[shape.expression], query.predicate.zone) for point in shape.points]
        kept = [t for t in typed if t is not None]
        if kept and len(kept) == len(typed):  # an IN list with an item left out is no comparison point
            kind = "decimal" if any(t[0] == "decimal" for t in kept) else kept[0][0]
            found.append(Comparison(shape.expression, shape.op, kind, tuple(t[1] for t in kept)))
    return tuple(found)


def _typed(text: str, family: str, zone: str | None) -> tuple[str, Any] | None:
    """(`Cut.kind`, value) of one literal for a column of `family`; None where it is no comparison point."""
    node = parse_canonical(text)
    if zone is not None:
        node.meta[ZONE_META] = zone
    try:
        value = constant(node, "number" if family == "double" else family)
    except Unknown:
        return None
    if isinstance(value, Decimal):
        return _number(value, family)
    if isinstance(value, str | dt.date):
        return family, value
    return None  # a timestamp's span of instants, or NULL


def _number(value: Decimal, family: str) -> tuple[str, Any] | None:
    """A numeric literal as the double a floating column compares with, an integer, or a decimal Spark holds."""
    if family == "double":
        return "double", float(value)
    if value == value.to_integral_value() and abs(value) < 2**63:
        return "integer", int(value)
    return ("decimal", value) if fits_spark_decimal(value) else None
