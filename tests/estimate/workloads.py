"""Small workloads and file statistics the estimate's tests share."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from costmodel.cost import CostModel
from optimizer.skipping.filestats import Bounds, FileStats
from querylog.records import ScanRecord

NOW = datetime(2024, 6, 1, tzinfo=UTC)
UNIT_COSTS = CostModel(overhead=1.0, base=1.0, per_z=1.0, per_sop=1.0, per_additional=0.1)


def records(*filters, count=1, age=timedelta(hours=1)):
    return [ScanRecord(f"q{i}", NOW - age, "t", tuple(filters), ("x",), "test") for i in range(count)]


def files(ranges):
    return [
        FileStats(f"f{i}", 100, {"x": Bounds("number", low, high, 0, type_name="bigint")})
        for i, (low, high) in enumerate(ranges)
    ]


def sizes(stats):
    return {s.path: {"x": 1e6, "y": 4e6} for s in stats}


def price_only(monkeypatch, *names: str) -> list[str]:  # type: ignore[no-untyped-def]
    """Make `evaluate_layouts` price only the candidate layouts `names` of those the decision offers (a test's
    time then goes to the layouts it compares); returns the list the offered candidates' names fill."""
    from optimizer.estimate import layouts

    offer = layouts.candidate_layouts
    offered: list[str] = []

    def compared(*args, **kwargs):  # type: ignore[no-untyped-def]
        candidates = offer(*args, **kwargs)
        offered.extend(name for name, _ in candidates)
        return [c for c in candidates if c[0] in names]

    monkeypatch.setattr(layouts, "candidate_layouts", compared)
    return offered


def priced_layouts(table, snapshot, sample, replay, features, thresholds) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """The candidate layouts of `features` for the whole of `table`, each priced on `sample` against `replay`
    at `UNIT_COSTS`, by name in the order `evaluate_layouts` gives them."""
    from optimizer.estimate.layouts import evaluate_layouts

    estimates = evaluate_layouts(
        table,
        snapshot,
        snapshot.files,
        sample=sample,
        replay=replay,
        features=features,
        thresholds=thresholds,
        cost_model=UNIT_COSTS,
    )
    return {e.name: e for e in estimates}


def replayed(table: Any, snapshot: Any, records: list, files: int, **settings: Any) -> tuple[Any, Any]:
    """(thresholds, replay) of `records` over every file of `snapshot`, for a job writing `files` files of
    its bytes, compression not estimated (`settings`: other thresholds)."""
    from optimizer.config import Thresholds
    from optimizer.estimate.layouts import workload_replay

    size = sum(f.size for f in snapshot.files)
    thresholds = Thresholds(min_new_bytes=1, target_file_size=size // files, estimate_compression=False, **settings)
    return thresholds, workload_replay(table, snapshot, snapshot.files, records=records, thresholds=thresholds, now=NOW)
