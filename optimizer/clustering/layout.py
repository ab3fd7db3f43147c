"""The layout of rows before they are written: SOP clustering (C1), SOP id ordering (C2), Z-order (C3).

`cluster_frame` is shared by the OPTIMIZE job (which writes the frame) and the estimator (which
aggregates it into virtual files). Pass 1 over the input counts the SOP bit vectors and fingerprints
the rows, so the job can prove the written rows equal the input (`fingerprint_columns`, `wrap64`).
A layout with no SOP features of an unpartitioned table whose row count the log knows needs no
vectors: its input fingerprint is then observed (Spark's `observe`) on the rows as the write reads them,
after the Z sample and before the shuffle, and pass 1 is skipped, a whole read of the input less on
the small rewrites a young table gets every tick.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from optimizer.clustering.curves import CURVE_NAMES
from optimizer.clustering.cuts import check_cut_types, leaf_column
from optimizer.clustering.joined import with_joined
from optimizer.clustering.ordering import order_partitions
from optimizer.clustering.precision import kept_pattern
from optimizer.clustering.sop import SopPartition, cluster
from optimizer.clustering.zorder import Dimension, GroupIndex, Helpers, zorder
from optimizer.features import FeatureSet
from optimizer.skipping.collect import sop_vector
from optimizer.spark_expr import expression_column
from optimizer.table.fingerprint import hashable_columns
from optimizer.table.staging import partition_key_columns

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Observation
    from pyspark.sql.types import StructType

Progress = Callable[[str], None]


Fingerprints = Mapping[tuple[Any, ...], tuple[int, int, int]]  # partition group -> (rows, xx, murmur)


@dataclass(frozen=True)
class Layout:
    """A clustered, not yet written frame, and what was learnt on the way (shared with the estimator)."""

    frame: DataFrame
    files: int
    distinct_vectors: int
    partitions: tuple[SopPartition, ...]
    dimensions: tuple[Dimension, ...]
    fingerprints: Fingerprints  # from pass 1; empty when `observed` carries them
    observed: tuple[Observation, DataFrame, tuple[str, ...]] | None = None  # (observation, input, data columns)
    labels: Mapping[str, str] = field(default_factory=dict)  # helper dimension column -> what it stands for

    def input_fingerprints(self) -> Fingerprints:
        """The input's fingerprint per partition group; an observed one exists only once `frame` was
        written (its one action), so call this after the write. Where the session reports no observed
        metrics (Spark Connect servers may not), pass 1 runs after all, over the input."""
        if self.observed is None:
            return self.fingerprints
        observation, source, names = self.observed
        metrics = observation.get
        if not {"n", "xx", "mm"} <= set(metrics):
            return _count_vectors(source, names, (), vectors=None)[0]
        rows = int(metrics["n"] or 0)
        xx = int(metrics["xx"] or 0)
        mm = int(metrics["mm"] or 0)
        return {(): (rows, wrap64(xx), wrap64(mm))} if rows else {}


def fingerprint_columns(schema: StructType, names: Sequence[str]) -> tuple[Column, Column]:
    """Two row hashes over `names` (fields of `schema`) whose sums over a set of rows fingerprint it in
    any order. The sums are longs that wrap around (the session runs without ANSI overflow errors,
    `optimizer.runtime`), so every side compares them modulo 2**64 (`wrap64`); summing decimals instead
    cost a fifth of a pass. Maps and variants are hashed in a canonical form (`hashable_columns`)."""
    from pyspark.sql import functions as F

    columns = hashable_columns([schema[n] for n in sorted(names)])
    return F.xxhash64(*columns), F.hash(*columns).cast("long")


def wrap64(value: int) -> int:
    """`value` as the signed 64-bit integer Spark's wrapping long sum gives."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def cluster_frame(
    frame: DataFrame,
    features: FeatureSet,
    data_names: Sequence[str],
    partition_columns: Sequence[str],
    *,
    rows_per_file: float,
    files: int,
    progress: Progress = lambda _: None,
    order_ids: bool = True,
    fingerprint: bool = True,
    file_column: str | None = None,
    boundary_rows: int = 100_000,
    known_rows: int | None = None,
    row_groups: GroupIndex | None = None,
) -> Layout:
    """Steps C1-C3 on `frame` (the rows to lay out). `data_names` are the columns stored in files (the
    fingerprint covers them); the frame keeps its columns in the same order. `order_ids=False` numbers
    SOP partitions in clustering order instead of C2's (for measuring what C2 buys). A layout never
    written (the estimator's virtual files) needs no `fingerprint` and may ask for each row's file index
    in `file_column` instead of rows moved into their files. `boundary_rows` rows are sampled for the Z
    ranges and file boundaries; `known_rows` (the log's count, or the estimator's of its sample) lets a
    layout without SOP features skip pass 1 where it is never written or the table is unpartitioned.
    Joined features' attributes are looked up into helper columns (`clustering.joined`), dropped after,
    unless `frame` has them. `row_groups`: each row's row group within its file (`GroupIndex`)."""
    if features.cuts is not None:  # a tree decided on another schema: refused before any work
        check_cut_types(features.cuts, frame.schema)
    helpers = Helpers.avoiding(frame.columns)
    frame, added = with_joined(frame, features.joined)
    if added:
        progress(f"joined: {', '.join(added)} looked up from the dimension(s)")
    if fingerprint and known_rows and not features.sop and not partition_columns:
        layout = _observed_layout(
            frame,
            features,
            data_names,
            known_rows,
            files,
            helpers=helpers,
            progress=progress,
            boundary_rows=boundary_rows,
        )
    else:
        layout = _counted_layout(
            frame,
            features,
            data_names,
            partition_columns,
            rows_per_file=rows_per_file,
            files=files,
            progress=progress,
            order_ids=order_ids,
            fingerprint=fingerprint,
            file_column=file_column,
            boundary_rows=boundary_rows,
            helpers=helpers,
            row_groups=row_groups,
            known_rows=known_rows,
        )
    return replace(layout, frame=layout.frame.drop(*added))


