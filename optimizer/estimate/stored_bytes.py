"""How many bytes the rewritten data will store: the compression change of a new layout, measured.

A rewrite changes stored bytes for two reasons, measured separately because a sample can show only one
of them faithfully:

* **compaction** (file size, codec, writer): rows of many small files written as a few target-size
  files share dictionaries and page overhead, and are written with the job's codec and row groups
  (`optimizer.table.output`). Measured on real rows at full density: a run of consecutive files to
  rewrite, up to one output file's worth (at most `COMPACTION_BYTES`; a run past it, such as one large
  file, is measured on its leading rows), rewritten in their current order with the job's writer,
  against their footers. Files are measured by size class (`size_classes`), each on a run of its own
  within one partition (the job writes no file across partitions), and the classes weighed by their
  rows: a run of small appends saves far more than files of many megabytes, and a job usually rewrites
  both (a liquid table's unsealed cube with a day's appends: one run of the appends priced every file
  as if it were one).
* **clustering** (row order): sorted runs and small per-file dictionaries compress better. Measured on
  the sample: the same rows written with the job's writer in their current order and in the layout's
  order, cut into the same number of files, so that sampling and file-count effects mostly cancel.
  Not entirely: sampled rows are sparser than real ones, so runs in the current order (a day's appends
  in date order) are shorter in the sample, and a layout that breaks them is priced a little kinder
  than it is (issue 47's replay of a liquid job: l_shipdate x1.011 estimated, x1.024 written).

The per-column ratio of the layout is the product of the two.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from costmodel.benefit import Compression
from optimizer.errors import TableAccessError
from optimizer.estimate.virtual_files import Measure, in_stored_order
from optimizer.skipping.scan import column_sizes
from optimizer.table.access import DataFile, Snapshot
from optimizer.table.footers import compression_ratios, file_codec, total_sizes, written_sizes
from optimizer.table.output import OutputSettings, resolve_output

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from optimizer.table.access import TableAccess

log = logging.getLogger(__name__)

# Input read to measure compaction: enough for dictionaries to amortise. On 1 GB of lineitem, 32 MB
# gave every column's ratio within 0.002 of rewriting a whole 125 MB file, in half the time.
COMPACTION_BYTES = 32 << 20


@dataclass(frozen=True)
class StoredBaseline:
    """What every candidate layout's compression is measured against (built once per decision)."""

    compaction: Mapping[str, float]  # per column: bytes rewritten in current order / bytes stored now
    sample_sizes: Mapping[str, int]  # the sample written in current order with the job's writer
    codec_before: str | None
    output: OutputSettings  # what the job writes with (the table's codec property applied)

    @property
    def codec_after(self) -> str:
        return self.output.spark_codec.upper()


def measure_baseline(
    table: TableAccess,
    snapshot: Snapshot,
    files: Sequence[DataFile],
    *,
    sample: DataFrame,
    target_files: int,
    output: OutputSettings,
) -> StoredBaseline | None:
    """The compaction ratios and the sample's bytes in current order, written as the job would with
    `output`; None (logged) when the scratch writes fail: the estimate then goes on at today's bytes."""
    written_with = resolve_output(output, snapshot.configuration)
    options = written_with.writer_options()
    try:
        compaction = _compaction(table, snapshot, files, target_files=target_files, sample=sample, options=options)
        ordered = in_stored_order(sample, snapshot, target_files)
        sample_sizes = total_sizes(written_sizes(table, ordered, options).values())
    except TableAccessError as err:
        log.warning("compression not estimated for %s: %s", table.uri, err)
        return None
    codec_before = file_codec(table, max(files, key=lambda f: f.size))
    return StoredBaseline(compaction, sample_sizes, codec_before, written_with)


def size_classes(files: Sequence[DataFile], reach: float) -> list[list[DataFile]]:
    """`files` by size against `reach` (the most one measured run holds): under 1/32 of it (a streaming
    writer's appends), under half, and the rest (past it a file's dictionaries and pages are amortised
    already); the empty classes left out. Each class's compaction saving differs by about an order of
    magnitude from the next one's, so one run of one class cannot stand for the others."""
    bounds = (reach / 32, reach / 2)
    classes: list[list[DataFile]] = [[], [], []]
    for data_file in files:
        classes[sum(data_file.size >= bound for bound in bounds)].append(data_file)
    return [group for group in classes if group]


