"""Constants of a predicate as Python values, in the type family of what they are compared with.

Pruning compares statistics (Python values decoded from the Delta log or our index) with the
constants of a query. A constant is converted only when Spark's comparison would give the same
answer: numbers with numbers (Spark promotes int/decimal/float, so do Python's exact comparisons),
dates with dates (a string literal compared with a DATE column is cast to DATE by Spark, and parsed
the same way here), timestamps with timestamps, strings with strings. Anything else raises `Unknown`,
which makes the caller keep the file.

A timestamp literal without an offset names a wall-clock time in the reading session's zone (Spark's
``spark.sql.session.timeZone``), which is not always deltaopt's UTC. With the zone known it is that
instant, or a `Span` of both instants where the zone's clock skips or repeats the time; with the zone
unknown (a query log's queries, `explain`) it is a `Span` of every instant any zone gives it. A
timestamp_ntz literal is its wall clock in every zone.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlglot import exp

NUMBER_TYPES = ("tinyint", "smallint", "int", "bigint", "float", "double", "byte", "short", "long", "integer")
INTEGER_RANGES = {
    name: (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    for name, bits in (("tinyint", 8), ("smallint", 16), ("int", 32), ("bigint", 64))
}
DATE_RE = re.compile(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})\s*")
OFFSET_RE = re.compile(r"(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d{2}))?")
MAX_OFFSET = dt.timedelta(hours=18)  # java.time.ZoneOffset's range: every session zone's offset lies within


class Unknown(Exception):
    """The value cannot be compared soundly; keep the file."""


class NullValue:
    """The SQL NULL constant: no comparison with it is ever TRUE."""


NULL = NullValue()


@dataclass(frozen=True)
class Span:
    """A constant known only to lie in [low, high] (low < high): a timestamp literal without an offset
    whose instant depends on a session zone that is unknown or skips or repeats that wall-clock time.
    Pruning asks whether some value of the span may satisfy a comparison; it is never equal to a value."""

    low: Any
    high: Any


def family(type_name: str | None) -> str:
    """number, string, date, timestamp, timestamp_ntz, boolean, or other."""
    if type_name is None:
        return "other"
    name = type_name.lower()
    if name in NUMBER_TYPES or name.startswith("decimal"):
        return "number"
    if name.startswith(("varchar", "char")):
        return "string"
    return name if name in ("string", "date", "timestamp", "timestamp_ntz", "boolean") else "other"


def literal_family(node: exp.Expr) -> str:
    """The family a constant has on its own (used when no column type is known)."""
    node = node.unnest()
    if isinstance(node, exp.Neg):
        return literal_family(node.this)
    if isinstance(node, exp.Literal):
        return "string" if node.is_string else "number"
    if isinstance(node, exp.Boolean):
        return "boolean"
    if isinstance(node, exp.Cast | exp.TryCast):
        return family(node.to.sql(dialect="spark").lower())
    return "other"


def parse_date(text: str) -> dt.date:
    match = DATE_RE.fullmatch(text)
    if not match:
        raise Unknown(f"not a date literal: {text!r}")
    try:
        return dt.date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError as err:
        raise Unknown(str(err)) from err


def parse_timestamp(text: str, with_zone: bool, zone: str | None = None) -> dt.datetime | Span:
    """A TIMESTAMP literal (`with_zone`) as its UTC instant, an offset-less one read in the session zone
    `zone` (None: unknown, `Span`); a TIMESTAMP_NTZ literal as its naive wall clock."""
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError as err:
        raise Unknown(f"not a timestamp literal: {text!r}") from err
    if with_zone:
        return value.astimezone(dt.UTC) if value.tzinfo is not None else local_instant(value, zone)
    if value.tzinfo is not None:
        raise Unknown("a time zone on a TIMESTAMP_NTZ literal")
    return value


def local_instant(local: dt.datetime, zone: str | None) -> dt.datetime | Span:
    """The UTC instant of the wall-clock time `local` in the session zone `zone`. Where the zone skips
    it (Spark moves it forward by the gap) or repeats it (Spark takes the earlier instant), the span of
    the zone's two readings; for an unknown or unreadable zone, the span of every offset a zone may have."""
    tz = _zone(zone)
    try:
        if tz is None:
            utc = local.replace(tzinfo=dt.UTC)
            return Span(utc - MAX_OFFSET, utc + MAX_OFFSET)
        first, second = (local.replace(tzinfo=tz, fold=f).astimezone(dt.UTC) for f in (0, 1))
    except OverflowError as err:  # within a day of the years Python's datetime holds
        raise Unknown(f"a timestamp at the edge of the representable range: {local}") from err
    return first if first == second else Span(min(first, second), max(first, second))


