"""The race battery's cases (`benchmarks.races`): the commit paths, the layouts a rewrite writes, which
base table each (operation, path) races on, and the cases themselves."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from benchmarks import race_checks as rc
from optimizer.cut_tree import Cut, CutTree
from optimizer.features import FeatureSet, SopFeature, ZFeature

PATHS = ("delta-spark", "delta-rs", "delta-sql")
FEATURES = FeatureSet(
    z=(ZFeature("k"), ZFeature("ts")), sop=(SopFeature("s LIKE '%7%'"),), sop_weights={"s LIKE '%7%'": 1.0}
)
# a cut tree (`optimizer.cut_tree`) as the service chooses for range workloads: files cut on k, rows within
# them on the timestamp (10:30 UTC on 2024-03-10, half an hour after Los Angeles skipped an hour) and on a string
SWITCHED = dt.datetime(2024, 3, 10, 10, 30, tzinfo=dt.UTC)
TREE = FeatureSet(
    z=(ZFeature("k"), ZFeature("ts")),
    cuts=CutTree(
        Cut("k", "<", "integer", 5),
        CutTree(Cut("ts", "<", "timestamp", SWITCHED), CutTree(), CutTree(), True),
        CutTree(Cut("s", "<=", "string", "s500"), CutTree(), CutTree(), True),
    ),
)
LAYOUTS = {"combined": FEATURES, "tree": TREE}
TREE_ROW_GROUP = 1_500  # bytes: the tree's files (about 10 kB) hold several row groups, its row-group cuts real
TARGET_FILE_SIZE = 10_000  # the 600 rows (about 27 kB in 6 files) become about three files
# (operation -> base table) per path: row tracking wherever the path can rewrite it, partitions by a
# date and by a timestamp for some; CLUSTER BY needs an unpartitioned table
DEFAULT = {
    "delta-spark": {
        **dict.fromkeys(rc.OPERATIONS, "rt"),
        "UPDATE": "rt_by_pt",
        "MERGE": "rt_by_day",
        "INSERT": "rt_by_pt",
        "enable row tracking": "plain_by_pt",
    },
    "delta-rs": {
        **dict.fromkeys(rc.OPERATIONS, "plain"),
        "UPDATE": "plain_by_pt",
        "MERGE": "plain_by_day",
        "INSERT": "plain_by_pt",
    },
    "delta-sql": dict.fromkeys(rc.OPERATIONS, "liquid_rt"),
}
FULL_SHAPES = {
    "delta-spark": ("rt", "rt_by_day", "rt_by_pt", "dv_rt", "plain", "plain_by_pt"),
    "delta-rs": ("plain", "plain_by_day", "plain_by_pt"),
    "delta-sql": ("liquid_rt",),
}


@dataclass(frozen=True)
class Case:
    operation: str
    path: str
    shape: str
    layout: str = "combined"  # a key of LAYOUTS
    lands: str = "mid-rewrite"  # or "before": committed before the rewrite opens the table (nothing to race)

    @property
    def tz(self) -> str:
        """The session time zone of the race: Los Angeles where partition values are timestamps."""
        return "America/Los_Angeles" if rc.SHAPES[self.shape].partition_by == "pt" else "UTC"

    @property
    def name(self) -> str:
        return f"{self.operation} / {self.path} / {self.shape} / {self.layout} / {self.lands}"


def cases(
    full: bool, operations: list[str] | None = None, paths: list[str] | None = None, layout: str = "combined"
) -> list[Case]:
    """The battery: one case per (operation, path), or with `full` every base table that suits both. With
    the tree layout, Delta's own OPTIMIZE (delta-sql) is left out: it lays out by its keys, not deltaopt's."""
    chosen = []
    for path in paths or PATHS:
        if path == "delta-sql" and layout != "combined":
            continue
        for operation in operations or list(rc.OPERATIONS):
            shapes = FULL_SHAPES[path] if full else (DEFAULT[path][operation],)
            for shape in shapes:
                if operation == "CLUSTER BY" and rc.SHAPES[shape].partition_by:
                    continue  # Delta refuses clustering keys on a partitioned table
                chosen.append(Case(operation, path, shape, layout))
    return chosen


def committed_first(layout: str) -> list[Case]:
    """Row-level operations committed before the rewrite opens the table, on every table shape the path
    rewrites: the rewrite must commit over deletion vectors, row ids, partitions by a date and a timestamp,
    and leave the rows, their ids and their rendered timestamps as the operation left them."""
    return [
        Case(operation, path, shape, layout, "before")
        for path in ("delta-spark", "delta-rs")
        for shape in FULL_SHAPES[path]
        for operation in ("DELETE", "UPDATE", "MERGE")
    ]
