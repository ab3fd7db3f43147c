"""TPC-H data for the demo, tests and benchmarks, generated offline by ``tpchgen-cli``.

Generating lineitem in parts (``--parts N --part k``) gives natural increments of "new data arriving"
for the service: each part is a disjoint slice of the same table.
"""

from __future__ import annotations

import datetime as dt
import random
import shutil
import subprocess
import sys
from pathlib import Path

from optimizer.errors import DeltaOptError


def tpchgen_binary() -> str:
    """The tpchgen-cli executable: on PATH or next to this interpreter (a venv's bin/)."""
    found = shutil.which("tpchgen-cli") or shutil.which("tpchgen-cli", path=str(Path(sys.executable).parent))
    if not found:
        raise DeltaOptError("tpchgen-cli is not installed: pip install 'deltaopt[demo]'")
    return found


def generate(table: str, scale: float, out_dir: Path, parts: int = 1, part: int | None = None) -> list[Path]:
    """Write TPC-H `table` as Parquet under `out_dir`; returns the files written (one per part)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    command = [tpchgen_binary(), "parquet", "-s", str(scale), "-o", str(out_dir), "--tables", table]
    if parts > 1:
        command += ["--parts", str(parts)]
        if part is not None:
            command += ["--part", str(part)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise DeltaOptError(f"tpchgen-cli failed ({result.returncode}): {result.stderr.strip()[-500:]}")
    if parts > 1:
        return sorted((out_dir / table).glob(f"{table}.*.parquet"))
    return [out_dir / f"{table}.parquet"]


# ---- a lineitem workload ---------------------------------------------------------------------------
# Range filters whose literals change from query to query (Z-order material) mixed with a few fixed,
# complex predicates that recur verbatim (SOP material), as in the thesis's evaluation workloads.

FIXED_PREDICATES: tuple[tuple[str, float], ...] = (
    ("l_shipmode IN ('MAIL', 'SHIP')", 0.30),
    ("month(l_shipdate) = 12", 0.20),
    ("l_returnflag = 'R' AND l_linestatus = 'F'", 0.20),
    ("l_comment LIKE '%furiously%'", 0.12),
    ("l_shipinstruct = 'DELIVER IN PERSON'", 0.10),
)
# Twelve recurring predicates over lineitem, for experiments that vary the number of SOP features.
LINEITEM_SOP_FEATURES: tuple[str, ...] = (
    "l_shipmode IN ('MAIL', 'SHIP')",
    "l_returnflag = 'R'",
    "l_linestatus = 'F'",
    "l_comment LIKE '%furiously%'",
    "l_shipinstruct = 'DELIVER IN PERSON'",
    "MONTH(l_shipdate) = 12",
    "l_discount > 0.08",
    "l_tax = 0",
    "l_comment LIKE '%ironic%'",
    "l_shipmode = 'RAIL'",
    "NOT l_shipmode IN ('AIR', 'REG AIR')",
    "DAYOFWEEK(l_receiptdate) = 1",
)
READ_COLUMNS = ("l_orderkey", "l_extendedprice", "l_discount", "l_quantity", "l_tax", "l_partkey")


def _range_predicate(rng: random.Random) -> str:
    kind = rng.choices(("shipdate", "price", "quantity", "receipt"), weights=(0.45, 0.25, 0.15, 0.15))[0]
    if kind == "shipdate":
        start = dt.date(1992, 1, 2) + dt.timedelta(days=rng.randrange(0, 2500))
        end = start + dt.timedelta(days=rng.choice((7, 30, 90)))
        return f"l_shipdate >= DATE '{start}' AND l_shipdate < DATE '{end}'"
    if kind == "price":
        low = rng.randrange(1000, 100000, 500)
        return f"l_extendedprice BETWEEN {low} AND {low + rng.choice((1000, 5000))}"
    if kind == "quantity":
        return f"l_quantity {rng.choice(('<', '>'))} {rng.randrange(2, 49)}"
    start = dt.date(1992, 2, 1) + dt.timedelta(days=rng.randrange(0, 2500))
    return f"l_receiptdate BETWEEN DATE '{start}' AND DATE '{start + dt.timedelta(days=30)}'"


def lineitem_queries(count: int, seed: int = 7, table: str = "lineitem") -> list[str]:
    """`count` SQL queries over lineitem: one range filter each, plus fixed predicates at their rates."""
    rng = random.Random(seed)
    queries = []
    for _ in range(count):
        conjuncts = [_range_predicate(rng)] if rng.random() < 0.85 else []
        conjuncts += [text for text, rate in FIXED_PREDICATES if rng.random() < rate]
        if not conjuncts:
            conjuncts = [_range_predicate(rng)]
        columns = ", ".join(rng.sample(READ_COLUMNS, rng.randrange(1, 4)))
        queries.append(f"SELECT {columns} FROM {table} WHERE {' AND '.join(conjuncts)}")
    return queries
