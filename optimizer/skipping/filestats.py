"""What pruning knows about one file (real or virtual): value bounds per column and per expression,
SOP bits, and the exact values of key columns.

Bounds are built so they hold for every row whatever wrote the statistics (delta-rs, Delta Spark or
deltaopt):

* timestamp statistics have millisecond precision and some writers truncate the maximum, so
  timestamps are widened by one millisecond on both sides;
* writers truncate long strings (Delta Spark to 32 characters with a tie-breaker), so a string maximum
  of 32 or more characters is ignored; a truncated minimum is a prefix and still a lower bound;
* float/double maxima written by others ignore NaN, which Spark orders above every number, so such a
  file may hold NaN above its maximum unless deltaopt wrote it (NaN-aware);
* a column without statistics has no bounds; a file without a row count has unknown NULL counts.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from functools import cached_property
from typing import Any

from optimizer.skipping.extended import STRING_PREFIX, ExtendedStats, location_key
from optimizer.skipping.values import INTEGER_RANGES, family
from optimizer.table.access import DataFile

TIMESTAMP_SLACK = dt.timedelta(milliseconds=1)
CHAR_TYPE_KEY = "__CHAR_VARCHAR_TYPE_STRING"  # Spark's field metadata naming a CHAR or VARCHAR column's type
# partition values as the Delta protocol spells them; Python's own parsers take more (underscores, ISO weeks)
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+)(?:\.([0-9]+))?")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DECIMAL_TYPE = re.compile(r"decimal\(([0-9]+),\s*([0-9]+)\)")


@dataclass(frozen=True)
class Bounds:
    """Every non-NULL value lies in [low, high] (None: unbounded); NaN may exceed `high` when flagged.
    `type_name`: the Spark type of the values (lower case), which decides how Spark compares them with
    a number constant (`skipping.numbers`); None when unknown."""

    family: str
    low: Any = None
    high: Any = None
    nulls: int | None = None
    nan_possible: bool = False
    type_name: str | None = None


@dataclass(frozen=True)
class FileStats:
    path: str
    rows: int | None
    columns: Mapping[str, Bounds] = field(default_factory=dict)  # lower-cased dotted column path -> bounds
    expressions: Mapping[str, Bounds] = field(default_factory=dict)  # canonical expression SQL -> bounds
    sop: Mapping[str, bool] = field(default_factory=dict)  # canonical predicate -> some row satisfies it
    keys: Mapping[str, frozenset[Any]] = field(default_factory=dict)  # lower-cased column -> every non-NULL value
    # (fact column, dimension location, key) -> attribute -> bounds over the joined dimension rows; only
    # ranges recorded at the dimension's version the scan reads (`skipping.joined`)
    joined: Mapping[tuple[str, str, str], Mapping[str, Bounds]] = field(default_factory=dict)
    # the session zone `expressions` and `sop` were computed in (None: unknown, so no zone-dependent
    # query uses them: `skipping.zones`)
    zone: str | None = None

    def column_family(self, path: str) -> str | None:
        """The type family of a lower-cased dotted column path: from Delta's columns, else from a range
        the extended statistics keep of it (the estimate's helper columns); None when unknown."""
        bounds = self.columns.get(path) or self.expressions.get(path)
        return bounds.family if bounds is not None else None

    @cached_property
    def types(self) -> Mapping[str, str]:
        """{lower-cased column path or canonical expression: its Spark type}, where known."""
        known = (*self.expressions.items(), *self.columns.items())
        return {name: bounds.type_name for name, bounds in known if bounds.type_name is not None}

    @cached_property
    def types_key(self) -> frozenset[tuple[str, str]]:
        """`types` as a key: pruning caches per query node what depends on the table's types."""
        return frozenset(self.types.items())

    @cached_property
    def string_expressions(self) -> frozenset[str]:
        """Columns and expressions known to hold strings: only their constants compare as text
        (`implication.implies`)."""
        known = (*self.columns.items(), *self.expressions.items())
        return frozenset(name for name, bounds in known if bounds.family == "string")


def column_bounds(type_name: str, low: Any, high: Any, nulls: int | None, nan_aware: bool) -> Bounds:
    """Bounds that hold whoever wrote the statistics (the module's rules), typed `type_name`."""
    return replace(_written_bounds(type_name, low, high, nulls, nan_aware), type_name=type_name.lower())


def _written_bounds(type_name: str, low: Any, high: Any, nulls: int | None, nan_aware: bool) -> Bounds:
    kind = family(type_name)
    if is_padded(type_name):
        return Bounds(kind, None, None, nulls)
    if type_name.lower() in ("float", "double"):
        return Bounds(kind, low, high, nulls, nan_possible=not nan_aware)
    if kind in ("timestamp", "timestamp_ntz"):
        low = low - TIMESTAMP_SLACK if isinstance(low, dt.datetime) else None
        high = high + TIMESTAMP_SLACK if isinstance(high, dt.datetime) else None
        return Bounds(kind, low, high, nulls)
    if kind == "string":
        high = high if isinstance(high, str) and len(high) < STRING_PREFIX else None
        low = low if isinstance(low, str) else None
        return Bounds(kind, low, high, nulls)
    if kind in ("number", "date", "boolean"):
        return Bounds(kind, low, high, nulls)
    return Bounds("other", None, None, nulls)


def file_stats(
    data_file: DataFile,
    column_types: Mapping[str, str],
    extended: ExtendedStats | None = None,
    versions: Mapping[str, int | None] | None = None,
) -> FileStats:
    """Pruning statistics of an active file from its Delta statistics and fresh extended statistics.
    Joined ranges are kept only for dimensions whose version in `versions` ({location: version the
    scan reads}) is the one they were recorded at."""
    nan_aware = extended is not None and extended.float_max_includes_nan
    columns: dict[str, Bounds] = {}
    for name, type_name in column_types.items():
        nulls = data_file.null_counts.get(name)
        if name in data_file.partition_values:
            columns[name.lower()] = _partition_bounds(type_name, data_file.partition_values[name])
            continue
        columns[name.lower()] = column_bounds(
            type_name, data_file.min_values.get(name), data_file.max_values.get(name), nulls, nan_aware
        )
    expressions: dict[str, Bounds] = {}
    sop: dict[str, bool] = {}
    keys: dict[str, frozenset[Any]] = {}
    if extended is not None:
        keys = {column.lower(): values for column, values in extended.key_sets.items()}
        for expression, value_range in extended.ranges.items():
            expressions[expression] = column_bounds(
                value_range.type_name, value_range.min, value_range.max, value_range.null_count, nan_aware=True
            )
        sop = {f: bit == "1" for f, bit in zip(extended.sop_features, extended.sop_bits, strict=True)}
    joined = _joined_bounds(extended, versions or {})
    zone = extended.zone if extended is not None else None
    return FileStats(data_file.path, data_file.num_records, columns, expressions, sop, keys, joined, zone)


def _joined_bounds(
    extended: ExtendedStats | None, versions: Mapping[str, int | None]
) -> dict[tuple[str, str, str], dict[str, Bounds]]:
    """The joined ranges recorded at the version the scan reads (`versions`); others are unknown."""
    found: dict[tuple[str, str, str], dict[str, Bounds]] = {}
    for entry in extended.joined if extended is not None else ():
        if versions.get(location_key(entry.location)) != entry.version:
            continue  # the dimension moved (or is not read): its attributes may have been reassigned
        found[entry.join] = {
            attribute: column_bounds(r.type_name, r.min, r.max, r.null_count, nan_aware=True)
            for attribute, r in entry.ranges.items()
        }
    return found


def _partition_bounds(type_name: str, value: str | None) -> Bounds:
    """A partition value is exact: every row of the file holds it. Values arrive as the log spells them
    and bound the file where that spelling is unambiguous (`partition_value`); otherwise no bounds, and
    the file is kept."""
    kind = family(type_name)
    typed = type_name.lower()
    if value is None or is_padded(type_name):
        return Bounds(kind, None, None, nulls=None, type_name=typed)
    if kind == "string":
        return Bounds(kind, value, value if len(value) < STRING_PREFIX else None, nulls=0, type_name=typed)
    parsed = partition_value(type_name, value)
    # unparsed: no bounds, but the column's family (a timestamp stays zone-dependent: `skipping.zones`)
    return Bounds(kind, type_name=typed) if parsed is None else Bounds(kind, parsed, parsed, nulls=0, type_name=typed)


def _decimal(type_name: str, value: str) -> Decimal | None:
    """A decimal partition value that fits its column's precision and scale as spelled (Spark reads one
    past them rounded, or as null)."""
    spelled = _DECIMAL.fullmatch(value)
    typed = _DECIMAL_TYPE.fullmatch(type_name)
    if spelled is None or typed is None:
        return None
    whole = spelled.group(1).lstrip("0")
    fraction = spelled.group(2) or ""
    precision = int(typed.group(1))
    scale = int(typed.group(2))
    return Decimal(value) if len(fraction) <= scale and len(whole) <= precision - scale else None


def partition_bounded(type_name: str) -> bool:
    """Whether a partition column of Spark type `type_name` bounds its files (`partition_value` parses
    it, or it is a string): what the estimate's virtual files must bound too, or a filter on the column
    would prune the files before a layout and none after it."""
    name = type_name.lower()
    return name in (*INTEGER_RANGES, "string", "date", "boolean") or name.startswith("decimal(")


def partition_value(type_name: str, value: str) -> Any:
    """A non-string partition value as its column's type, where the Delta protocol's spelling is one
    value: integers, decimals, dates (``YYYY-MM-DD``), booleans; None for anything else or anything
    that does not parse. Timestamps stay unknown (writers spelled them in the session's zone, with no
    zone), and so do floats (NaN and -0.0 compare unlike their spellings)."""
    name = type_name.lower()
    try:
        if name in INTEGER_RANGES and _INTEGER.fullmatch(value):
            low, high = INTEGER_RANGES[name]
            number = int(value)
            return number if low <= number <= high else None  # out of range: Spark reads it as null
        if name.startswith("decimal"):
            return _decimal(name, value)
        if name == "date" and _DATE.fullmatch(value):
            return dt.date.fromisoformat(value)
    except ValueError:  # a date out of the calendar
        return None
    if name == "boolean":
        return {"true": True, "false": False}.get(value.lower())
    return None


def table_column_types(schema_fields: Any, prefix: str = "", padded: frozenset[str] = frozenset()) -> dict[str, str]:
    """{dotted leaf path: Spark type name} of a Spark StructType. A CHAR or VARCHAR column, which Delta
    stores as a string with its declared type in the top-level field's metadata (a struct's whole type:
    ``struct<c:char(5)>``), is named by that type; a struct field named CHAR there is typed ``char``."""
    from pyspark.sql.types import StructType

    types: dict[str, str] = {}
    for f in schema_fields:
        name = f"{prefix}{f.name}"
        declared = (f.metadata or {}).get(CHAR_TYPE_KEY)
        if isinstance(f.dataType, StructType):
            inner = padded | (_char_fields(declared) if isinstance(declared, str) else frozenset())
            types.update(table_column_types(f.dataType.fields, name + ".", inner))
        elif isinstance(declared, str):
            types[name] = declared.lower()
        else:
            types[name] = "char" if f.name.lower() in padded else f.dataType.simpleString()
    return types


_CHAR_FIELD = re.compile(r"`?([^`:<>,\s]+)`?\s*:\s*char\(", re.IGNORECASE)


def _char_fields(declared: str) -> frozenset[str]:
    """The names of the CHAR fields anywhere in a struct's declared type (lower-cased). A name may
    repeat at another depth: every field so named is then taken for a CHAR (it only loses bounds)."""
    return frozenset(m.group(1).lower() for m in _CHAR_FIELD.finditer(declared))


def is_padded(type_name: str) -> bool:
    """A CHAR(n) column: Spark compares its values and the literals they meet padded with spaces to n,
    while Delta's statistics and the partition values hold them as written (``'ab'`` for ``'ab   '``),
    so its bounds order otherwise than Spark (``c = 'ab '`` is TRUE on it) and it bounds no file."""
    name = type_name.lower().replace(" ", "")
    return name == "char" or name.startswith("char(")
