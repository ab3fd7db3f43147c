"""Delta add-action statistics for files Spark wrote, from one Spark aggregation per batch of files.

The aggregation computes what the files' Parquet footers cannot give soundly: row counts and the
fingerprints that verify a rewrite, the extended statistics of the clustering features (min/max of
expressions, SOP bit vectors), and bounds of types footers do not order as Spark does. Bare columns
of the other types come from the footers (`optimizer.table.footer_stats`, selected with `skip`).

Encoding follows the Delta protocol, rounded so every bound stays a bound:

* timestamps have millisecond precision in the log: the minimum is floored, the maximum is ceiled; a
  timestamp is its UTC instant (``...Z``), a timestamp_ntz its own wall clock without a zone, computed
  without the session's time zone (`ntz_micros`), so a rewrite in any session logs the same bounds;
* strings: the minimum is cut to 32 characters (a prefix is still a lower bound); a maximum of 32 or
  more characters is not written (other writers truncate such values, so readers ignore them);
* a float column whose maximum is NaN gets no maximum (Spark orders NaN above every number);
* decimals are written as exact JSON numbers, never through a binary float.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

STRING_PREFIX = 32
DEFAULT_INDEXED_COLUMNS = 32
_EPOCH = dt.datetime(1970, 1, 1)


# Types whose min/max Delta keeps (`SkippingEligibleDataType`: numbers, dates, timestamps, strings) and,
# beyond Delta, booleans (false < true), which deltaopt's pruning uses. Delta keeps none for booleans:
# its reader parses stats with a schema that has no boolean min/max, so it ignores them, as does any
# reader that does not know them; they are exact, so a reader that uses them skips soundly. The others
# (binary, variant, arrays, maps, intervals, void, collated strings) get null counts only: Spark cannot
# order some of them at all (``min`` of a VARIANT fails the whole aggregation), and readers skip on none.
MINMAX_TYPES = frozenset(
    {"tinyint", "smallint", "int", "bigint", "float", "double", "date", "timestamp", "timestamp_ntz", "string"}
    | {"boolean"}
)


def has_minmax(type_name: str) -> bool:
    """Whether a column of Spark type `type_name` (its simpleString) gets min/max statistics."""
    return type_name in MINMAX_TYPES or type_name.startswith("decimal(")


@dataclass(frozen=True)
class StatsColumn:
    """A leaf column that gets statistics: every leaf its null count, ``minmax`` only on `has_minmax` types."""

    path: tuple[str, ...]
    type_name: str  # Spark simpleString: "int", "decimal(15,2)", "timestamp", ...
    minmax: bool

    @property
    def name(self) -> str:
        return ".".join(self.path)


def stats_columns(schema: StructType, configuration: Mapping[str, str | None] | None = None) -> list[StatsColumn]:
    """Leaf columns that get statistics, honouring ``delta.dataSkippingStatsColumns`` and
    ``delta.dataSkippingNumIndexedCols`` (first 32 leaves by default). As in Delta's
    `StatisticsCollection`, a leaf is any non-struct field, arrays and maps included (they count
    towards the limit and get null counts), and min/max are kept on the types `has_minmax` names."""
    from pyspark.sql.types import StructType

    configuration = configuration or {}
    explicit = configuration.get("delta.dataSkippingStatsColumns")
    limit_text = configuration.get("delta.dataSkippingNumIndexedCols")
    limit = int(limit_text) if limit_text not in (None, "") else DEFAULT_INDEXED_COLUMNS
    # Delta matches these names case-insensitively (StatisticsCollection), as it matches every column name
    wanted = {c.strip().lower() for c in explicit.split(",")} if explicit else None

    leaves: list[StatsColumn] = []

    def visit(struct: StructType, prefix: tuple[str, ...]) -> None:
        for field in struct.fields:
            path = (*prefix, field.name)
            dtype = field.dataType
            if isinstance(dtype, StructType):
                visit(dtype, path)
            else:
                leaves.append(StatsColumn(path, dtype.simpleString(), has_minmax(dtype.simpleString())))

    visit(schema, ())
    if wanted is not None:
        return [c for c in leaves if c.name.lower() in wanted or c.path[0].lower() in wanted]
    return leaves if limit < 0 else leaves[:limit]


def _column_ref(path: tuple[str, ...]) -> Column:
    from pyspark.sql import functions as F

    col = F.col(f"`{path[0]}`")
    for part in path[1:]:
        col = col.getField(part)
    return col


def ntz_micros(value: Column) -> Column:
    """A timestamp_ntz as microseconds since 1970-01-01 00:00:00 on its own wall clock, in any session zone.

    Not ``unix_micros(cast(value as timestamp))`` nor ``timestampdiff``: both read the wall clock in the
    session's zone (an NTZ 10:00 becomes 04:30 in Asia/Kolkata, and a DST gap or a zone's historic
    offsets shift values unevenly), so bounds written in such a session exclude matching rows. The
    difference of two NTZ values is zone-free; its seconds are cast exactly, as a decimal."""
    from pyspark.sql import functions as F

    since_epoch = value - F.lit("1970-01-01 00:00:00").cast("timestamp_ntz")  # a string to NTZ: zone-free
    return (since_epoch.cast("decimal(38,6)") * F.lit(1_000_000)).cast("bigint")


def _minmax_aggregates(column: StatsColumn) -> tuple[Column, Column]:
    """(min, max) of a column: timestamps as epoch microseconds, so no Python time zone is involved. A
    timestamp is its instant; a timestamp_ntz is ordered and aggregated as itself (zone-free), and only
    its bounds are turned into microseconds of its wall clock (`ntz_micros`)."""
    from pyspark.sql import functions as F

    ref = _column_ref(column.path)
    if column.type_name == "timestamp":
        return F.min(F.unix_micros(ref)), F.max(F.unix_micros(ref))
    if column.type_name == "timestamp_ntz":
        return ntz_micros(F.min(ref)), ntz_micros(F.max(ref))
    return F.min(ref), F.max(ref)


def file_stat_aggregates(
    columns: Sequence[StatsColumn], extra: Mapping[str, Column] | None = None, skip: Collection[int] = ()
) -> list[Column]:
    """Per-file aggregates: ``__rows`` and, per stats column i not in `skip`, ``min_i``/``max_i``/
    ``nulls_i``, then every `extra` aggregate under its own name (one row per file feeds
    `delta_stats_json`; skipped columns' keys come from elsewhere: `optimizer.table.footer_stats`)."""
    from pyspark.sql import functions as F

    aggregates: list[Column] = [F.count(F.lit(1)).alias("__rows")]
    for i, column in enumerate(columns):
        if i in skip:
            continue
        ref = _column_ref(column.path)
        aggregates.append((F.count(F.lit(1)) - F.count(ref)).alias(f"nulls_{i}"))
        if column.minmax:
            low, high = _minmax_aggregates(column)
            aggregates += [low.alias(f"min_{i}"), high.alias(f"max_{i}")]
    return aggregates + [aggregate.alias(name) for name, aggregate in (extra or {}).items()]


def collect_file_stats(
    spark: SparkSession,
    file_uris: Sequence[str],
    data_schema: StructType,
    columns: Sequence[StatsColumn],
    *,
    extra: Mapping[str, Column] | None = None,
    skip: Collection[int] = (),
) -> dict[str, dict[str, Any]]:
    """Aggregate per file: ``__rows`` and, per stats column i not in `skip`, ``min_i``/``max_i``/
    ``nulls_i``, plus every ``extra`` aggregate under its own name. Keyed by the file URI Spark reports
    (``_metadata.file_path``).
    """
    if not file_uris:
        return {}
    aggregates = file_stat_aggregates(columns, extra, skip)
    files = spark.read.schema(data_schema).parquet(*file_uris)
    frame = files.groupBy(file_path(files).alias("__file")).agg(*aggregates)
    return {row["__file"]: row.asDict() for row in frame.collect()}


def file_path(frame: DataFrame) -> Column:
    """The path of the file each row of `frame` (a file scan) was read from. By the metadata column
    itself, not by the name ``_metadata``, which a table column of that name would hide. PySpark 3.5
    has no ``metadataColumn``: there the name is used, and a table column of that name is refused."""
    from pyspark.sql import functions as F

    from optimizer.errors import UnsupportedTableError

    if hasattr(frame, "metadataColumn"):  # PySpark 4.0+
        return frame.metadataColumn("_metadata").getField("file_path")
    if "_metadata" in frame.columns:
        raise UnsupportedTableError("a column named _metadata hides Spark 3.5's file metadata: use Spark 4")
    return F.col("_metadata").getField("file_path")


def _encode_value(column: StatsColumn, value: Any, is_max: bool) -> Any:
    """The JSON value for a bound, or `_OMIT` when no sound bound can be written."""
    if value is None:
        return _OMIT
    kind = column.type_name
    if kind in ("float", "double"):
        return _OMIT if (math.isnan(value) or math.isinf(value)) else float(value)
    if kind.startswith("decimal"):
        return _RawNumber(str(Decimal(value)))
    if kind in ("timestamp", "timestamp_ntz"):
        micros = int(value)
        millis = -(-micros // 1000) if is_max else micros // 1000
        text = (_EPOCH + dt.timedelta(milliseconds=millis)).isoformat(timespec="milliseconds")
        return text + "Z" if kind == "timestamp" else text
    if kind == "date":
        return value.isoformat()
    if kind == "string":
        if is_max:
            return value if len(value) < STRING_PREFIX else _OMIT
        return value[:STRING_PREFIX]
    if kind == "boolean":
        return bool(value)
    if isinstance(value, int):
        return int(value)
    return _OMIT


class _Omit:
    pass


_OMIT = _Omit()


@dataclass(frozen=True)
class _RawNumber:
    text: str


def _nest(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        target = target.setdefault(part, {})
    target[path[-1]] = value


def delta_stats_json(
    row: Mapping[str, Any], columns: Sequence[StatsColumn], extra: Mapping[str, Any] | None = None
) -> str:
    """Delta ``stats`` JSON from one `collect_file_stats` row. ``extra`` lands under its own top-level keys
    (we use ``"deltaopt"``): delta-rs and the Delta protocol keep unknown keys verbatim."""
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    for i, column in enumerate(columns):
        if row.get(f"nulls_{i}") is not None:  # None: unknown (a footer without null counts)
            _nest(nulls, column.path, int(row[f"nulls_{i}"]))
        if not column.minmax:
            continue
        low = _encode_value(column, row.get(f"min_{i}"), is_max=False)
        high = _encode_value(column, row.get(f"max_{i}"), is_max=True)
        if column.type_name in ("float", "double") and high is _OMIT:
            low = _OMIT  # an all-NaN column has no meaningful minimum either
        if low is not _OMIT:
            _nest(mins, column.path, low)
        if high is not _OMIT:
            _nest(maxs, column.path, high)
    document: dict[str, Any] = {
        "numRecords": int(row["__rows"]),
        "minValues": mins,
        "maxValues": maxs,
        "nullCount": nulls,
        **(extra or {}),
    }
    return _dumps_exact(document)


def _dumps_exact(document: Any) -> str:
    """json.dumps with `_RawNumber` written as a bare JSON number (exact decimals)."""
    token = uuid.uuid4().hex
    raw: dict[str, str] = {}

    def default(value: Any) -> Any:
        if isinstance(value, _RawNumber):
            key = f"{token}{len(raw)}"
            raw[key] = value.text
            return key
        raise TypeError(f"not JSON serialisable: {type(value).__name__}")

    text = json.dumps(document, default=default, allow_nan=False, separators=(",", ":"))
    for key, number in raw.items():
        text = text.replace(f'"{key}"', number)
    return text


def data_columns(schema: StructType, partition_columns: Iterable[str]) -> StructType:
    """The schema stored inside data files: the table schema without partition columns."""
    from pyspark.sql.types import StructType

    skip = set(partition_columns)
    return StructType([f for f in schema.fields if f.name not in skip])


def decode_stats(
    stats_json: str, columns: Sequence[StatsColumn]
) -> tuple[int, dict[str, Any], dict[str, Any], dict[str, int]]:
    """(numRecords, min, max, null counts) of a stats JSON with values typed as delta-rs returns them
    (dates as `date`, timestamps as UTC `datetime`, decimals as `Decimal`), keyed by dotted column path.
    Used for statistics that never went through a log (the estimator's virtual files)."""
    document = json.loads(stats_json, parse_float=Decimal)

    def lookup(tree: Mapping[str, Any], path: tuple[str, ...]) -> Any:
        for part in path:
            if not isinstance(tree, Mapping) or part not in tree:
                return None
            tree = tree[part]
        return tree

    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for column in columns:
        for target, source in ((mins, document.get("minValues", {})), (maxs, document.get("maxValues", {}))):
            value = lookup(source, column.path)
            if value is not None:
                target[column.name] = _decode_value(column.type_name, value)
        count = lookup(document.get("nullCount", {}), column.path)
        if count is not None:
            nulls[column.name] = int(count)
    return int(document["numRecords"]), mins, maxs, nulls


def _decode_value(type_name: str, value: Any) -> Any:
    if type_name in ("float", "double"):
        return float(value)
    if type_name == "date":
        return dt.date.fromisoformat(value)
    if type_name == "timestamp":
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if type_name == "timestamp_ntz":
        return dt.datetime.fromisoformat(value)
    if type_name.startswith("decimal"):
        return Decimal(value)
    if type_name in ("tinyint", "smallint", "int", "bigint"):
        return int(value)
    return value
