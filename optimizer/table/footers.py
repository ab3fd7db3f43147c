"""What Parquet footers say about bytes: the codec a file was written with, and how large a frame
would be once written.

The estimator needs the second to price the compression a new layout brings (clustered data
compresses better: runs and small dictionaries), which no statistic in the Delta log tells. It writes
the frame under ``<table>/_deltaopt_scratch/`` (a ``_`` directory: Delta readers, writers and VACUUM
ignore it, and nothing in the log references it), reads the footers, and removes the directory.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from optimizer.errors import TableAccessError
from optimizer.table.paths import open_location

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from optimizer.table.access import DataFile, TableAccess

log = logging.getLogger(__name__)

SCRATCH = "_deltaopt_scratch"
_PART = re.compile(r"part-(\d+)")  # Spark names each task's file after its partition


def file_codec(table: TableAccess, data_file: DataFile) -> str | None:
    """The codec of `data_file`'s first column chunk (e.g. ``"SNAPPY"``), None if unreadable."""
    fs, path = open_location(table, data_file.path)  # a shallow clone's files lie outside the table
    try:
        metadata = pq.ParquetFile(fs.open_input_file(path)).metadata
    except (OSError, ValueError):
        return None
    if metadata.num_row_groups == 0 or metadata.row_group(0).num_columns == 0:
        return None
    return str(metadata.row_group(0).column(0).compression).upper()


def written_sizes(
    table: TableAccess, frame: DataFrame, options: Mapping[str, str] | None = None
) -> dict[int, dict[str, int]]:
    """Compressed bytes per top-level column of `frame` written as Parquet with the writer `options`
    (`optimizer.table.output`: what OPTIMIZE writes with), per Spark partition (each partition is one
    file: ``part-<partition>-...``). Raises `TableAccessError` when the scratch write fails.
    """
    fs, root = table.filesystem()
    directory = f"{SCRATCH}/{uuid.uuid4().hex[:16]}"
    writer = frame.write.mode("error")
    if options:
        writer = writer.options(**options)
    try:
        writer.parquet(table.spark_uri(directory))
        return _sizes(fs, f"{root}/{directory}")
    except Exception as err:  # Spark surfaces I/O and codec errors as several exception types
        raise TableAccessError(f"cannot write a scratch sample under {table.uri}/{SCRATCH}: {err}") from err
    finally:
        try:
            fs.delete_dir(f"{root}/{directory}")
        except (FileNotFoundError, OSError) as err:
            log.warning("could not remove scratch directory %s: %s", directory, err)


def total_sizes(per_file: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Column sizes summed over files."""
    totals: dict[str, int] = {}
    for sizes in per_file:
        for column, size in sizes.items():
            totals[column] = totals.get(column, 0) + size
    return totals


def _sizes(fs: pafs.FileSystem, directory: str) -> dict[int, dict[str, int]]:
    found: dict[int, dict[str, int]] = {}
    for info in fs.get_file_info(pafs.FileSelector(directory, recursive=True)):
        name = info.path.rsplit("/", 1)[-1]
        match = _PART.match(name)
        if info.type != pafs.FileType.File or not name.endswith(".parquet") or match is None:
            continue
        sizes = found.setdefault(int(match.group(1)), {})
        for key, size in metadata_sizes(pq.ParquetFile(fs.open_input_file(info.path)).metadata).items():
            sizes[key] = sizes.get(key, 0) + size
    return found


def metadata_sizes(metadata: pq.FileMetaData) -> dict[str, int]:
    """Compressed bytes per top-level column (lower case) over every row group of one footer."""
    sizes: dict[str, int] = {}
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            key = chunk.path_in_schema.split(".")[0].lower()
            sizes[key] = sizes.get(key, 0) + chunk.total_compressed_size
    return sizes


def compression_ratios(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, float]:
    """Per column, bytes after / bytes before (1.0 where either side is unknown)."""
    return {c: (after[c] / size if size and c in after else 1.0) for c, size in before.items()}
