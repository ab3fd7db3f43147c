"""The replay's report: tables per strategy and phase, the soundness cross-check, and PNG plots."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import table
from benchmarks.replay_model import STRATEGIES, TABLES, BatchTimes, Replay, ScanResult

MB = 1e6


def mismatches(result: Replay) -> list[ScanResult]:
    """Scans whose rows over the kept files differ from the rows over every file (must be none)."""
    return [s for s in result.scans if s.rows != s.reference_rows]


def phase_rows(result: Replay) -> list[tuple[object, ...]]:
    rows = []
    for phase in (1, 2):
        batches = [b for b in range(result.batches) if (b >= result.drift_at) == (phase == 2)]
        for strategy in STRATEGIES:
            scans = [s for s in result.scans if s.strategy == strategy and s.phase == phase]
            times = [result.times[strategy][b] for b in batches]
            known = [s for s in scans if s.standard_files is not None]
            rows.append(
                (
                    phase,
                    strategy,
                    len(scans),
                    f"{sum(s.seconds for s in scans):.1f}",
                    f"{sum(s.files_kept for s in scans) / max(len(scans), 1):.1f}",
                    f"{sum(s.bytes_read for s in scans) / MB:.1f}",
                    f"{_mean(known, 'standard_files'):.1f}"
                    + (
                        f" vs {_mean(known, 'files_kept'):.1f} ({len(scans) - len(known)} unknown)"
                        if len(known) < len(scans)
                        else ""
                    ),
                    f"{sum(s.files_total for s in scans) / max(len(scans), 1):.1f}",
                    f"{sum(s.lower_bound for s in scans) / MB:.1f}",
                    f"{sum(t.insert for t in times):.1f}",
                    f"{sum(t.optimize for t in times):.1f}",
                    f"{sum(t.decide for t in times):.1f}",
                    f"{sum(t.total for t in times):.1f}",
                )
            )
    return rows


def render(result: Replay, images: Sequence[Path]) -> str:
    totals = {s: sum(t.total for t in result.times[s]) for s in STRATEGIES}
    bad = mismatches(result)
    fallbacks = sum(s.reference == "spark" for s in result.scans)
    same_rows = all(result.rows[s] == result.rows["none"] for s in STRATEGIES)
    lines = [
        f"TPC-H `lineitem` + `orders` at scale {result.scale:g} in {result.batches} date-ordered insert batches; "
        f"{result.per_batch} queries per batch; the drift (new filter families) starts at batch "
        f"{result.drift_at + 1}; the one-off strategies run after batch {result.halfway + 1}. "
        f"The replay took {result.seconds / 60:.1f} min.\n",
        "## Totals\n",
        table(
            ("strategy", "total s", "insert s", "optimize s", "analysis + estimation s", "query s"),
            [
                (
                    s,
                    f"{totals[s]:.1f}",
                    *(f"{sum(getattr(t, k) for t in result.times[s]):.1f}" for k in ("insert", "optimize", "decide")),
                    f"{sum(t.query for t in result.times[s]):.1f}",
                )
                for s in STRATEGIES
            ],
        ),
        "\n## Per phase\n",
        "Per scan means of files kept by deltaopt's pruning and files DuckDB's Delta extension scans (a "
        "standard reader: the log's min/max of bare columns), out of the files the table had; where the "
        "extension failed on some scans, the DuckDB mean is over the other scans and deltaopt's mean over "
        "those same scans follows it. MB are the column bytes of the kept files (deltaopt's pruning), "
        "against the lower bound: the bytes of the matching rows' columns at the unoptimised copy's "
        "bytes per row (a rewritten copy compresses differently and can read a little less).\n",
        table(
            (
                "phase",
                "strategy",
                "scans",
                "query s",
                "files kept (deltaopt)",
                "MB read (deltaopt)",
                "files scanned (DuckDB)",
                "files in table",
                "lower bound MB",
                "insert s",
                "optimize s",
                "analysis + est. s",
                "total s",
            ),
            phase_rows(result),
        ),
        "\n## Soundness and data\n",
        f"Rows matched over the kept files against rows over every file: **{len(bad)} mismatches** in "
        f"{len(result.scans)} scans (reference: DuckDB's count; Spark over every file for {fallbacks} scans "
        "where the extension failed on the filter).\n",
        (
            f"The extension's failures (its files-scanned count is then unknown): {result.standard_errors}\n"
            if result.standard_errors
            else ""
        ),
        "Rows and order-insensitive hash of every table at the end, per strategy: "
        + ("identical across strategies." if same_rows else f"**differ**: {result.rows}")
        + "\n",
        "\n## The service's decisions\n",
        table(
            ("batch", "table", "action", "reason"),
            [(a["batch"] + 1, a["table"], a["action"], a["reason"][:150]) for a in result.actions],
        ),
        "\n## Plots\n",
        *(f"![{p.stem}]({p.name})\n" for p in images),
    ]
    return "\n".join(lines)


def plots(result: Replay, directory: Path, name: str) -> list[Path]:
    """Cumulative time per strategy; MB read per batch per strategy; files scanned by both readers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batches = list(range(1, result.batches + 1))
    paths = []

    fig, ax = plt.subplots(figsize=(7, 4))
    for s in STRATEGIES:
        running, total = [], 0.0
        for t in result.times[s]:
            total += t.total
            running.append(total)
        ax.plot(batches, running, marker="o", label=s)
    ax.axvline(result.drift_at + 0.5, color="grey", linestyle=":", label="drift")
    ax.set(xlabel="batch", ylabel="cumulative seconds", title="Cumulative time (insert + optimize + decide + query)")
    ax.legend()
    paths.append(_save(fig, directory / f"{name}-cumulative-time.png"))

    fig, ax = plt.subplots(figsize=(7, 4))
    for s in STRATEGIES:
        ax.plot(batches, [_sum(result, s, b, "bytes_read") / MB for b in range(result.batches)], marker="o", label=s)
    ax.plot(
        batches,
        [
            sum(x.lower_bound for x in result.scans if x.batch == b and x.strategy == "none") / MB
            for b in range(result.batches)
        ],
        linestyle="--",
        color="black",
        label="lower bound",
    )
    ax.axvline(result.drift_at + 0.5, color="grey", linestyle=":")
    ax.set(xlabel="batch", ylabel="MB read (deltaopt pruning)", title="Column bytes read by each batch's queries")
    ax.legend()
    paths.append(_save(fig, directory / f"{name}-bytes-per-batch.png"))

    fig, axes = plt.subplots(1, len(TABLES), figsize=(11, 4), sharey=False)
    for ax, table_name in zip(axes, TABLES, strict=True):
        for i, s in enumerate(STRATEGIES):
            color = f"C{i}"
            scans = [
                [x for x in result.scans if x.strategy == s and x.batch == b and x.table == table_name]
                for b in range(result.batches)
            ]
            scans = [[x for x in b if x.standard_files is not None] for b in scans]  # both readers, same scans
            ax.plot(batches, [_mean(b, "files_kept") for b in scans], marker="o", color=color, label=f"{s}: deltaopt")
            ax.plot(
                batches,
                [_mean(b, "standard_files") for b in scans],
                marker="x",
                linestyle="--",
                color=color,
                label=f"{s}: DuckDB",
            )
        ax.set(xlabel="batch", ylabel="files scanned per scan", title=table_name)
    axes[0].legend(fontsize=7)
    fig.suptitle("Files scanned per scan: deltaopt's pruning (solid) vs DuckDB's Delta extension (dashed)")
    paths.append(_save(fig, directory / f"{name}-files-scanned.png"))
    return paths


