"""The star-import benchmark's data and statements (`benchmarks.star_import`).

The warehouse is the issue-49 star schema at TPC-H scale: a fact ``lineorder`` (TPC-H ``lineitem``
joined with ``orders``: 6,001,215 rows at scale 1, sorted by order date as a fact grows, a few hundred
files) and four dimensions: ``part`` (200k rows at scale 1), ``supplier`` (10k), ``customer`` (150k)
and ``d_date`` (2,557 days, 1992-1998, keyed by ``yyyymmdd`` integers as star schemas key dates).
Everything is generated before Spark starts: the join and sort take memory a Spark driver also wants.

The statements come in families of the usual star shapes; each is built with sqlglot from the same
dimension conditions its `Joined` specs record, so the independent evaluation (DuckDB) reads the
benchmark's own description of each join, never the statement parsed back.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import write_deltalake
from sqlglot import exp

from benchmarks.replay_data import _plain
from benchmarks.star_workload import popular
from optimizer import tpch

FACT = "lineorder"
DIMENSIONS = ("d_date", "part", "supplier", "customer")
FACT_FILES = 456  # the fact at scale 1: 6,001,215 rows in 456 files
CALIBRATION = 8  # files of rows the target file size is calibrated on
MARKER = "star-import.json"  # the warehouse's scale, so `--warehouse` reuses only a matching one
FIRST_DAY = dt.date(1992, 1, 1)
LAST_DAY = dt.date(1998, 12, 31)
LINEITEM_COLUMNS = ["l_orderkey", "l_partkey", "l_suppkey", "l_quantity", "l_extendedprice", "l_discount"]
ORDERS_COLUMNS = ["o_orderkey", "o_custkey", "o_orderdate"]


@dataclass(frozen=True)
class Joined:
    """One dimension a statement joins: the fact's column, the dimension's key and the dimension's own
    condition (Spark SQL; None when the statement does not filter it)."""

    dimension: str
    fact_column: str
    key: str
    where: str | None


@dataclass(frozen=True)
class Drawn:
    """One statement of the stream, with what it joins."""

    family: str
    sql: str
    joined: tuple[Joined, ...]


# ---- the warehouse ---------------------------------------------------------------------------------


def warehouse_ready(warehouse: Path, scale: float) -> bool:
    """Whether `warehouse` already holds the tables at `scale` (`--warehouse` reuses it); a warehouse
    of another scale is refused rather than silently measured."""
    marker = warehouse / MARKER
    if not marker.exists():
        return False
    found = json.loads(marker.read_text()).get("scale")
    if found != scale:
        raise ValueError(f"{warehouse} holds a star-import warehouse at scale {found}, not {scale}")
    return True


def generate(warehouse: Path, scale: float, raw: Path) -> dict[str, int]:
    """The fact and the four dimensions as Delta tables under `warehouse` (TPC-H Parquet under `raw`);
    each table's file count."""
    files = {}
    for name in ("part", "supplier", "customer"):
        (path,) = tpch.generate(name, scale, raw)
        files[name] = _write(warehouse / name, _plain(pq.read_table(path)))
    files["d_date"] = _write(warehouse / "d_date", date_dimension())
    fact = lineorder(scale, raw)
    wanted = max(4, round(FACT_FILES * scale))
    files[FACT] = _write(warehouse / FACT, fact, target_file_size=_file_size(fact, wanted))
    (warehouse / MARKER).write_text(json.dumps({"scale": scale, "files": files}))
    return files


def _write(path: Path, data: pa.Table, target_file_size: int | None = None) -> int:
    write_deltalake(str(path), data, target_file_size=target_file_size)
    return sum(1 for _ in path.glob("*.parquet"))


