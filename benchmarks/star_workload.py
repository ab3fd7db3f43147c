"""The star benchmarks' schema and workload (`benchmarks.star_bench`, `benchmarks.star_flow`): TPC-H
``lineitem`` as the fact table with ``part`` and ``supplier`` as its dimensions, and six query families
whose literals change from query to query, popular values more often (`SKEW`): a part brand, a part
container, a supplier nation (dimension filters whose keys are scattered over the key domain), a ship
month (a direct range), a brand within a month, and a part type (more keys than a key set may list)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import write_deltalake

from benchmarks.replay_data import _plain
from optimizer import tpch

APPENDS = 4
SIZES = ("SM", "MED", "LG", "JUMBO", "WRAP")
CONTAINERS = ("CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM")
METALS = ("TIN", "NICKEL", "BRASS", "STEEL", "COPPER")
SKEW = 1.2
PART = "lineitem JOIN part ON l_partkey = p_partkey"
SUPPLIER = "lineitem JOIN supplier ON l_suppkey = s_suppkey"


def popular(rng: random.Random, values: list[Any]) -> Any:
    """One of `values`, the earlier ones more often (weights 1/rank^`SKEW`): dashboards and reports
    repeat popular dimension values, and a SOP feature needs a filter that recurs."""
    return rng.choices(values, weights=[1 / (rank + 1) ** SKEW for rank in range(len(values))])[0]


BRANDS = [f"Brand#{m}{n}" for m in range(1, 6) for n in range(1, 6)]
random.Random(5).shuffle(BRANDS)
CONTAINER_NAMES = [f"{size} {kind}" for size in SIZES for kind in CONTAINERS]
random.Random(6).shuffle(CONTAINER_NAMES)
NATIONS = random.Random(7).sample(range(25), 25)


def _brand(rng: random.Random) -> str:
    return f"p_brand = '{popular(rng, BRANDS)}'"


def _month(rng: random.Random) -> str:
    year = rng.randint(1992, 1998)
    month = rng.randint(1, 12)
    end = f"{year + month // 12}-{month % 12 + 1:02d}-01"
    return f"l_shipdate >= DATE '{year}-{month:02d}-01' AND l_shipdate < DATE '{end}'"


FAMILIES = {
    "part brand": lambda r: f"SELECT SUM(l_extendedprice) FROM {PART} WHERE {_brand(r)}",
    "part container": lambda r: (
        f"SELECT SUM(l_quantity) FROM {PART} WHERE p_container = '{popular(r, CONTAINER_NAMES)}'"
    ),
    "supplier nation": lambda r: (
        f"SELECT SUM(l_extendedprice) FROM {SUPPLIER} WHERE s_nationkey = {popular(r, NATIONS)}"
    ),
    "ship month": lambda r: f"SELECT SUM(l_extendedprice) FROM lineitem WHERE {_month(r)}",
    "brand in a month": lambda r: f"SELECT SUM(l_discount) FROM {PART} WHERE {_brand(r)} AND {_month(r)}",
    "part type": lambda r: f"SELECT SUM(l_quantity) FROM {PART} WHERE p_type LIKE '%{popular(r, list(METALS))}'",
}


def generate(warehouse: Path, scale: float) -> None:
    """lineitem (in `APPENDS` appends, as generated), part and supplier as Delta tables."""
    raw = warehouse.parent / "tpch"
    for name in ("part", "supplier"):
        (path,) = tpch.generate(name, scale, raw)
        write_deltalake(str(warehouse / name), _plain(pq.read_table(path)))
    paths = tpch.generate("lineitem", scale, raw)
    lineitem = _plain(pa.concat_tables([pq.read_table(p) for p in paths]))
    step = -(-lineitem.num_rows // APPENDS)
    for start in range(0, lineitem.num_rows, step):
        write_deltalake(str(warehouse / "lineitem"), lineitem.slice(start, step), mode="append")


def workload(count: int, seed: int = 29, families: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(family, SQL) pairs, the `families` (default: all) interleaved at random."""
    rng = random.Random(seed)
    names = list(families or FAMILIES)
    return [(family, FAMILIES[family](rng)) for family in (rng.choice(names) for _ in range(count))]
