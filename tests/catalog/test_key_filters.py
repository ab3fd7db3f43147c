"""`key_filters` builds the canonical text of a key list or range directly (`optimizer.join_key_filters`)
for integer, string, date and decimal keys: it must be byte for byte what the query log's normaliser
(``canonical_conjuncts`` of the same expression, the path it replaces) gives, since the capture and the
analysis compare these strings. No Spark."""

from __future__ import annotations

import datetime as dt
import functools
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp

from optimizer.joins import key_filters, scattered
from querylog.predicates import normalize
from querylog.predicates.normalize import canonical_conjuncts

COLUMNS = ["k", "lo_orderdate", "K_Mixed", "_x1", "ss_Item_SK2", "My Col", "a.b"]
LIMITS = [(32, 1000), (5, 40), (1, 1), (2, 0), (40, 45)]
PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def normalised(column: str, values: list[Any], low: Any, high: Any, max_in: int, max_keys: int) -> list[str]:
    """The path before the direct builder: the expression, then ``canonical_conjuncts`` of each conjunct."""

    def compare(kind: type[exp.Expr], value: Any) -> exp.Expr:
        return kind(this=exp.column(column), expression=exp.convert(value))

    def listed() -> exp.Expr:
        if len(values) == 1:
            return compare(exp.EQ, values[0])
        return exp.In(this=exp.column(column), expressions=[exp.convert(v) for v in sorted(values)])

    if len(values) > max_in:
        conjuncts = [compare(exp.GTE, low), compare(exp.LTE, high)]
        if len(values) <= max_keys and scattered(values, low, high):
            conjuncts.append(listed())
    else:
        conjuncts = [listed()]
    return [t for c in conjuncts for t in canonical_conjuncts(c)]


integers = st.one_of(
    st.integers(-1000, 1000),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(10**30), 10**30),
)
strings = st.text(alphabet=st.one_of(st.sampled_from("'\\\"%_ aZ\n\t`"), st.characters()), max_size=8)


def decimals(size: tuple[int, int]) -> st.SearchStrategy[list[Decimal]]:
    """Keys of one decimal column (one scale), or of any scales (``1.1`` and ``1.10`` both)."""
    low, high = size
    return st.one_of(
        st.integers(0, 4).flatmap(
            lambda places: st.lists(
                st.decimals(-(10**6), 10**6, places=places, allow_nan=False, allow_infinity=False),
                min_size=low,
                max_size=high,
                unique=True,
            )
        ),
        st.lists(st.decimals(allow_nan=False, allow_infinity=False), min_size=low, max_size=high, unique_by=str),
    )


def contiguous(size: tuple[int, int]) -> st.SearchStrategy[list[Any]]:
    """Keys with no gap (not scattered): consecutive integers or days."""
    count = st.integers(*size)
    return st.one_of(
        st.tuples(st.integers(-(2**40), 2**40), count).map(lambda s: list(range(s[0], s[0] + s[1]))),
        st.tuples(st.dates(max_value=dt.date(9000, 1, 1)), count).map(
            lambda s: [s[0] + dt.timedelta(days=n) for n in range(s[1])]
        ),
    )


@st.composite
def keys(draw: st.DrawFn) -> list[Any]:
    """Distinct keys of one type: one key, a short list, or more than 32 (a range, and a key set when
    scattered), scattered over their span or contiguous."""
    return draw(of_size(draw(st.sampled_from([(1, 1), (2, 32), (33, 90)]))))


@functools.cache  # built once per size: a strategy built in a draw is built and validated on every draw
def of_size(size: tuple[int, int]) -> st.SearchStrategy[list[Any]]:
    """Distinct keys of one type, between the two counts of `size`."""
    low, high = size
    return st.one_of(
        st.lists(integers, min_size=low, max_size=high, unique=True),
        st.lists(strings, min_size=low, max_size=high, unique=True),
        st.lists(st.dates(), min_size=low, max_size=high, unique=True),
        decimals(size),
        contiguous(size),
        st.lists(st.floats(allow_nan=False), min_size=low, max_size=high, unique=True),  # normalised
        st.lists(st.datetimes(), min_size=low, max_size=high, unique=True),  # normalised
    )


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, list[Any], Any, Any, int, int]:
    values = draw(keys())
    low = min(values)
    high = max(values)
    if draw(st.booleans()) and isinstance(low, int):  # a truncated list: bounds from keys not listed
        low -= draw(st.integers(0, 10**6))
        high += draw(st.integers(0, 10**6))
    max_in, max_keys = draw(st.sampled_from(LIMITS))
    return draw(st.sampled_from(COLUMNS)), draw(st.permutations(values)), low, high, max_in, max_keys


@PROPERTY
@given(cases())
def test_the_direct_text_is_the_normalisers_byte_for_byte(case):  # type: ignore[no-untyped-def]
    column, values, low, high, max_in, max_keys = case
    assert key_filters(column, values, low, high, max_in=max_in, max_keys=max_keys) == normalised(*case)


@pytest.mark.parametrize(
    "values",
    [
        list(range(-500, 1500, 2)),
        [f"brand#{i}'s \\ é" for i in range(1000)],
        [dt.date(1992, 1, 1) + dt.timedelta(days=3 * n) for n in range(900)],
        [Decimal(n).scaleb(-2) for n in range(-300, 700)],
        [7],
    ],
    ids=["integers", "strings", "dates", "decimals", "one key"],
)
def test_integer_string_date_and_decimal_keys_skip_the_normaliser(values, monkeypatch):
    """The point of the direct builder: a list of up to 1000 keys of these types costs no normaliser pass
    (milliseconds each, hundreds per import). Other types still take it."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("normalize_conjuncts was called")

    expected = key_filters("k", values, min(values), max(values), max_in=32, max_keys=1000)
    monkeypatch.setattr(normalize, "normalize_conjuncts", refuse)
    assert key_filters("k", values, min(values), max(values), max_in=32, max_keys=1000) == expected
    with pytest.raises(AssertionError, match="normalize_conjuncts"):
        key_filters("k", [0.5, 2.5], 0.5, 2.5, max_in=32, max_keys=1000)


def test_timestamp_keys_derive_nothing_whatever_the_zones():
    """A collected timestamp is a wall clock in this process's zone, its literal read in the session's:
    when the two differ a derived list would miss keys, so timestamp keys are refused from the schema."""
    from pyspark.sql.types import LongType, TimestampNTZType, TimestampType

    from optimizer.join_key_filters import key_type_problem

    assert key_type_problem("k", LongType()) is None
    assert "timestamp" in (key_type_problem("k", TimestampType()) or "")
    assert "timestamp_ntz" in (key_type_problem("k", TimestampNTZType()) or "")