@lru_cache(maxsize=64)
def _zone(zone: str | None) -> dt.tzinfo | None:
    """A Spark session zone id (a region, ``UTC``, ``Z``, ``+05:30``, ``GMT+8``) as a tzinfo; None when
    unknown or unreadable here (then the literal's instant is taken as unknown, never guessed)."""
    if zone is None:
        return None
    if zone.strip().upper() in ("Z", "UTC", "GMT", "UT"):
        return dt.UTC
    match = OFFSET_RE.fullmatch(zone.strip())
    if match:
        sign = -1 if match.group(1) == "-" else 1
        offset = dt.timedelta(hours=int(match.group(2)), minutes=int(match.group(3) or 0))
        return dt.timezone(sign * offset) if offset <= MAX_OFFSET else None
    try:
        return ZoneInfo(zone.strip())
    except (ZoneInfoNotFoundError, ValueError):
        return None


ZONE_META = "deltaopt.zone"  # the session zone a prepared predicate's constants were written in


def constant(node: exp.Expr, target: str) -> Any:
    """`node` (a constant expression) as a value of family `target`; an offset-less timestamp is read in
    the zone `pruning.prepare` noted on the node (`ZONE_META`; none: unknown). Raises `Unknown`. Cached
    on the node per family: pruning converts the same constant for every file."""
    key = f"deltaopt.constant.{target}"
    if key not in node.meta:
        try:
            node.meta[key] = (_constant(node, target, node.meta.get(ZONE_META)), None)
        except Unknown as err:
            node.meta[key] = (None, err)
    value, error = node.meta[key]
    if error is not None:
        raise error
    return value


def _constant(node: exp.Expr, target: str, zone: str | None) -> Any:
    node = node.unnest()
    if isinstance(node, exp.Null):
        return NULL
    if isinstance(node, exp.Neg):
        value = _constant(node.this, target, zone)
        if isinstance(value, Decimal):
            return -value
        raise Unknown("negation of a non-number")
    if isinstance(node, exp.Boolean):
        if target != "boolean":
            raise Unknown("boolean compared with a non-boolean")
        return bool(node.this)
    if isinstance(node, exp.Cast | exp.TryCast):
        cast_to = family(node.to.sql(dialect="spark").lower())
        if cast_to != target or not isinstance(node.this.unnest(), exp.Literal):
            raise Unknown("cast to another type family")
        inner = node.this.unnest()
        value = _from_literal(inner.this, inner.is_string, target, zone)
        if target == "number" and not _cast_keeps(node.to, value):
            raise Unknown(f"a cast that may change the number: {node.sql(dialect='spark')}")
        return value
    if isinstance(node, exp.Literal):
        return _from_literal(node.this, node.is_string, target, zone)
    if isinstance(node, exp.Add | exp.Sub) and target == "date" and isinstance(node.expression.unnest(), exp.Interval):
        if not _typed_date(node.this):  # '2024-04-01' - INTERVAL 30 DAY is a string to Spark
            raise Unknown("an interval added to what is not a date")
        return _shifted(_constant(node.this, target, zone), node.expression.unnest(), isinstance(node, exp.Sub))
    raise Unknown(f"not a constant pruning understands: {type(node).__name__}")


