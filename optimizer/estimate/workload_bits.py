"""The bit pattern the workload asks of a Z-order layout (`clustering.precision`), measured on the
estimate's sample: which of the replay's queries filter each curve dimension, and how selective those
filters are there.

A query filters a Z dimension (a Z feature, or a joined attribute's helper column, on which the replay
states dimension filters) with its Z-shaped conjuncts on that expression, and the SOP id with its
conjuncts that are the layout's SOP predicates. Their selectivity is the share of sampled rows on
which all of them are TRUE, counted in one aggregation over the sample for every (query, dimension).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from optimizer.analysis.workload import readable_z_shape
from optimizer.clustering.joined import with_joined
from optimizer.clustering.precision import dimension_weights, workload_pattern
from optimizer.clustering.zorder import ranges_for
from optimizer.errors import PYTHON_BUGS
from optimizer.estimate.replay import Query
from optimizer.features import FeatureSet
from optimizer.spark_expr import analysis_error, predicate_bit
from querylog.predicates.normalize import sql

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

log = logging.getLogger(__name__)

MAX_DISTINCT_FILTERS = 256  # distinct filters counted on the sample (`_heaviest`)

Filters = dict[tuple[int, int], list[str]]
"""(query index, dimension index) -> the query's conjuncts on that dimension."""


def workload_precision(
    sample: DataFrame, features: FeatureSet, queries: Sequence[Query], files: int
) -> tuple[int, ...]:
    """The bit pattern for `features` laid out into `files` files, or () where there is none to price:
    not Z-order, fewer than two dimensions, no query filtering one of them, or a pattern that is
    round-robin anyway. Each dimension is taken to have the bits `files` gives range ids (a dimension of
    fewer distinct values has fewer: the job passes over the pattern's bits it lacks)."""
    dimensions = features.curve_dimensions
    if features.curve != "z" or dimensions < 2:
        return ()
    filters = _heaviest(_dimension_filters(features, queries), queries)
    if not filters:
        return ()
    counts = _matching_rows(sample, features, filters)
    if counts is None:
        return ()
    rows, matching = counts
    by_query: dict[int, dict[int, float]] = {}
    for (q, d), count in matching.items():  # no sampled row matching: as selective as one row
        by_query.setdefault(q, {})[d] = max(count, 1) / rows
    weights = dimension_weights([(queries[q].weight, found) for q, found in by_query.items()], dimensions)
    return workload_pattern(weights, [ranges_for(files, dimensions).bit_length()] * dimensions)


def _dimension_filters(features: FeatureSet, queries: Sequence[Query]) -> Filters:
    """Each query's conjuncts on each curve dimension (in `FeatureSet.curve_dimensions` order: the Z
    features, the joined attributes, then the SOP id unless it leads)."""
    expressions = [f.expression for f in features.z] + [j.helper for j in features.joined]
    sop = {f.predicate for f in features.sop} if features.curve_dimensions > len(expressions) else set()
    found: Filters = {}
    for q, query in enumerate(queries):
        for conjunct in query.predicate.conjuncts:
            text = sql(conjunct)
            dimension = len(expressions) if text in sop else _z_dimension(text, expressions)
            if dimension is not None:
                found.setdefault((q, dimension), []).append(text)
    return found


def _heaviest(filters: Filters, queries: Sequence[Query]) -> Filters:
    """`filters` restricted to the `MAX_DISTINCT_FILTERS` distinct filters the workload weighs most (ties by
    their text): the aggregation counts one per distinct filter, so a workload of many literals (one per
    parameter value) would otherwise make the estimate's plan, and its time, grow without bound. The
    lightest filters left out weigh least in the pattern anyway."""
    weight: dict[tuple[str, ...], float] = {}
    for (q, _), texts in filters.items():
        weight[tuple(texts)] = weight.get(tuple(texts), 0.0) + queries[q].weight
    if len(weight) <= MAX_DISTINCT_FILTERS:
        return filters
    kept = set(sorted(weight, key=lambda texts: (-weight[texts], texts))[:MAX_DISTINCT_FILTERS])
    return {pair: texts for pair, texts in filters.items() if tuple(texts) in kept}


def _z_dimension(text: str, expressions: Sequence[str]) -> int | None:
    """The Z dimension a conjunct compares with literals, if it is one of `expressions`."""
    shape = readable_z_shape(text)
    if shape is None or shape.expression not in expressions:
        return None
    return expressions.index(shape.expression)


def _matching_rows(
    sample: DataFrame, features: FeatureSet, filters: Filters
) -> tuple[int, dict[tuple[int, int], int]] | None:
    """(sampled rows, for each (query, dimension) the rows its conjuncts there all hold on), one job
    with one count per distinct filter (queries differing only in the columns they read, or in filters
    on other dimensions, share it: the plan grows with the workload's distinct filters, not its queries);
    None (with a warning: the candidate is then not offered) when Spark cannot evaluate them. A joined
    attribute whose dimension cannot be read (`with_joined` warns) has no filters counted."""
    from pyspark.sql import functions as F

    frame, _ = with_joined(sample, features.joined)  # the joined attributes' helper columns
    missing = {len(features.z) + i for i, j in enumerate(features.joined) if j.helper not in frame.columns}
    wanted = {pair: tuple(texts) for pair, texts in sorted(filters.items()) if pair[1] not in missing}
    names = {texts: f"m{n}" for n, texts in enumerate(sorted(set(wanted.values())))}
    aggregates: list[Column] = [F.count(F.lit(1)).alias("rows")]
    try:
        for texts, name in names.items():
            bits = [predicate_bit(t) for t in texts]
            aggregates.append(F.sum(F.least(*bits) if len(bits) > 1 else bits[0]).alias(name))
        row = frame.agg(*aggregates).collect()[0]
    except Exception as err:  # a filter Spark or the allow-list refuses on this sample
        if isinstance(err, PYTHON_BUGS):  # a wrong call in deltaopt (PySpark's own argument checks too)
            raise
        log.warning("workload bits not priced: the workload's filters failed on the sample: %s", analysis_error(err))
        return None
    rows = int(row["rows"] or 0)
    if not rows:
        return None
    return rows, {pair: int(row[names[texts]] or 0) for pair, texts in wanted.items()}
