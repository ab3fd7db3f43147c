"""Constants of a predicate as Python values, in the type family of what they are compared with.

Pruning compares statistics (Python values decoded from the Delta log or our index) with the
constants of a query. A constant is converted only when Spark's comparison would give the same
answer: numbers with numbers (Spark promotes int/decimal/float, so do Python's exact comparisons),
dates with dates (a string literal compared with a DATE column is cast to DATE by Spark, and parsed
the same way here), timestamps with timestamps (literals without an offset are UTC: deltaopt's
sessions run in UTC), strings with strings. Anything else raises `Unknown`, which makes the caller
keep the file.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

NUMBER_TYPES = ("tinyint", "smallint", "int", "bigint", "float", "double", "byte", "short", "long", "integer")
DATE_RE = re.compile(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})\s*")


class Unknown(Exception):
    """The value cannot be compared soundly; keep the file."""


class NullValue:
    """The SQL NULL constant: no comparison with it is ever TRUE."""


NULL = NullValue()


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


def parse_timestamp(text: str, with_zone: bool) -> dt.datetime:
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError as err:
        raise Unknown(f"not a timestamp literal: {text!r}") from err
    if with_zone:
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
    if value.tzinfo is not None:
        raise Unknown("a time zone on a TIMESTAMP_NTZ literal")
    return value


def constant(node: exp.Expr, target: str) -> Any:
    """`node` (a constant expression) as a value of family `target`. Raises `Unknown`. Cached on the
    node per family: pruning converts the same constant for every file."""
    key = f"deltaopt.constant.{target}"
    if key not in node.meta:
        try:
            node.meta[key] = (_constant(node, target), None)
        except Unknown as err:
            node.meta[key] = (None, err)
    value, error = node.meta[key]
    if error is not None:
        raise error
    return value


def _constant(node: exp.Expr, target: str) -> Any:
    node = node.unnest()
    if isinstance(node, exp.Null):
        return NULL
    if isinstance(node, exp.Neg):
        value = _constant(node.this, target)
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
        return _from_literal(inner.this, inner.is_string, target)
    if isinstance(node, exp.Literal):
        return _from_literal(node.this, node.is_string, target)
    raise Unknown(f"not a constant pruning understands: {type(node).__name__}")


def _from_literal(text: str, is_string: bool, target: str) -> Any:
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
        return parse_timestamp(text, with_zone=True)
    if target == "timestamp_ntz":
        return parse_timestamp(text, with_zone=False)
    raise Unknown(f"cannot compare with values of family {target}")