def _compaction(
    table: TableAccess,
    snapshot: Snapshot,
    files: Sequence[DataFile],
    *,
    target_files: int,
    sample: DataFrame,
    options: Mapping[str, str],
) -> dict[str, float]:
    """Per column, bytes of the files rewritten as the job would size them / now: each size class
    (`size_classes`) measured on a run of its own (`_run_ratios`), weighed by the class's rows (its run's
    column bytes scaled to the class)."""
    output_bytes = sum(f.size for f in files) / max(target_files, 1)
    rows_out = sum(f.num_records or 0 for f in files) / max(target_files, 1)
    weights: dict[str, float] = {}
    weighed: dict[str, float] = {}
    for group in size_classes(files, min(output_bytes, COMPACTION_BYTES)):
        run = _run(group, rows_out, output_bytes)
        now, rows, ratios = _run_ratios(table, snapshot, run, rows_out=rows_out, sample=sample, options=options)
        scale = _class_scale(group, now, rows)
        for column, ratio in ratios.items():
            weight = now.get(column, 0) * scale
            weights[column] = weights.get(column, 0.0) + weight
            weighed[column] = weighed.get(column, 0.0) + weight * ratio
    return {c: (weighed[c] / w if w else 1.0) for c, w in weights.items()}


def _run(files: Sequence[DataFile], rows_out: float, output_bytes: float) -> list[DataFile]:
    """Consecutive files (log order: the order the writer produced them) of the partition holding most of
    `files`' bytes, up to one output file (`rows_out` rows where the log counts them, else `output_bytes`)
    or `COMPACTION_BYTES`: the job writes no file across partitions, so neither does the measurement."""
    by_partition: dict[tuple[tuple[str, str | None], ...], list[DataFile]] = {}
    for data_file in files:
        by_partition.setdefault(data_file.partition, []).append(data_file)
    largest = max(by_partition.values(), key=lambda group: sum(f.size for f in group))
    run: list[DataFile] = []
    rows = size = 0
    for data_file in largest:
        run.append(data_file)
        rows += data_file.num_records or 0
        size += data_file.size
        if rows >= rows_out > 0 or size >= min(output_bytes, COMPACTION_BYTES):
            break
    return run


def _class_scale(group: Sequence[DataFile], now: Mapping[str, int], rows: int) -> float:
    """How many times the class holds what its run measured: by rows (`rows`, the rows measured) where
    every file's count is known, else by bytes (file sizes count footers, so small files weigh a little
    more than they hold)."""
    if rows and all(f.num_records is not None for f in group):
        return sum(f.num_records or 0 for f in group) / rows
    return sum(f.size for f in group) / max(sum(now.values()), 1)


def _run_ratios(
    table: TableAccess,
    snapshot: Snapshot,
    run: Sequence[DataFile],
    *,
    rows_out: float,
    sample: DataFrame,
    options: Mapping[str, str],
) -> tuple[dict[str, int], int, dict[str, float]]:
    """`run` rewritten in its order as the job would size it: its column bytes now (footers), the rows
    measured and, per column, bytes rewritten / now."""
    rows = sum(f.num_records or 0 for f in run)
    size = sum(f.size for f in run)
    names = snapshot.features.logical_names
    now = total_sizes(sizes for f in run if (sizes := column_sizes(table, f, names)) is not None)
    frame = table.read_files(sample.sparkSession, run, snapshot)
    if size > COMPACTION_BYTES and rows:
        # A run past the cap (one large file, typically) is measured on a leading share of its rows:
        # the scan stops early, and today's bytes are that share of the footers' (bytes per row are
        # even within files one writer wrote).
        share = COMPACTION_BYTES / size
        rows = max(1, int(rows * share))
        now = {c: round(b * share) for c, b in now.items()}
        frame = frame.limit(rows)
    pieces = max(1, round(rows / rows_out)) if rows_out else 1
    rewritten = total_sizes(written_sizes(table, in_stored_order(frame, snapshot, pieces), options).values())
    return now, rows, compression_ratios(now, rewritten)


def layout_measure(table: TableAccess, baseline: StoredBaseline) -> Measure:
    """How the virtual files of a layout are measured: written as the job would write them; None
    (logged) when the scratch write fails, and that layout is then estimated at today's bytes."""
    options = baseline.output.writer_options()

    def measure(frame: DataFrame) -> Mapping[int, Mapping[str, int]] | None:
        try:
            return written_sizes(table, frame, options)
        except TableAccessError as err:
            log.warning("compression not estimated for %s: %s", table.uri, err)
            return None

    return measure


def layout_compression(baseline: StoredBaseline, written: Mapping[str, int]) -> Compression:
    """The layout's compression from its virtual files as written (`written`, summed over files)."""
    clustering = compression_ratios(baseline.sample_sizes, written)
    ratios = {c: baseline.compaction.get(c, 1.0) * r for c, r in clustering.items()}
    return Compression(
        ratios=ratios,
        codec_before=baseline.codec_before,
        codec_after=baseline.codec_after,
        sample_bytes_before=sum(baseline.sample_sizes.values()),
        sample_bytes_after=sum(written.values()),
        compaction=dict(baseline.compaction),
        clustering=clustering,
        weights={c: float(v) for c, v in baseline.sample_sizes.items()},
    )