def _file_size(fact: pa.Table, files: int) -> int:
    """The target file size that splits `fact` into about `files` files: calibrated on a slice of
    `CALIBRATION` files' rows, because delta-rs compares the target with its writer's estimate of the
    file in progress, not with the Parquet size (files come out roughly inversely to the target)."""
    rows = -(-fact.num_rows // files)
    sample = fact.slice(fact.num_rows // 2, CALIBRATION * rows)
    wanted = max(1, sample.num_rows // rows)
    target = 1 << 20
    for _ in range(3):
        with tempfile.TemporaryDirectory(prefix="deltaopt-calibrate-") as scratch:
            written = _write(Path(scratch) / "t", sample, target_file_size=target)
        if written == wanted:
            break
        target = max(1024, target * written // wanted)
    return target


def date_dimension() -> pa.Table:
    """``d_date``: one row per day of 1992-1998, keyed ``yyyymmdd``, with year, month, ``yyyymm`` and
    week in year (days 1-7 week 1, as SSB numbers them)."""
    days = [FIRST_DAY + dt.timedelta(days=n) for n in range((LAST_DAY - FIRST_DAY).days + 1)]
    return pa.table(
        {
            "d_datekey": pa.array([_datekey(d) for d in days], pa.int32()),
            "d_year": pa.array([d.year for d in days], pa.int32()),
            "d_month": pa.array([d.month for d in days], pa.int32()),
            "d_yearmonthnum": pa.array([d.year * 100 + d.month for d in days], pa.int32()),
            "d_weeknuminyear": pa.array([(d.timetuple().tm_yday - 1) // 7 + 1 for d in days], pa.int32()),
        }
    )


def _datekey(day: dt.date) -> int:
    return day.year * 10000 + day.month * 100 + day.day


def lineorder(scale: float, raw: Path) -> pa.Table:
    """TPC-H ``lineitem`` joined with ``orders`` (customer and order date), date keys ``yyyymmdd``,
    revenue = price x (1 - discount); sorted by order date and order."""
    paths = tpch.generate("lineitem", scale, raw)
    items = pa.concat_tables([pq.read_table(p, columns=LINEITEM_COLUMNS) for p in paths])
    (orders_path,) = tpch.generate("orders", scale, raw)
    orders = pq.read_table(orders_path, columns=ORDERS_COLUMNS)
    joined = items.join(orders, keys="l_orderkey", right_keys="o_orderkey", join_type="inner")
    date = joined.column("o_orderdate")
    datekey = pc.add(pc.add(pc.multiply(pc.year(date), 10000), pc.multiply(pc.month(date), 100)), pc.day(date))
    price = pc.cast(joined.column("l_extendedprice"), pa.float64())
    kept = pc.subtract(1.0, pc.cast(joined.column("l_discount"), pa.float64()))
    revenue = pc.cast(pc.round(pc.multiply(price, kept), 2), pa.decimal128(15, 2))
    fact = pa.table(
        {
            "lo_orderkey": joined.column("l_orderkey"),
            "lo_partkey": joined.column("l_partkey"),
            "lo_suppkey": joined.column("l_suppkey"),
            "lo_custkey": joined.column("o_custkey"),
            "lo_orderdate": pc.cast(datekey, pa.int32()),
            "lo_quantity": joined.column("l_quantity"),
            "lo_extendedprice": joined.column("l_extendedprice"),
            "lo_discount": joined.column("l_discount"),
            "lo_revenue": revenue,
        }
    )
    return _plain(fact.sort_by([("lo_orderdate", "ascending"), ("lo_orderkey", "ascending")]))


# ---- the statements ----------------------------------------------------------------------------------

BRANDS = [f"Brand#{m}{n}" for m in range(1, 6) for n in range(1, 6)]
random.Random(5).shuffle(BRANDS)
METALS = ["BRASS", "COPPER", "NICKEL", "STEEL", "TIN"]
SEGMENTS = ["BUILDING", "AUTOMOBILE", "MACHINERY", "HOUSEHOLD", "FURNITURE"]
REGIONS = [[0, 5, 14, 15, 16], [1, 2, 3, 17, 24], [8, 9, 12, 18, 21], [6, 7, 19, 22, 23], [4, 10, 11, 13, 20]]
NATIONS = random.Random(7).sample(range(25), 25)
YEARS = list(range(1992, 1999))
DATE = ("d_date", "lo_orderdate", "d_datekey")
PART = ("part", "lo_partkey", "p_partkey")
SUPPLIER = ("supplier", "lo_suppkey", "s_suppkey")
CUSTOMER = ("customer", "lo_custkey", "c_custkey")

_c = exp.column


def _statement(
    family: str, measure: exp.Expr, joins: Sequence[tuple[tuple[str, str, str], exp.Expr | None]], fact: exp.Expr | None
) -> Drawn:
    """A statement over the fact joining each (dimension, condition) of `joins` on its key, with the
    fact's own condition `fact`; its `Joined` specs are the same conditions, as Spark SQL."""
    query = exp.select(exp.func("SUM", measure).as_("measure")).from_(FACT)
    conditions = list(fact.flatten()) if isinstance(fact, exp.And) else [fact] if fact is not None else []
    specs = []
    for (dimension, fact_column, key), where in joins:
        query = query.join(dimension, on=_c(fact_column).eq(_c(key)))
        if where is not None:
            conditions.extend(where.flatten() if isinstance(where, exp.And) else [where])
        specs.append(Joined(dimension, fact_column, key, where.sql("spark") if where is not None else None))
    if conditions:
        query = query.where(exp.and_(*conditions))
    return Drawn(family, query.sql("spark"), tuple(specs))


def _date_year(rng: random.Random) -> Drawn:
    """Q1.1: a year on the date dimension, discount and quantity ranges on the fact."""
    discount = rng.randint(1, 8)
    fact = exp.and_(
        _c("lo_discount").between(exp.convert(round((discount - 1) / 100, 2)), exp.convert((discount + 1) / 100)),
        _c("lo_quantity") < rng.choice((25, 35)),
    )
    measure = _c("lo_extendedprice") * _c("lo_discount")
    return _statement("date year", measure, [(DATE, _c("d_year").eq(popular(rng, YEARS)))], fact)


def _date_week(rng: random.Random) -> Drawn:
    """Q1.3: one week of one year, the fact's quantity between bounds."""
    where = exp.and_(_c("d_weeknuminyear").eq(rng.randint(1, 52)), _c("d_year").eq(popular(rng, YEARS)))
    low = rng.randint(1, 40)
    fact = _c("lo_quantity").between(exp.convert(low), exp.convert(low + 10))
    return _statement("date week", _c("lo_revenue"), [(DATE, where)], fact)


def _brand_nation(rng: random.Random) -> Drawn:
    """Q2.1-like: a part brand and a supplier nation; the date dimension joined (grouping), unfiltered."""
    joins = [
        (DATE, None),
        (PART, _c("p_brand").eq(exp.Literal.string(popular(rng, BRANDS)))),
        (SUPPLIER, _c("s_nationkey").eq(popular(rng, NATIONS))),
    ]
    return _statement("part brand + supplier nation", _c("lo_revenue"), joins, None)


def _brand_range(rng: random.Random) -> Drawn:
    """Q2.2-like: a range of brands of one manufacturer and the suppliers of a region (an IN list)."""
    maker = rng.randint(1, 5)
    first = rng.randint(1, 4)
    brands = _c("p_brand").between(
        exp.Literal.string(f"Brand#{maker}{first}"), exp.Literal.string(f"Brand#{maker}{rng.randint(first, 5)}")
    )
    region = _c("s_nationkey").isin(*popular(rng, REGIONS))
    joins = [(DATE, None), (PART, brands), (SUPPLIER, region)]
    return _statement("brand range", _c("lo_revenue"), joins, None)


def _customer(rng: random.Random) -> Drawn:
    """Q3-like: a market segment and two or three nations (an IN list or an OR of equalities), over a
    range of years."""
    nations = sorted(rng.sample(NATIONS[:10], rng.randint(2, 3)))
    if rng.random() < 0.5:
        chosen: exp.Expr = _c("c_nationkey").isin(*nations)
    else:
        chosen = exp.paren(exp.or_(*(_c("c_nationkey").eq(n) for n in nations)))
    segment = _c("c_mktsegment").eq(exp.Literal.string(popular(rng, SEGMENTS)))
    first = rng.randint(1992, 1996)
    years = _c("d_year").between(exp.convert(first), exp.convert(first + rng.randint(0, 2)))
    joins = [(CUSTOMER, exp.and_(segment, chosen)), (DATE, years)]
    return _statement("customer segment + nations", _c("lo_revenue"), joins, None)


def _part_type(rng: random.Random) -> Drawn:
    """A part type suffix (LIKE) in one month of the date dimension."""
    kind = _c("p_type").like(exp.Literal.string(f"%{popular(rng, METALS)}"))
    month = _c("d_yearmonthnum").eq(popular(rng, YEARS) * 100 + rng.randint(1, 12))
    return _statement("part type", _c("lo_quantity"), [(PART, kind), (DATE, month)], None)


FAMILIES: dict[str, Callable[[random.Random], Drawn]] = {
    "date year": _date_year,
    "date week": _date_week,
    "part brand + supplier nation": _brand_nation,
    "brand range": _brand_range,
    "customer segment + nations": _customer,
    "part type": _part_type,
}


def workload(count: int, seed: int = 49) -> list[Drawn]:
    """`count` statements, families interleaved at random, literals drawn with skew (popular values
    recur, as dashboards repeat them)."""
    rng = random.Random(seed)
    names = list(FAMILIES)
    return [FAMILIES[rng.choice(names)](rng) for _ in range(count)]


def stratified(drawn: Sequence[Drawn], size: int) -> list[int]:
    """Positions of `size` statements of `drawn`, taken from the families in turn (each family's in
    stream order), so that every family is compared even when some are rare."""
    queues: dict[str, list[int]] = {}
    for i, statement in enumerate(drawn):
        queues.setdefault(statement.family, []).append(i)
    chosen: list[int] = []
    while len(chosen) < min(size, len(drawn)):
        for queue in queues.values():
            if queue and len(chosen) < size:
                chosen.append(queue.pop(0))
    return sorted(chosen)
