"""The canonical text of the filters a join's keys imply on the fact's key column: its list, its range.

The query log stores filters as canonical text (`querylog.predicates.normalize`), and the capture and the
analysis compare those strings, so a derived filter's text must be exactly what ``canonical_conjuncts``
gives for the same expression. Running that normaliser over a list of hundreds of keys costs
milliseconds per filter (a dozen tree passes and sqlglot's ``simplify``), and an import derives
hundreds of them. For the key types a source's keys usually have (integers, strings, dates, decimals)
and a plain column name, the canonical tree is built directly instead, in the normaliser's own terms,
and rendered once by sqlglot:

* the column lower-cased (``lower_identifiers``);
* each key as ``exp.convert`` makes it (a negative number is a ``Neg`` of its absolute value);
* an IN list deduplicated by the keys' text and ordered as ``equalities_to_in`` orders it: non-negative
  numbers by value, then strings by value, then everything else (negative numbers, dates) by its text;
  one key is an equality;
* decimal keys as written (no pass strips their zeros: Spark types ``2.0`` a DECIMAL, ``2`` an INT).

No other pass changes these trees. Any other key type (timestamps, mixed types) or a column name that
is not a plain identifier goes through ``canonical_conjuncts`` as before. The deriver never asks for key
columns of types whose keys no filter states soundly (floats, collated strings, binary: `key_type_problem`).
The two are compared on generated keys in ``tests/catalog/test_key_filters.py``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from querylog.predicates.normalize import canonical_conjuncts, lower_identifiers, sql

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

SCATTERED = 0.5  # keys filling less of their min..max span than this are listed as a key set
PLAIN_COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
Order = tuple[int, Any, str]  # `querylog.predicates.normalize._value_order`'s key, computed without rendering


def key_filters(column: str, values: list[Any], low: Any, high: Any, *, max_in: int, max_keys: int) -> list[str]:
    """The canonical conjuncts on the fact's `column` that the dimension keys imply: `values` (distinct,
    non-NULL; more than ``max(max_in, max_keys)`` means a truncated list) whose bounds are `low` and
    `high`. Up to `max_in` keys: their list; more: their range, plus their list up to `max_keys` keys
    when they are scattered over it. Every conjunct holds for every one of the keys."""
    bounded = len(values) > max_in
    listed = not bounded or (len(values) <= max_keys and scattered(values, low, high))
    order = _order_of(column, [low, high, *values])
    if order is None:
        return _normalised(column, values, low, high, bounded=bounded, listed=listed)
    target = lower_identifiers(exp.column(column))
    built: list[exp.Expr] = []
    if bounded:
        built += [_compared(exp.GTE, target, low), _compared(exp.LTE, target, high)]
    if listed:
        built.append(_members(target, values, order))
    return [sql(b) for b in built]


def key_type_problem(column: str, data_type: DataType) -> str | None:
    """Why a key column of `data_type` derives nothing, None when its derived filters are sound. Allowed:
    integers, decimals, dates, and strings compared byte by byte. A float's NaN joins NaN yet no list or
    range holds it (Spark's max is NaN, ``inf`` renders as a name); a collated string joins keys its list
    leaves out (``'A'`` under ``UTF8_LCASE`` joins ``'a'``); a timestamp's collected value is a wall
    clock in this process's zone while its literal is read in the session's, so a list could miss keys
    when the two differ; other types (binary, boolean, nested) are not rendered as the keys Spark compares."""
    from pyspark.sql.types import DateType, DecimalType, IntegralType, StringType

    collation = getattr(data_type, "collation", "UTF8_BINARY")  # Spark 3.5's strings have no collation
    if isinstance(data_type, StringType) and collation != "UTF8_BINARY":
        return f"join key {column} is a string collated {collation}: its keys join others no list states"
    allowed = IntegralType | DecimalType | DateType | StringType
    if isinstance(data_type, allowed):
        return None
    return f"join key {column} is of type {data_type.simpleString()}, whose keys no derived filter states soundly"


def scattered(values: list[Any], low: Any, high: Any) -> bool:
    """Whether `values` fill less than half of the domain between `low` and `high` (integers and dates;
    other types always count as scattered: a range of strings says nothing about density)."""
    span = key_span(low, high)
    return span is None or len(values) < SCATTERED * span


def key_span(low: Any, high: Any) -> int | None:
    """How many values an integer or date column can hold between `low` and `high` (None: other types,
    booleans among them, which are no join keys: `key_type_problem`)."""
    if _integer(low) and _integer(high):
        return int(high) - int(low) + 1
    if _day(low) and _day(high):
        return (high - low).days + 1
    return None


def exact_key(value: Any) -> bool:
    """Whether a statistics bound of this value is exact (integers, decimals, dates; strings and
    timestamps may be truncated, floats compare NaN apart)."""
    return _integer(value) or _day(value) or isinstance(value, Decimal)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _day(value: Any) -> bool:
    return isinstance(value, dt.date) and not isinstance(value, dt.datetime)


def _normalised(column: str, values: list[Any], low: Any, high: Any, *, bounded: bool, listed: bool) -> list[str]:
    """The same conjuncts through the query log's normaliser: any key type, any column name."""
    conjuncts = [_compare(exp.GTE, column, low), _compare(exp.LTE, column, high)] if bounded else []
    if listed:
        conjuncts.append(_in_list(column, values))
    return [t for c in conjuncts for t in canonical_conjuncts(c)]


def _compare(kind: type[exp.Expr], column: str, value: Any) -> exp.Expr:
    return kind(this=exp.column(column), expression=exp.convert(value))


def _in_list(column: str, values: list[Any]) -> exp.Expr:
    if len(values) == 1:
        return _compare(exp.EQ, column, values[0])
    return exp.In(this=exp.column(column), expressions=[exp.convert(v) for v in sorted(values)])


def _compared(kind: type[exp.Expr], target: exp.Expr, value: Any) -> exp.Expr:
    return kind(this=target.copy(), expression=exp.convert(value))


def _members(target: exp.Expr, values: list[Any], order: Callable[[Any, exp.Expr], Order]) -> exp.Expr:
    """``target IN (...)`` (``=`` for one key) in the normaliser's order: deduplicated by text (the last
    node of a text kept where its first was), then a stable sort of the Python-sorted keys, as
    `_in_list` then ``equalities_to_in`` give it."""
    unique: dict[str, tuple[Any, exp.Expr]] = {}
    for value in sorted(values):
        node = exp.convert(value)
        text = _number_text(node) if isinstance(value, Decimal) else None
        unique[text if text is not None else _plain_text(value)] = (value, node)
    ordered = [node for _, node in sorted(unique.values(), key=lambda pair: order(*pair))]
    if len(ordered) == 1:
        return exp.EQ(this=target.copy(), expression=ordered[0])
    return exp.In(this=target.copy(), expressions=ordered)


def _order_of(column: str, values: Sequence[Any]) -> Callable[[Any, exp.Expr], Order] | None:
    """The sort key of the keys when all are of one type whose canonical tree is built directly, and
    `column` is a plain identifier; None sends them through the normaliser."""
    if not PLAIN_COLUMN.fullmatch(column):
        return None
    kinds = {type(v) for v in values}
    if kinds == {int}:
        return _integer_order
    if kinds == {str}:
        return _string_order
    if kinds == {dt.date}:
        return _date_order
    if kinds == {Decimal} and all(v.is_finite() for v in values):
        return _decimal_order
    return None


def _integer_order(value: int, node: exp.Expr) -> Order:
    return (0, value, "") if value >= 0 else (2, 0, str(value))  # a negative one is a Neg: by its text


def _string_order(value: str, node: exp.Expr) -> Order:
    return (1, 0, value)


def _date_order(value: dt.date, node: exp.Expr) -> Order:
    """By text, ``CAST('<%Y-%m-%d>' AS DATE)``: the quoted part alone orders them the same (one prefix,
    and no part is a prefix of another)."""
    return (2, 0, value.strftime("%Y-%m-%d"))


def _decimal_order(value: Decimal, node: exp.Expr) -> Order:
    if isinstance(node, exp.Literal):
        return (0, Decimal(node.this), "")
    return (2, 0, _number_text(node) or "")


def _number_text(node: exp.Expr) -> str | None:
    """A number's text as rendered: its literal, ``-`` and it for a ``Neg``."""
    if isinstance(node, exp.Literal):
        return str(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return f"-{node.this.this}"
    return None


def _plain_text(value: Any) -> str:
    """A dedup key as distinct as the rendered text for integers, strings and dates (one type per list)."""
    return value if isinstance(value, str) else repr(value)
