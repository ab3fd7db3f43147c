"""What checking and describing freshly written Parquet files needs: their schema against the table's,
their statistics row among Spark's aggregation rows, their partition values from the directories.

A timestamp is an instant; Spark names its partition directory by the instant's local time in the
writer's time zone, which readers in other zones would read as another instant (and which a zone's
repeated hour makes ambiguous). deltaopt's Parquet writer names them in UTC (`DIRECTORY_TIME_ZONE`),
and the log gets Delta's own form, the instant in UTC ISO 8601 (`delta_timestamp`), as Delta's
``DelayedCommitProtocol`` writes it (``PartitionUtils.utcFormatter``). timestamp_ntz values have no
zone: they stay as Spark renders them. A rewrite's row check compares partition values by what they
are (`partition_key`), not by one rendering of them.

A value older writers logged without a zone (``2024-01-01 10:00:00``: Delta before
``write.utcTimestampPartitionValues``, delta-rs) names a local time each reader reads in its own
session zone. A rewrite keeps such a spelling for the files that replace it (`kept_spellings`): the
UTC form of the instant one session read would move the rows for readers in other zones.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Hashable, Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from optimizer import errors

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession
    from pyspark.sql.types import DataType, StructType

# the time zone Spark renders timestamp partition directories in when deltaopt writes Parquet (the
# writer's ``timeZone`` option): UTC has no repeated hour, so a directory names exactly one instant
DIRECTORY_TIME_ZONE = "UTC"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# how Spark renders a timestamp: the fraction of a second without trailing zeros
SPARK_LOCAL_TIME = re.compile(r"^(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?$")
# a fixed offset as Spark's session time zone may name it: +05:30, GMT+8, UTC-03:00
ZONE_OFFSET = re.compile(r"^(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d\d))?(?::?(\d\d))?$")
# the three-letter zone names Spark reads through Java's ``ZoneId.SHORT_IDS`` (DateTimeUtils.getZoneId)
SHORT_IDS = {
    "EST": "-05:00", "MST": "-07:00", "HST": "-10:00", "ACT": "Australia/Darwin", "AET": "Australia/Sydney",
    "AGT": "America/Argentina/Buenos_Aires", "ART": "Africa/Cairo", "AST": "America/Anchorage",
    "BET": "America/Sao_Paulo", "BST": "Asia/Dhaka", "CAT": "Africa/Harare", "CNT": "America/St_Johns",
    "CST": "America/Chicago", "CTT": "Asia/Shanghai", "EAT": "Africa/Addis_Ababa", "ECT": "Europe/Paris",
    "IET": "America/Indiana/Indianapolis", "IST": "Asia/Kolkata", "JST": "Asia/Tokyo", "MIT": "Pacific/Apia",
    "NET": "Asia/Yerevan", "NST": "Pacific/Auckland", "PLT": "Asia/Karachi", "PNT": "America/Phoenix",
    "PRT": "America/Puerto_Rico", "PST": "America/Los_Angeles", "SST": "Pacific/Guadalcanal",
    "VST": "Asia/Ho_Chi_Minh",
}  # fmt: skip
# per partition column: a timestamp's instant (microseconds since the epoch) -> the zone-less spelling
# the log holds for it, which the files written for that instant keep
KeptSpellings = Mapping[str, Mapping[int, str]]


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


def partition_values(
    path: str, directory: str, partition_columns: Sequence[str], schema: StructType, kept: KeptSpellings | None = None
) -> dict[str, str | None]:
    """The partition values of a file deltaopt's Parquet writer wrote under `directory`, in the form
    Delta writes them to the log: timestamps (directories named in `DIRECTORY_TIME_ZONE`) as the instant
    in UTC ISO form, or the zone-less spelling the replaced files hold for it (`kept`), every other type
    as the directory names it. Raises `RewriteValidationError` when a partition directory is missing or
    a timestamp cannot be read."""
    from pyspark.sql.types import TimestampType

    if not partition_columns:
        return {}
    values = directory_values(path[len(directory) + 1 :])
    missing = [c for c in partition_columns if c not in values]
    if missing:
        raise errors.RewriteValidationError(f"written file {path} lacks partition directories for {missing}")
    for column in partition_columns:
        value = values[column]
        if value is not None and isinstance(schema[column].dataType, TimestampType):
            values[column] = spelled(column, local_time(value).replace(tzinfo=UTC), kept)
    return values


def spelled(column: str, instant: datetime, kept: KeptSpellings | None) -> str:
    """How the log spells `instant` in timestamp partition `column`: the zone-less spelling the replaced
    files hold for it (`kept`), else Delta's UTC ISO form."""
    spelling = (kept or {}).get(column, {}).get(micros(instant))
    return spelling if spelling is not None else delta_timestamp(instant)