def _sum(result: Replay, strategy: str, batch: int, attribute: str) -> float:
    return float(sum(getattr(x, attribute) for x in result.scans if x.strategy == strategy and x.batch == batch))


def _mean(scans: list[ScanResult], attribute: str) -> float:
    values = [getattr(x, attribute) for x in scans if getattr(x, attribute) is not None]
    return sum(values) / len(values) if values else float("nan")


def _save(fig: object, path: Path) -> Path:
    fig.tight_layout()  # type: ignore[attr-defined]
    fig.savefig(path, dpi=110)  # type: ignore[attr-defined]
    import matplotlib.pyplot as plt

    plt.close(fig)  # type: ignore[arg-type]
    return path


def load(path: Path) -> Replay:
    """A replay saved as JSON by the benchmark, to render its report again without re-running it."""
    import json

    data = json.loads(path.read_text())
    data["scans"] = [ScanResult(**s) for s in data["scans"]]
    data["times"] = {k: [BatchTimes(**t) for t in v] for k, v in data["times"].items()}
    data["rows"] = {k: {n: tuple(v) for n, v in t.items()} for k, t in data["rows"].items()}
    return Replay(**data)


if __name__ == "__main__":  # python -m benchmarks.replay_report benchmarks/reports/replay.json
    import sys

    from benchmarks.common import write_report

    source = Path(sys.argv[1])
    result = load(source)
    name = source.stem
    body = render(result, plots(result, source.parent, name))
    command = (
        f"python -m benchmarks replay --scale {result.scale:g} --batches {result.batches} --queries {result.per_batch}"
    )
    write_report(name, "Replay: inserts and queries over time, four strategies, two kinds of reader", body, command)
