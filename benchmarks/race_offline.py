"""Issue 48's race, offline: the layouts emulated in numpy over one TPC-H lineitem table, in a minute.

    python -m benchmarks race-offline [--scale 0.3] [--files 310] [--row-groups 4] [--service-row-groups N]

The flow benchmark (`benchmarks.flow_bench`) races the real writers (Delta's ``OPTIMIZE ZORDER BY``, Delta's
liquid clustering, the service) on a live stream of appends and takes about an hour at ~300 files. This
proxy answers the question a layout change needs first, in about a minute: at the same granularity, how
far is each layout from what min/max statistics could give? It lays the whole table out at once (no
appends, no incremental OPTIMIZE) and emulates each writer's row order:

* **zorder**: Delta's ``OPTIMIZE ZORDER BY`` on the expert's four columns (`delta_peers.expert_columns`):
  range ids over 1,000 quantile ranges per column (``rangeId.max``), bits interleaved round-robin;
* **hilbert**: Delta's liquid clustering on the same keys: a Hilbert curve over the same range ids, 10
  bits per key (Delta's ``MultiDimClustering``: highest bit of 1,000, plus one);
* **service**: deltaopt's cut tree grown as the estimate grows it (`workload_cuts.tree_of`, on a
  100,000-row sample and the stream's training queries), rows ordered by (leaf, Z-order over range ids
  of `--z`, the features the flow's service chose on every tick), files never mixing file-level leaves.

Files hold equal rows (the service's: as many as their file-level leaf's share), each cut into row
groups of equal rows. A unit (row group) is kept for a held-out scan when its min and max of every
column the scan compares with a literal (`workload_cuts.comparisons`) may satisfy the comparison; per
scan, kept rows over the rows those comparisons select (the bound), summarised as the flow summarises
them (geometric mean and p90 over scans with a bound above zero; kept over bound in all). Rows stand for
bytes: the real race weighs column bytes, which this proxy does not write.
"""

from __future__ import annotations

import argparse
import bisect
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks.common import table, write_report
from benchmarks.delta_peers import expert_columns
from benchmarks.flow_bench import held_out, stream
from benchmarks.kept_share import kept_over_bound as kept_over_bound_of
from optimizer import tpch
from optimizer.clustering.curves import curve_ids, hilbert_ids, interleave_ids
from optimizer.clustering.cut_growth import Comparison
from optimizer.clustering.cuts import leaf_ids
from optimizer.clustering.zorder import Dimension, quantile_boundaries, range_ids, ranges_for
from optimizer.estimate.replay import Query
from optimizer.estimate.workload_cuts import MAX_ROWS, arrow_family, comparisons, tree_of
from optimizer.skipping.pruning import prepare
from querylog.predicates.attribute import scan_filters

COLUMNS = (
    "l_shipdate", "l_commitdate", "l_receiptdate", "l_extendedprice", "l_quantity", "l_discount", "l_tax",
    "l_shipmode", "l_returnflag", "l_linestatus", "l_shipinstruct",
)  # fmt: skip
DELTA_RANGES, DELTA_BITS = 1000, 10  # Delta's rangeId.max and the bits its Hilbert curve gives each key
TRAIN = 240  # training queries: about the flow's workload window at its rate
ARRIVAL = "l_shipdate"  # the flow appends lineitem in batches ordered by it
SHUFFLE_SEED = 11