def directory_values(path: str) -> dict[str, str | None]:
    """The ``key=value`` directories of a relative file path (decoded, as on storage), Hive-unescaped;
    ``__HIVE_DEFAULT_PARTITION__`` is NULL."""
    from urllib.parse import unquote

    values: dict[str, str | None] = {}
    for part in path.split("/")[:-1]:
        key, equals, raw = part.partition("=")
        if equals:
            key = unquote(key)  # Hive-style escaping of names and values on storage
            value = unquote(raw)
            values[key] = None if value == "__HIVE_DEFAULT_PARTITION__" else value
    return values


def local_time(text: str) -> datetime:
    """A timestamp as Spark renders it (``yyyy-MM-dd HH:mm:ss[.fraction]``), as a naive local time;
    raises `RewriteValidationError` for anything else (years beyond 9999, say)."""
    match = SPARK_LOCAL_TIME.match(text)
    if match is None:
        raise errors.RewriteValidationError(f"cannot read the timestamp partition value {text!r}")
    year, month, day, hour, minute, second, fraction = match.groups()
    micros = int((fraction or "").ljust(6, "0"))
    try:
        return datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micros)
    except ValueError as err:
        raise errors.RewriteValidationError(f"cannot read the timestamp partition value {text!r}: {err}") from err


def delta_timestamp(instant: datetime) -> str:
    """Delta's form of a timestamp partition value: the instant in UTC, ISO 8601 with microseconds and
    ``Z`` (``yyyy-MM-dd'T'HH:mm:ss.SSSSSSz`` in UTC, ``PartitionUtils.utcFormatter``)."""
    u = instant.astimezone(UTC)
    return f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}.{u.microsecond:06d}Z"


def partition_key_columns(schema: StructType, names: Sequence[str]) -> list[Column]:
    """Spark expressions, aliased by column name, whose collected values `partition_key` reads: a
    timestamp as its instant (microseconds since the epoch: the session's zone plays no part), every
    other type as Spark renders it (its directory's and Delta's form)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    types = {f.name.lower(): f.dataType for f in schema.fields}  # Spark resolves names case-insensitively
    columns = []
    for name in names:
        column = F.col(f"`{name}`")
        timestamp = isinstance(types.get(name.lower()), TimestampType)
        columns.append((F.unix_micros(column) if timestamp else column.cast("string")).alias(name))
    return columns


def partition_key(value: str | int | None, data_type: DataType | None, zone: str | None = None) -> Hashable:
    """What a partition value is, to compare a rewrite's written files with its input: a timestamp's
    instant in microseconds (`value` as `partition_key_columns` collects it, or a string from the log;
    a zone-less one read in the session time zone `zone`, as the input's readers read it; without
    `zone` it stays text, equal to no instant), a timestamp_ntz's local time, any other value's text.
    NULL is None."""
    from pyspark.sql.types import TimestampNTZType, TimestampType

    if value is None or isinstance(value, int):
        return value
    if isinstance(data_type, TimestampType):
        parsed = _iso(value)
        if parsed is not None and parsed.tzinfo is None and zone is not None:
            parsed = parsed.replace(tzinfo=time_zone(zone))
        return ("zone-less", value) if parsed is None or parsed.tzinfo is None else micros(parsed)
    if isinstance(data_type, TimestampNTZType):
        parsed = _iso(value)
        return value if parsed is None or parsed.tzinfo is not None else parsed
    return value


def micros(instant: datetime) -> int:
    """An aware datetime as microseconds since the epoch. A local time a zone repeats is its first
    occurrence and one it skips is moved past the gap (``fold=0``), as Java's ``atZone`` and so Spark's
    cast read them."""
    return (instant - EPOCH) // timedelta(microseconds=1)


def session_zone(spark: SparkSession) -> str:
    """The session's time zone: the one its readers cast zone-less partition values in."""
    return str(spark.conf.get("spark.sql.session.timeZone"))