def _counted_layout(
    frame: DataFrame,
    features: FeatureSet,
    data_names: Sequence[str],
    partition_columns: Sequence[str],
    *,
    rows_per_file: float,
    files: int,
    progress: Progress,
    order_ids: bool,
    fingerprint: bool,
    file_column: str | None,
    boundary_rows: int,
    helpers: Helpers,
    row_groups: GroupIndex | None = None,
    known_rows: int | None = None,
) -> Layout:
    """`cluster_frame` where the rows must be counted first: pass 1 (rows, fingerprints and SOP bit
    vectors per partition group), then C1-C3. A layout never written with no SOP feature whose rows
    are `known_rows` (the estimator's, priced several times on one counted sample) has nothing for
    pass 1 to find. The joined lookup is done; `cluster_frame` documents the rest."""
    predicates = [f.predicate for f in features.sop]
    if predicates:
        frame = frame.withColumn(helpers.sop_vec, sop_vector(predicates))
    fingerprints: Fingerprints = {}  # a layout never written: nothing to verify
    vectors: Mapping[int, int] = {}  # no SOP feature: no vector to count
    if not fingerprint and not predicates and known_rows is not None:
        rows = known_rows
    else:
        fingerprints, vectors = _count_vectors(
            frame,
            data_names,
            partition_columns,
            vectors=helpers.sop_vec if predicates else None,
            fingerprint=fingerprint,
        )
        rows = sum(v[0] for v in fingerprints.values())
    progress(f"read {rows:,} rows; {len(vectors)} distinct SOP vectors" if fingerprints else f"{rows:,} rows")
    ordered: list[SopPartition] = []
    if predicates:
        frame, ordered = _number_sop_partitions(
            frame, features, vectors, rows_per_file=rows_per_file, order_ids=order_ids, helpers=helpers
        )
        progress(f"SOP: {len(ordered)} partitions ordered by the MST walk of their bit vectors")
    laid_out, dimensions = _zorder_features(
        frame,
        features,
        files,
        partition_columns,
        rows=rows,
        sop_id=bool(predicates),
        file_column=file_column,
        boundary_rows=boundary_rows,
        helpers=helpers,
        row_groups=row_groups,
    )
    progress(f"{CURVE_NAMES[features.curve]} over {len(dimensions)} dimension(s) into {files} file(s)")
    labels = _labels(features, helpers)
    return Layout(laid_out, files, len(vectors), tuple(ordered), tuple(dimensions), fingerprints, None, labels)


