"""Calibration: time real OPTIMIZE runs on samples of a table, then fit the cost model.

Each run copies a sample of the table into a scratch Delta table (as several small files, like new
data) and runs the real job on it with a given number of Z, SOP and additional features; the job's
wall time is the measurement (the copy is not). Features come from the workload analysis when given,
otherwise they are made up from the sample: Z features are orderable columns, SOP features
``column = frequent value`` / ``column > median`` predicates. What the cost depends on is how many
expressions are evaluated, sorted and aggregated, not which.
"""

from __future__ import annotations

import logging
import platform
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from costmodel.cost import CostModel, Run, fit
from optimizer.clustering import optimize
from optimizer.features import FeatureSet, SopFeature, ZFeature
from optimizer.table import open_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from optimizer.table.access import TableAccess

log = logging.getLogger(__name__)

DEFAULT_GRID: tuple[tuple[int, int, int], ...] = (
    (1, 0, 0),
    (2, 0, 0),
    (4, 0, 0),
    (1, 4, 0),
    (1, 8, 0),
    (2, 4, 4),
    (3, 8, 8),
    (1, 0, 8),
)
ORDERABLE = ("int", "bigint", "smallint", "tinyint", "double", "float", "date", "timestamp", "string")


@dataclass(frozen=True)
class Candidates:
    z: tuple[str, ...]
    sop: tuple[str, ...]


def synthetic_candidates(sample: DataFrame, count: int = 12) -> Candidates:
    """Z and SOP features made up from a sample's columns and values."""
    from pyspark.sql import functions as F

    from querylog.predicates.normalize import canonical_conjuncts
    from querylog.predicates.parse import parse_condition

    fields = [f for f in sample.schema.fields if f.dataType.simpleString().split("(")[0] in (*ORDERABLE, "decimal")]
    z = tuple(f.name.lower() for f in fields if f.dataType.simpleString() != "string")[:4]
    sop: list[str] = []
    row = sample.select(
        *[
            F.expr(f"percentile_approx(`{f.name}`, 0.5)").alias(f.name)
            for f in fields
            if f.dataType.simpleString() != "string"
        ]
    ).collect()
    medians = row[0].asDict() if row else {}
    strings = [f.name for f in fields if f.dataType.simpleString() == "string"]
    common = {}
    for name in strings:
        top = sample.groupBy(name).count().orderBy(F.desc("count")).limit(1).collect()
        if top and top[0][0] is not None:
            common[name] = top[0][0]
    for name, value in common.items():
        sop.append(f"{name} = '{str(value).replace(chr(39), '')}'")
    for name, value in medians.items():
        if value is not None:
            literal = (
                f"DATE '{value}'" if hasattr(value, "isoformat") and not isinstance(value, int | float) else str(value)
            )
            sop.append(f"{name} > {literal}")
    canonical = [c for text in sop for c in canonical_conjuncts(parse_condition(text))]
    return Candidates(z, tuple(dict.fromkeys(canonical))[:count])


def features_for(candidates: Candidates, z: int, sop: int, additional: int) -> FeatureSet:
    """`z` Z features, `sop` SOP features and `additional` statistics-only ones (SOP predicates beyond
    the clustering ones, then Z expressions)."""
    if z > len(candidates.z) or sop > len(candidates.sop):
        raise ValueError(f"not enough candidates for {z} Z / {sop} SOP features")
    spare = [SopFeature(p) for p in candidates.sop[sop:]]
    return FeatureSet(
        z=tuple(ZFeature(e) for e in candidates.z[:z]),
        sop=tuple(SopFeature(p) for p in candidates.sop[:sop]),
        sop_add=tuple(spare[:additional]),
        sop_weights={p: 1.0 for p in candidates.sop[:sop]},
    )


def calibrate(
    spark: SparkSession,
    table: TableAccess,
    rows: Sequence[int],
    grid: Sequence[tuple[int, int, int]] = DEFAULT_GRID,
    *,
    candidates: Candidates | None = None,
    target_file_size: int = 16 << 20,
    work_dir: str | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> tuple[CostModel, list[Run]]:
    """Run the grid on samples of `rows` rows each, return the fitted model and the runs."""
    snapshot = table.snapshot()
    data = table.read_files(spark, snapshot.files, snapshot)
    total = snapshot.num_records or data.count()
    scratch_root = Path(work_dir or tempfile.mkdtemp(prefix="deltaopt-calibrate-"))
    runs: list[Run] = []
    for size in rows:
        sample = data if size >= total else data.sample(fraction=min(1.0, size / total * 1.05), seed=11).limit(size)
        sample = sample.cache()
        chosen = candidates or synthetic_candidates(sample)
        needed_sop = max(s + a for _, s, a in grid)
        if len(chosen.sop) < needed_sop:
            chosen = Candidates(chosen.z, tuple((list(chosen.sop) * needed_sop)[:needed_sop]))
        for z, sop, additional in grid:
            if z > len(chosen.z):
                continue
            path = scratch_root / f"rows{size}-z{z}-s{sop}-a{additional}"
            scratch = open_table(str(path))
            scratch.create(spark, sample.repartition(8))
            result = optimize(spark, scratch, features_for(chosen, z, sop, additional), target_file_size)
            runs.append(Run(result.bytes_in, z, sop, additional, float(result.seconds.get("total", 0.0))))
            progress(
                f"{size:,} rows, {result.bytes_in / 1e6:.0f} MB, z={z} sop={sop} add={additional}: "
                f"{runs[-1].seconds:.1f}s"
            )
            shutil.rmtree(path, ignore_errors=True)
        sample.unpersist()
    where = f"{platform.node()} ({platform.machine()}), {datetime.now(UTC):%Y-%m-%d}, Spark {spark.version}"
    model = fit(runs, measured=where)
    return replace(model, extra={"runs": [asdict(r) for r in runs]}), runs
