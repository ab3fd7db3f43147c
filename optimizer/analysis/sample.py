"""A data sample, and candidate features evaluated on it with Spark.

Each candidate is checked on its own first (allow-list, then Spark's analysis of the expression), so
one bad feature is reported "not evaluable" with the reason instead of failing the others. The
remaining ones are evaluated in one job and brought to the driver as small arrays: dense ranks for Z
candidates, bits for SOP candidates.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from optimizer.analysis.correlation import ZSample
from optimizer.errors import FeatureError, SparkRuntimeError
from optimizer.spark_arrow import to_arrow
from optimizer.spark_expr import analysis_error, typed_feature

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from optimizer.table.access import DataFile, Snapshot, TableAccess

log = logging.getLogger(__name__)
UNORDERED_TYPES = ("map<", "array<", "struct<", "binary")


MIN_SCANNED_FILES = 8  # a subset of fewer files would see too few stretches of the arrivals


def sample_frame(
    spark: SparkSession,
    table: TableAccess,
    snapshot: Snapshot,
    files: Sequence[DataFile],
    rows: int,
    *,
    seed: int = 17,
    scan_bytes: int = 0,
) -> DataFrame:
    """About `rows` rows drawn uniformly from `files` (all of them when they hold fewer), or, when the
    files hold more than `scan_bytes` (> 0), from the files `scanned_files` picks."""
    chosen = scanned_files(files, scan_bytes)
    data = table.read_files(spark, chosen, snapshot)
    total = sum(f.num_records or 0 for f in chosen)
    if total > rows:
        data = data.sample(withReplacement=False, fraction=min(1.0, rows / total * 1.1), seed=seed).limit(rows)
    return data


def scanned_files(files: Sequence[DataFile], scan_bytes: int) -> list[DataFile]:
    """The files a sample reads: all of them, or when they hold more than `scan_bytes` (> 0), evenly
    spaced ones in commit order holding about `scan_bytes` (at least `MIN_SCANNED_FILES`). Reading
    every row only to keep a few is what made a decision grow with the data; every k-th file still
    spans the whole period the files arrived in (a systematic sample of files)."""
    total = sum(f.size for f in files)
    if scan_bytes <= 0 or total <= scan_bytes or len(files) <= MIN_SCANNED_FILES:
        return list(files)
    count = max(MIN_SCANNED_FILES, math.ceil(len(files) * scan_bytes / total))
    if count >= len(files):
        return list(files)
    return [files[int((i + 0.5) * len(files) / count)] for i in range(count)]


@dataclass(frozen=True)
class Evaluation:
    z: dict[str, ZSample] = field(default_factory=dict)
    sop: dict[str, np.ndarray] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)  # feature -> why it is not evaluable
    rows: int = 0


def _check(sample: DataFrame, text: str, as_predicate: bool) -> Column | str:
    """The feature's column, or why it is not evaluable."""
    try:
        column, field_type = typed_feature(sample, text, as_predicate)
    except FeatureError as err:
        return f"not evaluable: {err}"
    if not as_predicate and field_type.startswith(UNORDERED_TYPES):
        return f"not evaluable: values of type {field_type} have no order"
    return column


def evaluate(sample: DataFrame, z_expressions: Sequence[str], sop_predicates: Sequence[str]) -> Evaluation:
    """Evaluate candidates on `sample` (which is read once)."""
    failures: dict[str, str] = {}
    columns: dict[str, Column] = {}
    names: dict[str, tuple[str, str]] = {}  # output column -> (kind, feature)
    for kind, texts in (("z", z_expressions), ("sop", sop_predicates)):
        for text in texts:
            column = _check(sample, text, as_predicate=kind == "sop")
            if isinstance(column, str):
                failures[text] = column
                continue
            name = f"c{len(names)}"
            names[name] = (kind, text)
            columns[name] = column
    if not columns:
        return Evaluation(failures=failures)
    frame = _collect(sample, columns, failures, names)
    z: dict[str, ZSample] = {}
    sop: dict[str, np.ndarray] = {}
    for name, (kind, text) in names.items():
        if name not in frame.columns:
            continue
        if kind == "z":
            codes, _ = pd.factorize(frame[name], sort=True, use_na_sentinel=True)
            codes = np.asarray(codes, dtype=np.int64)
            z[text] = ZSample(np.where(codes < 0, 0, codes), codes < 0)
        else:
            sop[text] = frame[name].to_numpy(dtype=np.int64) == 1
    return Evaluation(z, sop, failures, len(frame))


def _collect(
    sample: DataFrame, columns: dict[str, Column], failures: dict[str, str], names: dict[str, tuple[str, str]]
) -> pd.DataFrame:
    """All columns in one job; if that job fails, one job per column to find the culprits. Through
    Arrow: converting Row objects on the driver was 90% of the analysis's Python time (py-spy). A
    session that cannot collect at all (`SparkRuntimeError`: an API gap) fails every candidate alike,
    so that is raised with its cause instead of marking each one "not evaluable"."""
    try:
        return _to_pandas(sample.select(*[c.alias(n) for n, c in columns.items()]))
    except SparkRuntimeError:
        raise
    except Exception as err:
        log.warning("evaluating candidates together failed (%s); evaluating one by one", analysis_error(err))
    parts = []
    for name, column in columns.items():
        try:
            parts.append(_to_pandas(sample.select(column.alias(name))))
        except Exception as err:  # a runtime failure of this feature only
            failures[names[name][1]] = f"not evaluable: failed on the sample: {analysis_error(err)}"
    return pd.concat(parts, axis=1) if parts else pd.DataFrame()


def _to_pandas(frame: DataFrame) -> pd.DataFrame:
    # timestamps as objects: datetime64[ns] cannot hold every timestamp Spark can
    return to_arrow(frame).to_pandas(timestamp_as_object=True, date_as_object=True)