@lru_cache(maxsize=64)
def time_zone(name: str) -> tzinfo:
    """Spark's session time zone `name` as Python's: a region (``Asia/Kolkata``) or a fixed offset
    (``+05:30``, ``GMT+8``, ``Z``). Raises `RewriteValidationError` for one Python cannot read."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    name = SHORT_IDS.get(name, name)
    if name in ("Z", "UTC", "GMT", "UT"):
        return UTC
    offset = ZONE_OFFSET.match(name)
    if offset is not None:
        sign, hours, minutes, seconds = offset.groups()
        delta = timedelta(hours=int(hours), minutes=int(minutes or 0), seconds=int(seconds or 0))
        return timezone(-delta if sign == "-" else delta)
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise errors.RewriteValidationError(
            f"cannot read the session time zone {name!r}, in which zone-less timestamp partition values are "
            "read; set spark.sql.session.timeZone to a region (Europe/Paris) or an offset (+01:00)"
        ) from err


def kept_spellings(
    replacing: Sequence[Mapping[str, str | None]],
    unresolved: Mapping[str, Mapping[str, Collection[str]]],
    partition_columns: Sequence[str],
    schema: StructType,
    zone: str,
) -> dict[str, dict[int, str]]:
    """The zone-less timestamp partition spellings a rewrite's files keep: per timestamp partition
    column, the instant each names in the session `zone` (as the rows were read) -> the spelling, from
    the partition values of the files `replacing` (logical names).

    Raises `RewriteValidationError`, before anything is written, where the replaced files hold one
    instant of this session under spellings that readers in other zones read apart (zone-less and UTC
    ISO, or two local times one zone merges), or a value standing for several spellings the log reader
    could not tell apart (`unresolved`: column -> value -> the spellings; delta-rs reads a zone-less
    value and its UTC ISO twin as one)."""
    from pyspark.sql.types import TimestampType

    kept: dict[str, dict[int, str]] = {}
    for column in partition_columns:
        if not isinstance(schema[column].dataType, TimestampType):
            continue
        spellings = {v for values in replacing if (v := values.get(column)) is not None}
        _check_resolved(column, spellings, unresolved.get(column, {}))
        groups: dict[int, set[str]] = {}
        for spelling in spellings:
            parsed = _iso(spelling)
            if parsed is not None:
                aware = parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=time_zone(zone))
                groups.setdefault(micros(aware), set()).add(spelling)
        for instant, group in groups.items():
            zone_less = {s for s in group if _is_zone_less(s)}
            if zone_less:
                kept.setdefault(column, {})[instant] = _one_spelling(column, group, zone_less, zone)
    return kept


def _check_resolved(column: str, spellings: Collection[str], unresolved: Mapping[str, Collection[str]]) -> None:
    """Refuses a rewrite of files whose spelling the log reader could not tell (see `kept_spellings`)."""
    for value in sorted(spellings):
        if value in unresolved:
            named = " and ".join(repr(s) for s in sorted(unresolved[value]))
            raise errors.RewriteValidationError(
                f"partition column {column}: the log holds {named}, one instant in UTC and different ones "
                "for readers in other time zones, and the log reader cannot tell which files hold which; one "
                "spelling for the rewritten files would move rows; nothing was written"
            )


def _one_spelling(column: str, group: set[str], zone_less: set[str], zone: str) -> str:
    """The zone-less spelling of one instant's files, when every reader reads them as one: spellings of
    one local time (``10:00:00``, ``10:00:00.000000``); else the rewrite is refused."""
    if len(zone_less) == len(group) and len({_iso(s) for s in zone_less}) == 1:
        return min(zone_less)
    spellings = ", ".join(repr(s) for s in sorted(group))
    raise errors.RewriteValidationError(
        f"partition column {column}: {spellings} name one instant in the session time zone {zone} but "
        "different ones for readers in other zones; rewriting them into one partition would move rows; "
        "nothing was written"
    )


def _is_zone_less(text: str) -> bool:
    parsed = _iso(text)
    return parsed is not None and parsed.tzinfo is None


def has_zone(text: str) -> bool:
    """Whether a timestamp partition value names its zone (Delta's UTC ISO form, an offset)."""
    parsed = _iso(text)
    return parsed is not None and parsed.tzinfo is not None


def _iso(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None
