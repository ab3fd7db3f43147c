"""What checking and describing freshly written Parquet files needs: their schema against the table's,
their statistics row among Spark's aggregation rows, their partition values from the directories."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from optimizer import errors

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


def absolute_local(path: str) -> str:
    import os

    return os.path.abspath(os.path.expanduser(path))


def check_schema(actual: StructType, expected: StructType, uri: str) -> None:
    def shape(schema: StructType) -> list[tuple[str, str]]:
        return [(f.name.lower(), f.dataType.simpleString()) for f in schema.fields]

    if shape(actual) != shape(expected):
        raise errors.RewriteValidationError(
            f"data for {uri} does not have the table's schema: got {actual.simpleString()}, "
            f"expected {expected.simpleString()}"
        )


def row_for(path: str, rows: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any]:
    """The statistics row of `path` (decoded, as on storage); Spark reports URL-encoded ``file:/...``
    URIs, so match on the decoded path suffix."""
    from urllib.parse import unquote

    for uri, row in rows.items():
        if unquote(uri).endswith("/" + path):
            return row
    raise errors.RewriteValidationError(f"no statistics were computed for written file {path}")


def partition_values(path: str, directory: str, partition_columns: Sequence[str]) -> dict[str, str | None]:
    from urllib.parse import unquote

    if not partition_columns:
        return {}
    parts = path[len(directory) + 1 :].split("/")[:-1]
    values: dict[str, str | None] = {}
    for part in parts:
        key, _, raw = part.partition("=")
        key, value = unquote(key), unquote(raw)  # Hive-style escaping of names and values on storage
        values[key] = None if value == "__HIVE_DEFAULT_PARTITION__" else value
    missing = [c for c in partition_columns if c not in values]
    if missing:
        raise errors.RewriteValidationError(f"written file {path} lacks partition directories for {missing}")
    return values
