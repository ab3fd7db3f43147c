"""``deltaopt report TABLE``: the table's decisions as a chart an operator can read at a glance (bytes per
query over time as each estimate saw it, the jobs marked, each job's estimated benefit against what it
realised), drawn with matplotlib to a PNG, SVG or PDF file, or an HTML page holding the PNG."""

from __future__ import annotations

import argparse
import base64
import html
import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from costmodel.benefit import MB
from optimizer.errors import ConfigError

if TYPE_CHECKING:
    from optimizer.service.report import Report

FORMATS = (".png", ".svg", ".pdf", ".html")


def cmd_report(args: argparse.Namespace) -> int:
    """Read the table's decision records and draw them (`service.report` gives the series)."""
    import sys

    from optimizer.config import load_config
    from optimizer.service.decisions import DecisionLog
    from optimizer.service.report import report_of

    output = Path(args.output or f"{args.table}-report.png")
    if output.suffix.lower() not in FORMATS:
        raise ConfigError(f"--output {output}: the report is drawn to {', '.join(FORMATS)} files")
    config = load_config(args.config)
    table = config.table(args.table)
    records = DecisionLog(config.decision_log_path, config.service.decisions_path).read(table.name, args.last)
    report = report_of(table.name, records)
    if report.empty:
        print(f"{table.name}: no estimate or job recorded yet: nothing to draw", file=sys.stderr)
        return 1
    draw(report, output)
    print(output)
    return 0


def draw(report: Report, output: Path) -> None:
    """Two panels: bytes per query (estimates before and after each chosen layout; jobs as vertical lines),
    and each job's estimated against realised benefit in cluster-seconds."""
    plt = _pyplot()
    figure, (over_time, per_job) = plt.subplots(2, 1, figsize=(10, 7), constrained_layout=True)
    _bytes_over_time(over_time, report)
    _benefit_per_job(per_job, report)
    figure.suptitle(f"deltaopt: {report.table}")
    if output.suffix.lower() == ".html":
        _html(figure, output, report.table)
    else:
        figure.savefig(output)
    plt.close(figure)


def _pyplot() -> Any:
    """matplotlib's pyplot on a backend that draws to files (no display on a server)."""
    try:
        import matplotlib
    except ImportError as err:
        raise ConfigError("deltaopt report draws with matplotlib: pip install 'deltaopt[report]'") from err
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _bytes_over_time(axes: Any, report: Report) -> None:
    times = [e.ts for e in report.estimates]
    axes.plot(times, [e.before / MB for e in report.estimates], marker="o", label="new data now (estimate)")
    axes.plot(times, [e.after / MB for e in report.estimates], marker="x", label="after the chosen layout")
    for job in report.jobs:
        axes.axvline(job.ts, color="grey", linestyle="--", linewidth=1)
        axes.annotate(job.label, (job.ts, 1), xycoords=("data", "axes fraction"), rotation=90, va="top", fontsize=7)
    axes.set_ylabel("MB per query")
    axes.set_title("bytes a query reads, as each estimate saw them (jobs dashed)")
    axes.legend(loc="best", fontsize=8)


def _benefit_per_job(axes: Any, report: Report) -> None:
    jobs = report.jobs
    positions = list(range(len(jobs)))
    estimated = [j.estimated_for_scans if j.estimated_for_scans is not None else 0.0 for j in jobs]
    realised = [j.realised or 0.0 for j in jobs]
    axes.bar([p - 0.2 for p in positions], estimated, width=0.4, label="estimated, over the scans seen")
    axes.bar([p + 0.2 for p in positions], realised, width=0.4, label="realised")
    labels = [f"{j.ts:%m-%d %H:%M}\n{j.label}\n{j.scans} scans" for j in jobs]
    axes.set_xticks(positions, labels, fontsize=7)
    axes.set_ylabel("cluster-seconds saved")
    axes.set_title("each job: estimated vs realised benefit" if jobs else "no job committed yet")
    axes.legend(loc="best", fontsize=8)


def _html(figure: Any, output: Path, table: str) -> None:
    """An HTML page with the chart inline (one file to send or serve)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    image = base64.b64encode(buffer.getvalue()).decode("ascii")
    title = html.escape(f"deltaopt report: {table}")
    page = f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title></head><body>'
    page += f'<h1>{title}</h1><img alt="{title}" src="data:image/png;base64,{image}"></body></html>\n'
    output.write_text(page)