_INTERVAL_MONTHS = {"DAY": 0, "MONTH": 1, "YEAR": 12}


def _typed_date(node: exp.Expr) -> bool:
    """A DATE literal, or one shifted by intervals: Spark adds an interval to it as a date."""
    node = node.unnest()
    if isinstance(node, exp.Add | exp.Sub) and isinstance(node.expression.unnest(), exp.Interval):
        return _typed_date(node.this)
    return isinstance(node, exp.Cast | exp.TryCast) and node.to.is_type(exp.DataType.Type.DATE)


def _shifted(day: Any, interval: exp.Interval, back: bool) -> dt.date:
    """``DATE 'x' + INTERVAL 'n' DAY|MONTH|YEAR`` as Spark folds it: a date, a month past its end
    clamped to the month's last day (``DATE '2024-01-31' + INTERVAL 1 MONTH`` is 2024-02-29)."""
    amount, unit = interval.this, interval.args.get("unit")
    if not isinstance(day, dt.date) or not isinstance(amount, exp.Literal) or not isinstance(unit, exp.Var):
        raise Unknown("an interval pruning does not fold")
    months = _INTERVAL_MONTHS.get(unit.name.upper())
    text = str(amount.this).strip()
    if months is None or not re.fullmatch(r"[+-]?[0-9]{1,6}", text):
        raise Unknown(f"an interval pruning does not fold: {interval.sql(dialect='spark')}")
    count = -int(text) if back else int(text)
    try:
        if months == 0:
            return day + dt.timedelta(days=count)
        index = day.year * 12 + day.month - 1 + count * months
        year, month = divmod(index, 12)
        last = (dt.date(year + (month == 11), (month + 1) % 12 + 1, 1) - dt.timedelta(days=1)).day
        return dt.date(year, month + 1, min(day.day, last))
    except (ValueError, OverflowError) as err:
        raise Unknown(f"a date out of the calendar: {err}") from err


def _cast_keeps(to: exp.DataType, value: Decimal) -> bool:
    """Whether Spark's cast of the number `value` to `to` leaves it as it is: a cast to double or float
    (pruning compares those in their own precision), to an integer type when it is an integer in range,
    or to a decimal whose precision and scale hold it (``CAST(1.5 AS INT)`` is 1, not 1.5)."""
    if to.is_type(exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT):
        return True
    name = to.sql(dialect="spark").lower()
    if name in INTEGER_RANGES:
        low, high = INTEGER_RANGES[name]
        return value == value.to_integral_value() and low <= value <= high
    typed = re.fullmatch(r"decimal(?:\(([0-9]+)(?:,\s*([0-9]+))?\))?", name)
    if typed is None:
        return False
    precision = int(typed.group(1) or 10)  # Spark's DECIMAL is DECIMAL(10, 0)
    scale = int(typed.group(2) or 0)
    exponent = value.normalize().as_tuple().exponent
    fraction = max(0, -exponent) if isinstance(exponent, int) else 0
    whole = len(str(abs(int(value))).lstrip("0"))
    return fraction <= scale and whole <= precision - scale


def _from_literal(text: str, is_string: bool, target: str, zone: str | None) -> Any:
    if target == "number":
        if is_string:
            raise Unknown("string compared with a number (Spark's coercion differs by version)")
        try:
            value = Decimal(text)
        except InvalidOperation as err:
            raise Unknown(f"not a number: {text!r}") from err
        if not value.is_finite():
            raise Unknown("NaN or infinity")
        return value
    if not is_string:
        raise Unknown(f"number compared with a {target}")
    if target == "string":
        return text
    if target == "date":
        return parse_date(text)
    if target == "timestamp":
        return parse_timestamp(text, with_zone=True, zone=zone)
    if target == "timestamp_ntz":
        return parse_timestamp(text, with_zone=False)
    raise Unknown(f"cannot compare with values of family {target}")