@dataclass(frozen=True)
class Coded:
    """The table's columns as ranks among their sorted distinct values: a comparison with a literal is
    a comparison of ranks, and a unit's min and max are two integer reductions."""

    rows: int
    distinct: Mapping[str, list[Any]]
    ranks: Mapping[str, np.ndarray]

    @classmethod
    def of(cls, data: pa.Table) -> Coded:
        distinct, ranks = {}, {}
        for name in data.column_names:
            column = data.column(name).combine_chunks()
            values = pc.take(pc.unique(column), pc.sort_indices(pc.unique(column)))
            distinct[name] = values.to_pylist()
            ranks[name] = pc.index_in(column, value_set=values).to_numpy().astype(np.int64)
        return cls(data.num_rows, distinct, ranks)

    def may_hold(self, comparison: Comparison, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        """Units whose min rank `low` and max rank `high` of the column may satisfy `comparison` (a row:
        low = high = its rank), as a min/max reader decides."""
        values = self.distinct[comparison.column]
        out = np.zeros(low.shape, dtype=bool)
        for value in comparison.values:
            below = bisect.bisect_left(values, value)
            through = bisect.bisect_right(values, value)
            out |= {
                "<": low < below,
                "<=": low < through,
                ">": high >= through,
                ">=": high >= below,
                "=": (low < through) & (high >= below),  # some value of the unit may equal it
                "in": (low < through) & (high >= below),
            }[comparison.op]
        return out


@dataclass(frozen=True)
class Layout:
    """A row order and the file each position falls in."""

    name: str
    order: np.ndarray
    files: np.ndarray


def units(layout: Layout, row_groups: int, file_rows: float) -> np.ndarray:
    """Where each row group starts, in layout order: every file cut into about `row_groups` x its rows
    over `file_rows` row groups of equal rows."""
    files = layout.files
    starts = np.flatnonzero(np.r_[True, files[1:] != files[:-1]])
    ends = np.r_[starts[1:], len(files)]
    cuts = []
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        groups = max(1, round(row_groups * (end - start) / file_rows))
        cuts.extend(start + ((end - start) * np.arange(groups)) // groups)
    return np.unique(np.array(cuts, dtype=np.int64))


def kept_over_bound(
    coded: Coded, layout: Layout, starts: np.ndarray, scans: Sequence[tuple[Comparison, ...]], bounds: Sequence[int]
) -> np.ndarray:
    """Per scan, the rows of the units a min/max reader keeps over its bound."""
    sizes = np.diff(np.r_[starts, coded.rows])
    low = {c: np.minimum.reduceat(r[layout.order], starts) for c, r in coded.ranks.items()}
    high = {c: np.maximum.reduceat(r[layout.order], starts) for c, r in coded.ranks.items()}
    ratios = []
    for scan, bound in zip(scans, bounds, strict=True):
        kept = np.ones(len(starts), dtype=bool)
        for comparison in scan:
            kept &= coded.may_hold(comparison, low[comparison.column], high[comparison.column])
        ratios.append(sizes[kept].sum() / bound)
    return np.array(ratios)


def equal_files(order: np.ndarray, files: int) -> np.ndarray:
    return (np.arange(len(order)) * files) // len(order)


def delta_layouts(coded: Coded, keys: Sequence[str], files: int, *, within: str) -> list[Layout]:
    """Delta's ZORDER BY and liquid clustering (Hilbert) on `keys`, over 1,000 ranges a key (ids from 0, the
    first key's bit the most significant of each round, as ``interleave_bits``). Delta range-partitions rows
    by the curve into files and sorts a file's rows by it only with ``mdc.sortWithinFiles`` (`within`
    "sorted"; off by default): otherwise a file holds runs of rows from the tasks that read its input, in
    no fixed order, emulated two ways that bound it: "arrival", `l_shipdate`'s order (the flow appends
    date-ordered batches: the most favourable for Delta's row groups), and "shuffled" (the least)."""
    ids = [
        range_ids(coded.ranks[k].tolist(), quantile_boundaries(coded.ranks[k].tolist(), DELTA_RANGES)) - 1 for k in keys
    ]
    bits = [DELTA_BITS] * len(keys)
    position = np.empty(coded.rows, dtype=np.int64)
    if within == "arrival":
        position[np.argsort(coded.ranks[ARRIVAL], kind="stable")] = np.arange(coded.rows)
    else:
        position[:] = np.random.default_rng(SHUFFLE_SEED).permutation(coded.rows)
    out = []
    for name, key in (("zorder", interleave_ids(ids[::-1], bits)), ("hilbert", hilbert_ids(ids, bits))):
        order = np.argsort(key, kind="stable")
        in_file = equal_files(order, files)
        if within != "sorted":  # the same files, each one's rows in the other order
            file_of_row = np.empty(coded.rows, dtype=np.int64)
            file_of_row[order] = in_file
            order = np.lexsort((position, file_of_row))
            in_file = file_of_row[order]
        out.append(Layout(name, order, in_file))
    return out


def service_layout(
    coded: Coded, values: Mapping[str, list[Any]], kinds: Mapping[str, str], train: Sequence[Query], args: Any
) -> tuple[Layout, Any]:
    """deltaopt's layout: the workload's cut tree, then Z-order over `args.z` within each leaf."""
    step = max(1, -(-coded.rows // MAX_ROWS))
    sample = {c: v[::step] for c, v in values.items()}
    tree = tree_of(sample, kinds, train, args.files, args.service_row_groups)
    leaf = leaf_ids(tree, values, coded.rows) if tree is not None else np.zeros(coded.rows, dtype=np.int64)
    z = args.z.split(",")
    ranges = ranges_for(args.files, len(z))
    dimensions = [Dimension(c, quantile_boundaries(sample[c], ranges)) for c in z]
    ids = [range_ids(values[d.column], d.boundaries) for d in dimensions]
    key = curve_ids(args.curve, ids, [d.bits for d in dimensions])
    order = np.lexsort((key, leaf))
    file_leaf = (leaf_ids(tree.file_level(), values, coded.rows) if tree is not None else leaf)[order]
    file_rows = coded.rows / args.files
    files = np.empty(coded.rows, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, file_leaf[1:] != file_leaf[:-1]])
    made = 0
    for start, end in zip(starts.tolist(), np.r_[starts[1:], coded.rows].tolist(), strict=True):
        count = max(1, round((end - start) / file_rows))
        files[start:end] = made + (np.arange(end - start) * count) // (end - start)
        made += count
    return Layout("service", order, files), tree


def _queries(sqls: Sequence[str]) -> list[Query]:
    out = []
    for sql in sqls:
        (scan,) = scan_filters(sql).scans
        if scan.filters:
            out.append(Query(prepare(" AND ".join(f"({f})" for f in scan.filters)), frozenset(scan.columns), 1.0))
    return out


def load(scale: float) -> pa.Table:
    with tempfile.TemporaryDirectory(prefix="deltaopt-race-offline-") as work:
        (path,) = tpch.generate("lineitem", scale, Path(work))
        data = pq.read_table(path, columns=list(COLUMNS))
    return data.cast(
        pa.schema([pa.field(f.name, pa.string() if pa.types.is_string_view(f.type) else f.type) for f in data.schema])
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    data = load(args.scale)
    kinds = {f.name: k for f in data.schema if (k := arrow_family(f.type))}
    coded = Coded.of(data)
    values = {c: data.column(c).to_pylist() for c in kinds}
    held = [
        comparisons(Query(prepare(where), frozenset(columns), 1.0), kinds) for where, columns in held_out(True) if where
    ]
    bounds = []
    for scan in held:
        match = np.ones(coded.rows, dtype=bool)
        for comparison in scan:
            match &= coded.may_hold(comparison, coded.ranks[comparison.column], coded.ranks[comparison.column])
        bounds.append(int(match.sum()))
    scans = [s for s, b in zip(held, bounds, strict=True) if s and b]
    bounds = [b for s, b in zip(held, bounds, strict=True) if s and b]
    keys = expert_columns((scan.filters for sql in stream(400, 7, True) for scan in scan_filters(sql).scans), 4)
    service, tree = service_layout(coded, values, kinds, _queries(stream(TRAIN, 123, True)), args)
    file_rows = coded.rows / args.files
    results: dict[str, Any] = {}
    for layout in [*delta_layouts(coded, keys, args.files, within=args.delta_file_order), service]:
        groups = args.service_row_groups if layout.name == "service" else args.row_groups
        starts = units(layout, groups, file_rows)
        ratios = kept_over_bound(coded, layout, starts, scans, bounds)
        results[layout.name] = {"files": int(layout.files.max()) + 1, "row_groups": len(starts), "ratios": ratios}
    return {
        "keys": keys,
        "results": results,
        "bounds": bounds,
        "scans": scans,
        "tree": tree,
        "seconds": time.perf_counter() - started,
    }


def summary(ratios: np.ndarray, bounds: Sequence[int]) -> tuple[float, float, float]:
    """Geometric mean and p90 of kept over bound as the flow summarises them (`kept_share.kept_over_bound`),
    and rows kept over rows selected in all."""
    kept = [(float(r * b), 1.0) for r, b in zip(ratios, bounds, strict=True)]
    figures = kept_over_bound_of(kept, [float(b) for b in bounds])
    return figures.geometric_mean, figures.p90, float((ratios * np.array(bounds)).sum() / sum(bounds))


def render(run_: dict[str, Any], args: argparse.Namespace) -> str:
    results, bounds = run_["results"], run_["bounds"]
    figures = {name: summary(r["ratios"], bounds) for name, r in results.items()}
    best = [min(figures[n][i] for n in ("zorder", "hilbert")) for i in range(2)]  # each figure's better
    rows = [
        (
            name,
            str(r["files"]),
            str(r["row_groups"]),
            f"{figures[name][0]:.2f}",
            f"{figures[name][1]:.2f}",
            f"{figures[name][2]:.2f}",
        )
        for name, r in results.items()
    ]
    service = figures["service"]
    tree = run_["tree"]
    columns = {}
    for cut in tree.cuts() if tree is not None else ():
        columns[cut.column] = columns.get(cut.column, 0) + 1
    return (
        f"TPC-H lineitem SF{args.scale} ({len(bounds)} held-out scans of the flow's stream with min/max-testable "
        f"comparisons), {args.files} files of {args.row_groups} row groups for Delta's layouts, "
        f"{args.service_row_groups} for the service's. Delta's keys: {', '.join(run_['keys'])}; the service's curve: "
        f"{args.curve} over {args.z}; its tree: {tree.leaves if tree is not None else 0} leaves, cuts by column "
        f"{columns}. "
        f"Run time {run_['seconds']:.0f} s.\n\n"
        + table(("layout", "files", "row groups", "kept / bound: geometric mean", "p90", "kept / bound in all"), rows)
        + "\n\nThe service against the better of Delta's two, figure by figure: geometric mean "
        f"{service[0] / best[0]:.2f}x, p90 {service[1] / best[1]:.2f}x "
        "(issue 48 asks 0.7x and 0.5x of the flow's figures).\n"
    )


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks race-offline")
    parser.add_argument("--scale", type=float, default=0.3)
    parser.add_argument("--files", type=int, default=310, help="files in the table (the flow's ~300-file run)")
    parser.add_argument("--row-groups", type=int, default=4, help="row groups per file, Delta's layouts")
    parser.add_argument("--service-row-groups", type=int, default=None, help="the service's (default: --row-groups)")
    parser.add_argument("--z", default="l_shipdate,l_extendedprice", help="the service's curve columns")
    parser.add_argument("--curve", choices=("z", "hilbert"), default="z", help="the service's curve")
    parser.add_argument(
        "--delta-file-order",
        choices=("arrival", "shuffled", "sorted"),
        default="arrival",
        help="a Delta file's rows: arrival order, shuffled, or sorted (mdc.sortWithinFiles)",
    )
    args = parser.parse_args(argv)
    args.service_row_groups = args.service_row_groups or args.row_groups
    body = render(run(args), args)
    print(body)
    suffix = "" if args.service_row_groups == args.row_groups else f"-service{args.service_row_groups}"
    suffix += ("-hilbert" if args.curve == "hilbert" else "") + (
        f"-delta-{args.delta_file_order}" if args.delta_file_order != "arrival" else ""
    )
    command = (
        f"python -m benchmarks race-offline --scale {args.scale} --files {args.files} --row-groups {args.row_groups}"
    )
    command += f" --service-row-groups {args.service_row_groups} --z {args.z} --curve {args.curve}"
    command += f" --delta-file-order {args.delta_file_order}"
    write_report(
        f"race-offline{suffix}", "Issue 48's race, offline: layouts emulated over one lineitem table", body, command
    )