def _labels(features: FeatureSet, helpers: Helpers) -> dict[str, str]:
    """What each helper dimension stands for, in the user's terms (Delta's history names these)."""
    labels = {helpers.z(i): f.expression for i, f in enumerate(features.z)}
    labels |= {j.helper: f"{j.dimension}.{j.attribute}" for j in features.joined}
    if features.sop:
        labels[helpers.sop_id] = f"sop({'; '.join(f.predicate for f in features.sop)})"
    return labels


def _observed_layout(
    frame: DataFrame,
    features: FeatureSet,
    data_names: Sequence[str],
    rows: int,
    files: int,
    *,
    helpers: Helpers,
    progress: Progress,
    boundary_rows: int,
) -> Layout:
    """C3 alone, the input's fingerprint observed on the rows entering the shuffle (not on the Z
    sample's job, which reads them too). A task or stage that Spark re-runs may count its rows twice:
    the verification then fails and nothing is committed, never the other way round."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    observation = Observation("deltaopt_input")
    xx, mm = fingerprint_columns(frame.schema, data_names)
    metrics = (F.count(F.lit(1)).alias("n"), F.sum(xx).alias("xx"), F.sum(mm).alias("mm"))
    progress(f"{rows:,} rows (from the log); input fingerprint observed during the write")
    laid_out, dimensions = _zorder_features(
        frame,
        features,
        files,
        (),
        rows=rows,
        sop_id=False,
        boundary_rows=boundary_rows,
        observe=lambda f: f.observe(observation, *metrics),
        helpers=helpers,
    )
    progress(f"{CURVE_NAMES[features.curve]} over {len(dimensions)} dimension(s) into {files} file(s)")
    observed = (observation, frame, tuple(data_names))
    return Layout(laid_out, files, 0, (), tuple(dimensions), {}, observed, labels=_labels(features, helpers))


def _count_vectors(
    frame: DataFrame,
    data_names: Sequence[str],
    partition_columns: Sequence[str],
    *,
    vectors: str | None,
    fingerprint: bool = True,
) -> tuple[dict[tuple[Any, ...], tuple[int, int, int]], dict[int, int]]:
    """Pass 1, one aggregation: the input fingerprint per partition group, and how many rows carry each
    SOP bit vector in the column `vectors` (the only input C1 needs on the driver)."""
    from pyspark.sql import functions as F

    xx, mm = (
        fingerprint_columns(frame.schema, data_names) if fingerprint else (F.lit(0).cast("long"), F.lit(0).cast("long"))
    )
    # partition values by what they are (a timestamp's instant), as the job's check reads them
    keys = partition_key_columns(frame.schema, partition_columns)
    if vectors is not None:
        keys.append(F.col(f"`{vectors}`"))
    # the aggregates sit beside the partition columns: named under a prefix no column starts with
    n, xx_sum, mm_sum = (f"{Helpers.avoiding(frame.columns).prefix}{name}" for name in ("n", "xx", "mm"))
    counted = frame.groupBy(*keys).agg(F.count(F.lit(1)).alias(n), F.sum(xx).alias(xx_sum), F.sum(mm).alias(mm_sum))
    fingerprints: dict[tuple[Any, ...], list[int]] = {}
    counts: dict[int, int] = {}
    for row in counted.collect():
        total = fingerprints.setdefault(tuple(row[c] for c in partition_columns), [0, 0, 0])
        total[0] += int(row[n])
        total[1] += int(row[xx_sum] or 0)
        total[2] += int(row[mm_sum] or 0)
        if vectors is not None:
            counts[int(row[vectors])] = counts.get(int(row[vectors]), 0) + int(row[n])
    return {k: (v[0], wrap64(v[1]), wrap64(v[2])) for k, v in fingerprints.items()}, counts


def _number_sop_partitions(
    frame: DataFrame,
    features: FeatureSet,
    vectors: Mapping[int, int],
    *,
    rows_per_file: float,
    order_ids: bool,
    helpers: Helpers,
) -> tuple[DataFrame, list[SopPartition]]:
    """C1 + C2: cluster the bit vectors, order the partitions, and give every row its partition's id
    (a broadcast join on the vector; chunks of one vector share the first chunk's id). The join's side
    is built from literals in the JVM: from a Python list, Spark started Python workers for a few rows."""
    from pyspark.sql import functions as F

    weights = [features.weight(f) for f in features.sop]
    partitions = cluster(sorted(vectors.items()), weights, max(int(rows_per_file), 1))
    ordered = order_partitions(partitions, rows_per_file, weights) if order_ids else partitions
    ids: dict[int, int] = {}
    for position, partition in enumerate(ordered):
        for member in partition.members:
            ids.setdefault(member, position)
    pairs = [
        F.struct(F.lit(v).cast("long").alias(helpers.sop_vec), F.lit(i).cast("long").alias(helpers.sop_id))
        for v, i in sorted(ids.items())
    ]
    mapping = frame.sparkSession.range(1).select(F.inline(F.array(*pairs)))
    return frame.join(F.broadcast(mapping), helpers.sop_vec).drop(helpers.sop_vec), ordered


def _zorder_features(
    frame: DataFrame,
    features: FeatureSet,
    files: int,
    partition_columns: Sequence[str],
    *,
    rows: int,
    sop_id: bool,
    file_column: str | None = None,
    boundary_rows: int = 100_000,
    observe: Callable[[DataFrame], DataFrame] | None = None,
    helpers: Helpers,
    row_groups: GroupIndex | None = None,
) -> tuple[DataFrame, list[Dimension]]:
    """C3: the Z features (and the SOP id) as helper columns, Z-ordered into `files` files, helpers dropped.
    The SOP id is one more Z dimension, or, with `features.sop_leads` and Z features, leads the order:
    each SOP partition then fills files of its own (a partition smaller than a file is gathered into
    one, where interleaving would spread it along the Z curve)."""
    columns: list[str] = []
    for i, feature in enumerate(features.z):
        frame = frame.withColumn(helpers.z(i), expression_column(feature.expression))
        columns.append(helpers.z(i))
    present = set(frame.columns)
    joined = [j.helper for j in features.joined if j.helper in present]  # one left out has no column
    lead = sop_id and features.sop_leads and bool(columns or joined)
    sop_dimension = [helpers.sop_id] if sop_id and not lead else []
    kept = [True] * len(columns) + [j.helper in present for j in features.joined] + [True] * len(sop_dimension)
    leaf: list[str] = []  # lead the order: files never mix the file cuts' leaves, row-group cuts' leaves follow
    if features.cuts is not None:
        leaf.append(f"{helpers.prefix}leaf")
        frame = frame.withColumn(leaf[0], leaf_column(features.cuts.file_level(), expression_column))
    if features.cuts is not None and features.cuts.has_row_groups:
        leaf.append(f"{helpers.prefix}leaf_rows")
        frame = frame.withColumn(leaf[1], leaf_column(features.cuts, expression_column))
    laid_out, dimensions = zorder(
        frame,
        [*columns, *joined, *sop_dimension],
        files,
        rows=rows,
        leading=[*partition_columns, *leaf, *([helpers.sop_id] if lead else [])],
        aligned=len(partition_columns) + 1 if leaf else 0,
        sample_rows=boundary_rows,
        file_column=file_column,
        observe=observe,
        helpers=helpers,
        row_groups=row_groups,
        curve=features.curve,
        precision=kept_pattern(features.precision, kept),
    )
    return laid_out.drop(*columns, *leaf, *([helpers.sop_id] if sop_id else [])), dimensions
