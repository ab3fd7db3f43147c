"""Timing and report helpers shared by the benchmarks."""

from __future__ import annotations

import platform
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

REPORTS = Path(__file__).parent / "reports"
T = TypeVar("T")


@contextmanager
def timer() -> Iterator[list[float]]:
    """``with timer() as t: ...`` then ``t[0]`` is the elapsed wall time in seconds."""
    elapsed: list[float] = []
    start = time.perf_counter()
    try:
        yield elapsed
    finally:
        elapsed.append(time.perf_counter() - start)


def timed(function: Callable[[], T]) -> tuple[T, float]:
    start = time.perf_counter()
    result = function()
    return result, time.perf_counter() - start


def fleet_config(work: Path, tables: list[dict[str, Any]], **defaults: Any) -> dict[str, Any]:
    """A service watching `tables` on a local Spark, state under `work`, small-table thresholds
    (`defaults` override them) and no jitter."""
    thresholds = {"min_new_bytes": 1_000_000, "sample_rows": 5000, "estimate_compression": False, **defaults}
    return {
        "spark": {"master": "local[2]", "shuffle_partitions": 2},
        "defaults": thresholds,
        "tables": tables,
        "service": {"state_dir": str(work / "state"), "jitter": 0},
    }


def by_size(sizes: str, prefix: str, measure: Callable[[Path, int], dict[str, object]]) -> list[dict[str, object]]:
    """`measure(work, size)` for each comma-separated size, each in its own temporary directory (removed
    after), printed as it ends; the rows for `sizes_table`."""
    import shutil
    import tempfile

    rows = []
    for count in (int(n) for n in sizes.split(",")):
        work = Path(tempfile.mkdtemp(prefix=prefix))
        try:
            rows.append(measure(work, count))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(rows[-1], flush=True)
    return rows


def sizes_table(rows: Sequence[dict[str, object]]) -> str:
    """Rows of one-key-per-column figures as a Markdown table, columns in the first row's order."""
    keys = list(rows[0])
    return table(keys, [[r[k] for k in keys] for r in rows])


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(c) for c in headers]] + [[f"{c:.3g}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"  # noqa: E731
    return "\n".join([line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, cells[1:])])


def write_report(name: str, title: str, body: str, command: str) -> Path:
    REPORTS.mkdir(parents=True, exist_ok=True)
    path = REPORTS / f"{name}.md"
    header = (
        f"# {title}\n\n"
        f"Command: `{command}`  \n"
        f"Run: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.node()} "
        f"({platform.machine()}, Python {platform.python_version()})\n\n"
    )
    path.write_text(header + body.rstrip() + "\n")
    print(f"\nreport written to {path}")
    return path


def short_key_lists(text: str) -> str:
    """Key lists as their size: a decision's join-induced features list hundreds of keys."""
    return re.sub(
        r"IN \(([^()]*)\)",
        lambda m: f"IN (<{m.group(1).count(',') + 1} keys>)" if m.group(1).count(",") >= 8 else m.group(0),
        text,
    )
