"""The replay's inputs: TPC-H ``lineitem`` and ``orders`` cut into date-ordered insert batches, and a
query stream over both tables that drifts part-way.

Batches: each table is sorted by its date (``l_shipdate``, ``o_orderdate``) and cut into equal row
counts, and the rows inside a batch are shuffled, as an ingest job that appends a period's data at a
time leaves them. Queries come from templates with changing literals, drawn with a seeded generator:

* phase 1 (before the drift): Q6-like ship-date windows with discount and quantity ranges, return
  flags within a ship-date range, order-date windows on ``orders``, and a Q3-like join;
* phase 2 (the drift): new filter families - a derived expression (``l_extendedprice * (1 -
  l_discount) > x``), receipt-date windows with a shipping instruction, order totals with a priority,
  and a ``LIKE`` on the order comment - while a share of phase 1's templates continues.
"""

from __future__ import annotations

import datetime as dt
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from optimizer import tpch

DATE_COLUMN = {"lineitem": "l_shipdate", "orders": "o_orderdate"}
# what an expert tuning delta-rs by hand would Z-order on, from the first phase's filters
EXPERT_COLUMNS = {"lineitem": ["l_shipdate", "l_discount", "l_quantity"], "orders": ["o_orderdate", "o_totalprice"]}
FIRST_DAY = dt.date(1992, 1, 1)
DAYS = 2400  # the span of TPC-H dates the templates draw from


def _plain(table: pa.Table) -> pa.Table:
    """tpchgen's string views as strings, every column nullable, no field ids: an ordinary schema."""
    fields = [pa.field(f.name, pa.string() if f.type == pa.string_view() else f.type) for f in table.schema]
    return table.cast(pa.schema(fields))


def batches(name: str, scale: float, count: int, work: Path, seed: int = 11) -> list[pa.Table]:
    """`name` at `scale` in `count` date-ordered batches, rows shuffled inside each batch."""
    paths = tpch.generate(name, scale, work / "tpch")
    table = _plain(pa.concat_tables([pq.read_table(p) for p in paths]))
    table = table.sort_by(DATE_COLUMN[name])
    rng = np.random.default_rng(seed)
    bounds = np.linspace(0, table.num_rows, count + 1).astype(int)
    out = []
    for start, end in itertools.pairwise(bounds):
        part = table.slice(int(start), int(end - start))
        out.append(part.take(pa.array(rng.permutation(part.num_rows))))
    return out


def schema_of(tables: dict[str, pa.Table]) -> dict[str, dict[str, str]]:
    """The query log's schemas (table -> column -> SQL type) so unqualified join columns resolve."""
    kinds = {pa.types.is_date: "DATE", pa.types.is_decimal: "DECIMAL", pa.types.is_integer: "BIGINT"}
    return {
        name: {f.name: next((k for test, k in kinds.items() if test(f.type)), "STRING") for f in t.schema}
        for name, t in tables.items()
    }


@dataclass(frozen=True)
class Template:
    name: str
    phase: int  # 1: from the start; 2: arrives with the drift
    render: Callable[[random.Random], str]


def _day(rng: random.Random, span: int = 0) -> dt.date:
    return FIRST_DAY + dt.timedelta(days=rng.randrange(0, DAYS - span))


def _window(rng: random.Random, days: int) -> tuple[str, str]:
    start = _day(rng, days)
    return start.isoformat(), (start + dt.timedelta(days=days)).isoformat()


def _q6(rng: random.Random) -> str:
    start, end = _window(rng, 90)
    discount = rng.randrange(2, 10) / 100
    return (
        "SELECT sum(l_extendedprice * l_discount) FROM lineitem "
        f"WHERE l_shipdate >= DATE '{start}' AND l_shipdate < DATE '{end}' "
        f"AND l_discount BETWEEN {discount - 0.01:.2f} AND {discount + 0.01:.2f} "
        f"AND l_quantity < {rng.randrange(10, 40)}"
    )


def _returns(rng: random.Random) -> str:
    start, end = _window(rng, 60)
    return (
        "SELECT l_returnflag, l_linestatus, sum(l_quantity) FROM lineitem "
        f"WHERE l_returnflag = 'R' AND l_shipdate BETWEEN DATE '{start}' AND DATE '{end}' "
        "GROUP BY l_returnflag, l_linestatus"
    )


def _orders_window(rng: random.Random) -> str:
    start, end = _window(rng, 30)
    return (
        "SELECT o_orderpriority, count(*) FROM orders "
        f"WHERE o_orderdate >= DATE '{start}' AND o_orderdate < DATE '{end}' GROUP BY o_orderpriority"
    )


def _q3(rng: random.Random) -> str:
    day = _day(rng, 30)
    return (
        "SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue, o_orderdate "
        "FROM orders JOIN lineitem ON l_orderkey = o_orderkey "
        f"WHERE o_orderdate < DATE '{day + dt.timedelta(days=20)}' AND o_orderdate >= DATE '{day}' "
        f"AND l_shipdate > DATE '{day}' GROUP BY l_orderkey, o_orderdate"
    )


def _revenue(rng: random.Random) -> str:
    low = rng.randrange(80_000, 100_000)
    return f"SELECT count(*), avg(l_quantity) FROM lineitem WHERE l_extendedprice * (1 - l_discount) > {low}"


def _receipts(rng: random.Random) -> str:
    start, end = _window(rng, 45)
    instruction = rng.choice(["DELIVER IN PERSON", "COLLECT COD", "TAKE BACK RETURN", "NONE"])
    return (
        "SELECT l_shipmode, count(*) FROM lineitem "
        f"WHERE l_receiptdate BETWEEN DATE '{start}' AND DATE '{end}' AND l_shipinstruct = '{instruction}' "
        "GROUP BY l_shipmode"
    )


def _big_orders(rng: random.Random) -> str:
    low = rng.randrange(400_000, 480_000)
    return f"SELECT o_orderkey, o_totalprice FROM orders WHERE o_totalprice > {low} AND o_orderpriority = '1-URGENT'"


def _complaints(rng: random.Random) -> str:
    word = rng.choice(["special", "pending", "unusual", "express"])
    return f"SELECT count(*) FROM orders WHERE o_comment LIKE '%{word}%requests%'"


TEMPLATES = (
    Template("q6 ship-date window", 1, _q6),
    Template("returns in a ship-date range", 1, _returns),
    Template("orders in a month", 1, _orders_window),
    Template("q3 join", 1, _q3),
    Template("revenue expression", 2, _revenue),
    Template("receipt-date window", 2, _receipts),
    Template("big urgent orders", 2, _big_orders),
    Template("order comment LIKE", 2, _complaints),
)


def queries(phase: int, count: int, rng: random.Random) -> list[tuple[str, str]]:
    """(template name, SQL) of `count` queries of `phase`: phase 1 draws phase-1 templates; phase 2
    draws the drift's templates three times as often as the earlier ones."""
    pool = [t for t in TEMPLATES if t.phase <= phase]
    weights = [3 if t.phase == 2 else 1 for t in pool] if phase == 2 else [1] * len(pool)
    chosen = rng.choices(pool, weights, k=count)
    return [(t.name, t.render(rng)) for t in chosen]
